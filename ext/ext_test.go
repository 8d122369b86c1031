package ext_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// TestOpenScope checks that OpenScope's connections charge the scope it was
// given (escaped into the DSN), and the default scope for "".
func TestOpenScope(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scopes.db")
	for _, tc := range []struct{ scope, want string }{
		{"", sqlfuncs.DefaultScope},
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
	if err.Error() != want || !errors.Is(err, accountant.ErrUnknownScope) {
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
