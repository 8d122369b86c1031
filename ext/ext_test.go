package ext_test

import (
	"path/filepath"
	"testing"

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
