package ext_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/ledger"
)

// One state, one figure on every SQL surface (issue 23, part 2):
// gdp_spend's return, dp_budget_remaining() and dp_budget_status's
// mu_remaining agree after Gaussian, Laplace and external charges (the view
// said 0 after a Laplace charge, gdp_spend returned 0), and that figure
// can be spent and no more.
func TestRemainingSameOnEverySurface(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string, args ...any) float64 {
		t.Helper()
		var x float64
		if err := db.QueryRowContext(ctx, q, args...).Scan(&x); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return x
	}
	if _, err := db.ExecContext(ctx, `SELECT dp_init(2.0)`); err != nil {
		t.Fatal(err)
	}
	one(`SELECT dp_gaussian(0, 1, 0.5)`)
	one(`SELECT dp_laplace(0, 1, 0.3)`)
	ret := one(`SELECT gdp_spend(0.2)`)
	fn := one(`SELECT dp_budget_remaining()`)
	view := one(`SELECT mu_remaining FROM dp_budget_status WHERE scope = 'default'`)
	l, err := ledger.OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.ReleaseLedger(path)
	st, err := l.Remaining(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if !(ret > 0.5) || ret != fn || fn != view || view != st.MuRemaining {
		t.Fatalf("gdp_spend returned %v, dp_budget_remaining() %v, dp_budget_status %v, Remaining %v", ret, fn, view, st.MuRemaining)
	}
	// No more than that: 1.0003 times it is refused (Room is precise to
	// 3e-4 on a mixed scope), it itself is accepted, then next to nothing
	// is left: with fn at least (1 - 3e-4) times the largest mu the scope
	// accepted, what remains is at most sqrt(1 - (1 - 3e-4)^2), 2.45%, of
	// that mu (a sum of squares: the last 3e-4 of mu leaves 2.45% of it).
	if _, err := db.ExecContext(ctx, `SELECT dp_gaussian(0, 1, ?)`, fn*(1+3e-4)); err == nil || !strings.Contains(err.Error(), "privacy budget exceeded") {
		t.Fatalf("a Gaussian of 1.0003 times the remaining figure: %v", err)
	}
	one(`SELECT dp_gaussian(0, 1, ?)`, fn)
	if r := one(`SELECT dp_budget_remaining()`); r > 0.0245*fn*(1+3e-4) {
		t.Errorf("after spending it, %v remains", r)
	}
}

// A scope of mu = 10^6 has room while dp_gaussian is accepted (it said 0):
// what its samplers let it certify, about epsilon 75 at delta 1e-5.
func TestRemainingHugeBudget(t *testing.T) {
	ctx := context.Background()
	db, err := ext.Open(filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `SELECT dp_init(1e6)`); err != nil {
		t.Fatal(err)
	}
	var r float64
	if err := db.QueryRowContext(ctx, `SELECT dp_gaussian(0, 1, 1)`).Scan(&r); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT dp_budget_remaining()`).Scan(&r); err != nil || !(r > 1) || math.IsInf(r, 0) {
		t.Fatalf("dp_budget_remaining() on a scope of mu 1e6: %v, %v", r, err)
	}
	var v float64
	if err := db.QueryRowContext(ctx, `SELECT mu_remaining FROM dp_budget_status WHERE scope = 'default'`).Scan(&v); err != nil || v != r {
		t.Fatalf("dp_budget_status says %v, dp_budget_remaining() %v (%v)", v, r, err)
	}
	if _, err := db.ExecContext(ctx, `SELECT dp_gaussian(0, 1, ?)`, r); err != nil {
		t.Fatalf("a Gaussian of the remaining %v: %v", r, err)
	}
	_, err = db.ExecContext(ctx, `SELECT dp_gaussian(0, 1, 1)`)
	if err == nil || !strings.Contains(err.Error(), "the most this scope can certify") {
		t.Fatalf("past the samplers' cap: %v", err)
	}
	t.Logf("room %v; refusal: %v", r, err)
}

// The worst refusals, through SQL, in words a user knows (issue 23,
// part 2): no PLD error, no +Inf, no JSON decoder's message.
func TestRefusalsInWords(t *testing.T) {
	ctx := context.Background()
	db, err := ext.Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `SELECT dp_init(1.0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `SELECT dp_laplace(0, 1, 0.5)`); err != nil { // a mixed scope
		t.Fatal(err)
	}
	for _, tc := range []struct{ q, want string }{
		{`SELECT dp_laplace(1, 1, 1e300)`, "dp_laplace: privacy budget exceeded in scope \"default\": this laplace call alone needs epsilon = 1e+300 at delta = 1e-05, over the budget of"},
		{`SELECT gdp_spend(1e300)`, "gdp_spend: privacy budget exceeded in scope \"default\": this external call alone needs mu = 1e+300, over the budget of 1; nothing was released"},
		{`SELECT dp_gaussian('[1e400]', 1, 0.001)`, "dp_gaussian: x: vector element 0 (1e400) is out of range"},
	} {
		_, err := db.ExecContext(ctx, tc.q)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", tc.q, err, tc.want)
			continue
		}
		for _, bad := range []string{"Inf", "pld:", "json:", "noise_tv", "NaN"} {
			if strings.Contains(err.Error(), bad) {
				t.Errorf("%s: %q holds %q", tc.q, err, bad)
			}
		}
	}
}
