package ext

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// The handle and API table ext finds for a connection are that connection's:
// the table's db_filename of the handle names the file opened, the table is
// the SQLite go-sqlite3 links, and dpsql_handle is gone afterwards.
func TestHandleOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		sc := sqliteConn(dc)
		if sc == nil {
			t.Fatalf("driver connection %T is not go-sqlite3's", dc)
		}
		// Open already read and dropped the handle function.
		if _, _, err := handleOf(sc); err == nil || !strings.Contains(err.Error(), "no such function") {
			t.Errorf("dpsql_handle after the open: err = %v, want no such function", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A fresh go-sqlite3 connection still has it, once.
	c, err := (&sqlite3.SQLiteDriver{}).Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := c.(*sqlite3.SQLiteConn)
	if _, err := sc.Exec("SELECT dpsql_handle(1)", nil); err == nil || !strings.Contains(err.Error(), "internal to dpsql") {
		t.Errorf("dpsql_handle with a wrong nonce: err = %v", err)
	}
	api, h, err := handleOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	if got := handleFilename(h); got != path {
		t.Errorf("db_filename of the handle = %q, want %q", got, path)
	}
	want, err := SQLiteAPI()
	if err != nil || api != want {
		t.Errorf("API table %p, SQLiteAPI() = %p, %v", api, want, err)
	}
	if v, want := libVersion(), sqlite3VersionNumber(t); v != want {
		t.Errorf("the table's libversion_number = %d, go-sqlite3 reports %d", v, want)
	}
	if _, _, err := handleOf(sc); err == nil {
		t.Error("dpsql_handle answered twice")
	}
}

func sqlite3VersionNumber(t *testing.T) int {
	_, n, _ := sqlite3.Version()
	return n
}
