package ext_test

import (
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ext"
)

// A refused charge's code belongs to its statement only. A later statement
// that fails before it starts running (a syntax error, an unknown table: SQLite's
// statement trace never fires for it)
// must not be reported as over budget.
func TestTypedNotStaleAfterUnrunStatement(t *testing.T) {
	ctx := t.Context()
	db, err := ext.Open(filepath.Join(t.TempDir(), "stale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var x float64
	if _, err := conn.ExecContext(ctx, `SELECT dp_init(1.0, 1e-5)`); err != nil {
		t.Fatal(err)
	}
	refused := conn.QueryRowContext(ctx, `SELECT dp_gaussian(10, 1, 2)`).Scan(&x)
	if accountant.CodeOf(ext.Typed(conn, refused)) != accountant.CodeBudgetExceeded {
		t.Fatalf("the over-budget call: %v, want a budget refusal", refused)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`SELEC 1`, nil},
		{`SELECT * FROM no_such_table`, nil},
	} {
		err := conn.QueryRowContext(ctx, q.sql, q.args...).Scan(&x)
		if err == nil {
			t.Fatalf("%s succeeded", q.sql)
		}
		if got := ext.Typed(conn, err); accountant.CodeOf(got) != "" {
			t.Errorf("%s failed with %v, reported with the earlier refusal's code %q", q.sql, err, accountant.CodeOf(got))
		}
	}
}
