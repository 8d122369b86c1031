package ext_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ext"
)

// A budget refusal keeps its type across a real SQL statement: the error
// database/sql returns holds only SQLite's copy of the message (no type, no
// code), and ext.Typed recovers the *accountant.BudgetError from the
// connection that ran the statement. A later statement's error never picks
// up an earlier refusal.
func TestTypedErrorThroughSQL(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "typed.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var s string
	if err := conn.QueryRowContext(ctx, `SELECT dp_init(1.0, 1e-5)`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	var x float64
	if err := conn.QueryRowContext(ctx, `SELECT dp_gaussian(10, 1, 0.8)`).Scan(&x); err != nil {
		t.Fatal(err)
	}
	err = conn.QueryRowContext(ctx, `SELECT dp_gaussian(10, 1, 0.8)`).Scan(&x) // sqrt(0.64 + 0.64) > 1
	if err == nil {
		t.Fatal("an over-budget call was accepted")
	}
	if accountant.IsBudgetExceeded(err) || accountant.CodeOf(err) != "" {
		t.Fatalf("the raw error already carries a type (%v): the test no longer crosses SQLite", err)
	}
	typed := ext.Typed(conn, err)
	var be *accountant.BudgetError
	if !errors.As(typed, &be) || be.Scope != "default" || be.Need != 0.8 {
		t.Fatalf("Typed: %v (%T), want the *BudgetError of scope default", typed, typed)
	}
	if !accountant.IsBudgetExceeded(typed) || accountant.CodeOf(typed) != accountant.CodeBudgetExceeded ||
		!errors.Is(typed, accountant.CodeBudgetExceeded) || errors.Is(typed, accountant.CodeFileCapExceeded) {
		t.Errorf("code of %v: %q", typed, accountant.CodeOf(typed))
	}
	if typed.Error() != err.Error() {
		t.Errorf("Typed changed the message: %q -> %q", err, typed)
	}
	// Another failing statement (no charge refused): nothing typed.
	err2 := conn.QueryRowContext(ctx, `SELECT dp_gaussian(10, 1, -1)`).Scan(&x)
	if err2 == nil {
		t.Fatal("a negative mu was accepted")
	}
	if got := ext.Typed(conn, err2); accountant.CodeOf(got) != "" {
		t.Errorf("a later, unrelated error took the earlier refusal's code: %v", got)
	}
	// Nor does the old error, once a statement ran since.
	if got := ext.Typed(conn, err); accountant.CodeOf(got) != "" {
		t.Errorf("a stale error was typed after another statement: %v", got)
	}
}

// The file's cap has its own code.
func TestTypedFileCapThroughSQL(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cap.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{`SELECT dp_init(1.0, 1e-5, 'a')`, `SELECT dp_init(1.0, 1e-5, 'b')`, `SELECT dp_init(1.0, 1e-5, '*')`,
		`SELECT dp_use_scope('a')`, `SELECT dp_gaussian(1, 1, 0.8)`, `SELECT dp_use_scope('b')`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var x float64
	err = conn.QueryRowContext(ctx, `SELECT dp_gaussian(1, 1, 0.8)`).Scan(&x)
	if err == nil {
		t.Fatal("a charge over the file's cap was accepted")
	}
	if got := accountant.CodeOf(ext.Typed(conn, err)); got != accountant.CodeFileCapExceeded {
		t.Errorf("code %q, want %q (%v)", got, accountant.CodeFileCapExceeded, err)
	}
}
