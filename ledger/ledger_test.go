package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

func newLedger(t *testing.T, b accountant.Budget) (*Ledger, *sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Init(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return l, db, path
}

func mustBudget(t *testing.T, scope string, mu, eps, delta float64) accountant.Budget {
	t.Helper()
	b, err := accountant.NewBudget(scope, mu, eps, delta)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gauss(mu float64) Charge {
	return Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu}, Query: "SELECT test"}
}

func TestChargeStopsExactlyAtBudget(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	n := 0
	var last error
	for i := 0; i < 150; i++ {
		if _, last = l.Charge(ctx, gauss(0.1), nil); last != nil {
			break
		}
		n++
	}
	if n != 100 {
		t.Fatalf("%d charges of mu = 0.1 fit in a budget of mu = 1, want exactly 100 (sqrt(100 * 0.01) = 1)", n)
	}
	var be *accountant.BudgetError
	if !errors.As(last, &be) || !errors.Is(last, accountant.ErrBudget) {
		t.Fatalf("refusal is %T %v, want *BudgetError", last, last)
	}
	for _, want := range []string{`scope "default"`, "spent mu = 1", "needs mu = 0.1", "budget of 1", "nothing was released"} {
		if !strings.Contains(last.Error(), want) {
			t.Errorf("refusal %q does not say %q", last, want)
		}
	}
	st, err := ReadStatus(ctx, db, "default")
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 100 || st.MuSpent > 1+1e-12 || st.MuRemaining > 1e-6 {
		t.Errorf("status after spending everything: %+v", st)
	}
}

func TestChargeStatusFigures(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	r, err := l.Charge(ctx, gauss(0.6), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.MuSpent != 0.6 || r.MuRemaining < 0.8-1e-12 || r.MuRemaining > 0.8+1e-12 {
		t.Errorf("receipt %+v: want spent 0.6, remaining 0.8 (sqrt(1 - 0.36))", r)
	}
	st, _ := ReadStatus(ctx, db, "default")
	wantEps, _ := accountant.Epsilon(0.6, 1e-5)
	if st.MuSpent != 0.6 || st.EpsilonSpent != wantEps || st.Entries != 1 {
		t.Errorf("dp_budget_status = %+v, want mu_spent 0.6, epsilon %v", st, wantEps)
	}
	// A charge of exactly the remaining mu fits; anything more does not.
	if _, err := l.Charge(ctx, gauss(0.8), nil); err != nil {
		t.Errorf("spending exactly the remaining 0.8: %v", err)
	}
	if _, err := l.Charge(ctx, gauss(0.001), nil); !errors.Is(err, accountant.ErrBudget) {
		t.Errorf("spending past the budget: %v", err)
	}
}

func TestFailedReleaseChargesNothing(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	_, err := l.Charge(ctx, gauss(0.5), func(tx *sql.Tx) (map[string]any, error) {
		if _, err := tx.Exec(`CREATE TABLE released(x)`); err != nil {
			return nil, err
		}
		return nil, errors.New("boom")
	})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n)
	if n != 0 {
		t.Errorf("%d ledger rows after a failed release", n)
	}
	if err := db.QueryRow(`SELECT count(*) FROM released`).Scan(&n); err == nil {
		t.Errorf("the failed release's table exists")
	}
	// A successful release records its details and its table together.
	_, err = l.Charge(ctx, gauss(0.5), func(tx *sql.Tx) (map[string]any, error) {
		_, err := tx.Exec(`CREATE TABLE released(x)`)
		return map[string]any{"into": "released"}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var params string
	db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge'`).Scan(&params)
	if !strings.Contains(params, `"into":"released"`) || !strings.Contains(params, `"mechanism":"gaussian"`) {
		t.Errorf("params = %s", params)
	}
}

func TestLedgerIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if _, err := l.Charge(ctx, gauss(0.1), nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE dp_ledger SET mu = 0`,
		`DELETE FROM dp_ledger`,
		`UPDATE dp_budget SET mu_budget = 100`,
		`DELETE FROM dp_budget`,
	} {
		_, err := db.Exec(q)
		if err == nil || !(strings.Contains(err.Error(), "append-only") || strings.Contains(err.Error(), "cannot")) {
			t.Errorf("%s: err = %v, want the trigger's refusal", q, err)
		}
	}
}

func TestVerifyCatchesTampering(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		tamper []string
	}{
		{"edited mu", []string{`DROP TRIGGER dp_ledger_no_update`, `UPDATE dp_ledger SET mu = 0.01 WHERE id = 3`}},
		{"edited params", []string{`DROP TRIGGER dp_ledger_no_update`, `UPDATE dp_ledger SET params = replace(params, '0.2', '0.02') WHERE id = 3`}},
		{"deleted row", []string{`DROP TRIGGER dp_ledger_no_delete`, `DELETE FROM dp_ledger WHERE id = 3`}},
		{"edited budget event", []string{`DROP TRIGGER dp_ledger_no_update`, `UPDATE dp_ledger SET mu = 100, params = replace(params, '"mu_budget":1', '"mu_budget":100') WHERE id = 1`}},
		{"rehashed row", []string{`DROP TRIGGER dp_ledger_no_update`, `UPDATE dp_ledger SET hash = prev_hash WHERE id = 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
			for _, mu := range []float64{0.1, 0.2, 0.3} {
				if _, err := l.Charge(ctx, gauss(mu), nil); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := Verify(ctx, db); err != nil || n != 4 { // the budget event and 3 charges
				t.Fatalf("intact ledger: Verify = %d, %v", n, err)
			}
			for _, q := range tc.tamper {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Verify(ctx, db); err == nil {
				t.Errorf("Verify accepted a ledger with a %s", tc.name)
			}
		})
	}
}

func TestScopesAndErrors(t *testing.T) {
	ctx := context.Background()
	l, db, path := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if err := l.Init(ctx, mustBudget(t, "default", 2, 0, 1e-5)); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("re-creating a scope: %v", err)
	}
	eb := mustBudget(t, "study", 0, 1, 1e-5)
	if err := l.Init(ctx, eb); err != nil {
		t.Fatal(err)
	}
	st, _ := ReadStatus(ctx, db, "study")
	if !st.EpsilonBudget.Valid || st.EpsilonBudget.Float64 != 1 || st.MuBudget < 0.268 || st.MuBudget > 0.2681 {
		t.Errorf("(1, 1e-5) scope: %+v; want mu budget 0.26805", st)
	}
	c := gauss(0.1)
	c.Scope = "nope"
	if _, err := l.Charge(ctx, c, nil); !errors.Is(err, ErrUnknownScope) {
		t.Errorf("unknown scope: %v", err)
	}
	for _, bad := range []mechanism.Mechanism{{Kind: "magic"}, {Kind: mechanism.KindGaussian, Mu: -1}} {
		if _, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: bad}, nil); err == nil {
			t.Errorf("charge of %+v accepted", bad)
		}
	}
	if _, err := accountant.NewBudget("x", 1, 1, 1e-5); err == nil {
		t.Error("budget with both mu and epsilon accepted")
	}
	if _, err := accountant.NewBudget("x", 0, 0, 1e-5); err == nil {
		t.Error("zero budget accepted")
	}
	if _, err := accountant.NewBudget("x", 1, 0, 0); err == nil {
		t.Error("delta 0 accepted")
	}
	if _, err := OpenLedger(":memory:"); err == nil {
		t.Error("in-memory ledger accepted")
	}
	// A database without a ledger says how to create one.
	plain := filepath.Join(filepath.Dir(path), "plain.db")
	pl, _ := OpenLedger(plain)
	if _, err := pl.Charge(ctx, gauss(0.1), nil); !errors.Is(err, ErrNoLedger) {
		t.Errorf("charge without a ledger: %v", err)
	}
}

