package ext

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/sqlfuncs"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// The handle and API table ext finds for a connection are that connection's:
// the table's db_filename of the handle names the file opened, the table is
// the SQLite go-sqlite3 links (the table package sqlite's capture received, which
// SQLiteAPI returns), and dpsql_handle is gone afterwards.
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

// handleCount is the number of connections ext holds a handle for.
func handleCount() int {
	n := 0
	handles.Range(func(_, _ any) bool { n++; return true })
	return n
}

// Closing a connection, curator or analyst, drops its entry in handles and
// its sqlfuncs state: a closed sqlite3* must never be looked up again (its
// address may be reused by the next connection).
func TestCloseDropsHandle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	owner, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, err := owner.Exec(`SELECT dp_init(1.0, 1e-5, 'analyst')`); err != nil {
		t.Fatal(err)
	}
	before := handleCount()
	known := map[any]bool{}
	handles.Range(func(k, _ any) bool { known[k] = true; return true })
	for _, role := range []string{"curator", "analyst"} {
		var db *sql.DB
		if role == "analyst" {
			db, err = OpenAnalyst(path, "analyst")
		} else {
			db, err = OpenScope(context.Background(), path, "analyst")
		}
		if err != nil {
			t.Fatal(err)
		}
		// The connection's entry is the one added by the open.
		var h hostHandle
		handles.Range(func(k, v any) bool {
			if _, old := known[k]; !old {
				h = v.(hostHandle)
			}
			return true
		})
		if h.db == nil {
			t.Fatalf("%s: no handle for the open connection", role)
		}
		if _, ok := sqlfuncs.Lookup(h.db); !ok {
			t.Fatalf("%s: sqlfuncs has no state for the open connection", role)
		}
		if got := handleCount(); got != before+1 {
			t.Errorf("%s: %d handles with the connection open, want %d", role, got, before+1)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if got := handleCount(); got != before {
			t.Errorf("%s: %d handles after the close, want %d", role, got, before)
		}
		if _, ok := sqlfuncs.Lookup(h.db); ok {
			t.Errorf("%s: sqlfuncs still has state for the closed connection", role)
		}
	}
}
