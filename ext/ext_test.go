package ext_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/ext"
)

// TestOpenScope checks that OpenScope's connections charge the scope it was
// given (escaped into the DSN), and the default scope for "".
func TestOpenScope(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scopes.db")
	for _, tc := range []struct{ scope, want string }{
		{"", accountant.DefaultScope},
		{"analysis", "analysis"},
		{"a&b c=d?", "a&b c=d?"},
	} {
		db, err := ext.OpenScope(t.Context(), path, tc.scope)
		if err != nil {
			t.Fatalf("OpenScope(%q): %v", tc.scope, err)
		}
		var got string
		err = db.QueryRowContext(t.Context(), `SELECT dp_scope()`).Scan(&got)
		db.Close()
		if err != nil || got != tc.want {
			t.Errorf("OpenScope(%q): dp_scope() = %q, %v; want %q", tc.scope, got, err, tc.want)
		}
	}
}

// TestOpenScopeUnknown checks that a scope missing from a file's ledger fails
// at OpenScope, not at the first charge, and that a file without a ledger
// opens with any scope (dp_init can create it).
func TestOpenScopeUnknown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT dp_init(1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = ext.OpenScope(t.Context(), path, "nosuch")
	if err == nil {
		db.Close()
		t.Fatal("OpenScope(nosuch) succeeded")
	}
	want := "opening " + path + ": unknown budget scope \"nosuch\": create it with `dpsql init DB --scope nosuch --mu 1` or SELECT dp_init(1.0, 1e-5, 'nosuch')"
	if err.Error() != want || !errors.Is(err, ledger.ErrUnknownScope) {
		t.Fatalf("OpenScope(nosuch): %v\nwant %s (wrapping ErrUnknownScope)", err, want)
	}
	for _, scope := range []string{"", "default"} {
		db, err := ext.OpenScope(t.Context(), path, scope)
		if err != nil {
			t.Fatalf("OpenScope(%q): %v", scope, err)
		}
		db.Close()
	}
}

// TestNewFilePageSize checks that Open creates files with PageSize pages in
// WAL mode, and leaves an existing file's page size alone.
func TestNewFilePageSize(t *testing.T) {
	pageSize := func(path string) (int, string) {
		t.Helper()
		db, err := ext.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t(x)`); err != nil {
			t.Fatal(err)
		}
		var n int
		var mode string
		db.QueryRow(`PRAGMA page_size`).Scan(&n)
		db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
		return n, mode
	}
	dir := t.TempDir()
	if n, mode := pageSize(filepath.Join(dir, "new.db")); n != ext.PageSize || mode != "wal" {
		t.Errorf("new file: page size %d, journal %s; want %d, wal", n, mode, ext.PageSize)
	}
	old := filepath.Join(dir, "old.db")
	plain, err := sql.Open("sqlite3", old)
	if err != nil {
		t.Fatal(err)
	}
	plain.Exec(`PRAGMA page_size = 4096`)
	plain.Exec(`CREATE TABLE t(x)`)
	plain.Close()
	if n, _ := pageSize(old); n != 4096 {
		t.Errorf("existing file: page size changed to %d", n)
	}
}