func TestIsBudgetExceededAndCodes(t *testing.T) {
	be := &accountant.BudgetError{Scope: "s", Unit: "mu", Mechanism: "gaussian"}
	capped := &accountant.BudgetError{Scope: accountant.FileScope, Unit: "mu", Mechanism: "gaussian"}
	for _, tc := range []struct {
		err  error
		want bool
		code accountant.Code
	}{
		{be, true, accountant.CodeBudgetExceeded},
		{fmt.Errorf("dp_gaussian: %w", be), true, accountant.CodeBudgetExceeded},
		{capped, true, accountant.CodeFileCapExceeded},
		// Only the message, as it comes back through SQLite: no type, no
		// code (ext.Typed recovers them through the connection).
		{errors.New("dp_gaussian: " + be.Error()), false, ""},
		{errors.New("dp_gaussian: mu must be > 0"), false, ""},
		{fmt.Errorf("x: %w", accountant.ErrNeighbours), false, accountant.CodeNeighbours},
		{fmt.Errorf("x: %w", ErrUnknownScope), false, accountant.CodeUnknownScope},
		{fmt.Errorf("x: %w", ErrWriteConflict), false, accountant.CodeWriteConflict},
		{nil, false, ""},
	} {
		if got := accountant.IsBudgetExceeded(tc.err); got != tc.want {
			t.Errorf("IsBudgetExceeded(%v) = %v", tc.err, got)
		}
		if got := accountant.CodeOf(tc.err); got != tc.code {
			t.Errorf("CodeOf(%v) = %q, want %q", tc.err, got, tc.code)
		}
		if tc.code != "" && !errors.Is(tc.err, tc.code) && (tc.code == accountant.CodeBudgetExceeded || tc.code == accountant.CodeFileCapExceeded) {
			t.Errorf("errors.Is(%v, %q) = false", tc.err, tc.code)
		}
	}
	if errors.Is(be, accountant.CodeFileCapExceeded) || errors.Is(capped, accountant.CodeBudgetExceeded) {
		t.Error("a scope's refusal and the file cap's are told apart")
	}
}
