package ledger

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/internal/tally"

	"github.com/dpsql/dpsql/mechanism"
)

// otherProcess returns a ledger connection to path with its own memo, as
// another process holds it.
func otherProcess(t *testing.T, path string) *Ledger {
	t.Helper()
	o, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.db.Close() })
	return o
}

// scopeMuSpent returns sqrt(sum mu^2) of the charges recorded in the chain.
func scopeMuSpent(t *testing.T, l *Ledger) (float64, int) {
	t.Helper()
	rows, err := ReadLedger(context.Background(), l.db)
	if err != nil {
		t.Fatal(err)
	}
	sq, n := 0.0, 0
	for _, r := range rows {
		if r.Kind == EventCharge {
			sq += r.Mu * r.Mu
			n++
		}
	}
	return math.Sqrt(sq), n
}

// A decision made before another process charged must not be reused: the
// commit decides again under the write lock and refuses the overspend.
func TestCommitDecidesAgainAfterAnotherProcessCharged(t *testing.T) {
	ctx := context.Background()
	l, _, path := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	d, err := l.Decide(ctx, gauss(0.8))
	if err != nil {
		t.Fatal(err)
	}
	if d.fs == nil {
		t.Fatal("Decide made no decision on a scope with room")
	}
	if _, err := otherProcess(t, path).Charge(ctx, gauss(0.8), nil); err != nil {
		t.Fatal(err)
	}
	_, err = l.Commit(ctx, d, nil)
	var be *accountant.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("commit of a decision made before another process spent 0.8 of mu = 1: got %v, want a budget refusal", err)
	}
	if mu, n := scopeMuSpent(t, l); n != 1 || mu > 1 {
		t.Errorf("the chain holds %d charges, mu %.4g; want the other process's one", n, mu)
	}
}

// At an unchanged head the decision is reused (its figures are the
// receipt's); at a moved head it is not. The figures are marked so that
// which one Commit used shows.
func TestCommitReusesDecisionOnlyAtItsHead(t *testing.T) {
	ctx := context.Background()
	l, _, path := newLedger(t, mustBudget(t, "default", 10, 0, 1e-5))
	const mark = 123.5
	d, err := l.Decide(ctx, gauss(1))
	if err != nil {
		t.Fatal(err)
	}
	// Marked where the file does not record it (a Gaussian scope's
	// epsilon is its GDP figure, recorded as epsilon_spent): a mark in a
	// figure that dp_scope_state records would be a derived table that
	// disagrees with the chain, which the next charge refuses.
	d.st.Epsilon = mark
	rc, err := l.Commit(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Epsilon != mark {
		t.Errorf("head unchanged: receipt epsilon %v, want the decision's (%v)", rc.Epsilon, mark)
	}
	d, err = l.Decide(ctx, gauss(1))
	if err != nil {
		t.Fatal(err)
	}
	d.st.Epsilon = mark
	if _, err := otherProcess(t, path).Charge(ctx, gauss(1), nil); err != nil {
		t.Fatal(err)
	}
	if rc, err = l.Commit(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	// What can still be charged, as Remaining computes it afresh (at mu =
	// 10 the samplers' error, not the GDP remainder sqrt(97), decides).
	want, err := otherProcess(t, path).Remaining(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if rc.MuRemaining != want.MuRemaining || rc.Epsilon == mark {
		t.Errorf("head moved: receipt mu_remaining %v, epsilon %v, want %v decided again", rc.MuRemaining, rc.Epsilon, want.MuRemaining)
	}
}

// A decision that Decide could not make (over budget) is decided again by
// Commit, which refuses; a charge no head accepts is refused by Decide.
func TestDecideRefusals(t *testing.T) {
	ctx := context.Background()
	l, _, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	d, err := l.Decide(ctx, gauss(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, d, nil); !accountant.IsBudgetExceeded(err) {
		t.Errorf("mu 2 in a budget of 1: %v, want a budget refusal", err)
	}
	if _, err := l.Decide(ctx, gauss(-1)); err == nil {
		t.Error("Decide accepted mu = -1")
	}
	if _, err := l.Commit(ctx, nil, nil); err == nil {
		t.Error("Commit accepted a nil decision")
	}
	if _, n := scopeMuSpent(t, l); n != 0 {
		t.Errorf("%d charges recorded, want none", n)
	}
}

// Analysts in this process and in another make their decisions at the same
// head, then commit concurrently: together they never overspend, and
// exactly the charges that fit are accepted.
func TestConcurrentDecisionsNeverOverspend(t *testing.T) {
	ctx := context.Background()
	l, _, path := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	other := otherProcess(t, path)
	const analysts = 8 // mu 0.5 each: four fit in mu = 1
	ds := make([]*Decision, analysts)
	owners := make([]*Ledger, analysts)
	for i := range ds {
		owners[i] = l
		if i%2 == 1 {
			owners[i] = other
		}
		d, err := owners[i].Decide(ctx, gauss(0.5))
		if err != nil || d.fs == nil {
			t.Fatalf("decision %d: %v", i, err)
		}
		ds[i] = d
	}
	var wg sync.WaitGroup
	errs := make([]error, analysts)
	for i := range ds {
		wg.Go(func() { _, errs[i] = owners[i].Commit(ctx, ds[i], nil) })
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !accountant.IsBudgetExceeded(err):
			t.Errorf("analyst %d: %v, want a budget refusal or success", i, err)
		}
	}
	mu, n := scopeMuSpent(t, l)
	if ok != 4 || n != 4 || mu > 1*(1+1e-9) {
		t.Errorf("%d commits succeeded, %d charges recorded with mu %.6g; want 4, 4, <= 1", ok, n, mu)
	}
}

// A decision made ahead of a charge leaves its certified epsilon in the
// memo: a Charge of the same mechanism at the same head, which decides again
// inside its transaction, runs no second root search (dp_avgmix's head start
// relies on this), while a charge at a moved head searches again.
func TestDecideAheadFillsTheMemo(t *testing.T) {
	ctx := context.Background()
	l, _, path := newLedger(t, mustBudget(t, "default", 10, 0, 1e-5))
	sub := func(sigma float64) Charge {
		return Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: sigma, Steps: 500}, Details: map[string]any{"noise_tv": 1e-30}}
	}
	d, err := l.Decide(ctx, sub(1.5))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Ready() {
		t.Fatal("Decide made no decision on a fresh ledger")
	}
	before := tally.CertifiedSearches.Load()
	if _, err := l.Charge(ctx, sub(1.5), nil); err != nil {
		t.Fatal(err)
	}
	if n := tally.CertifiedSearches.Load() - before; n != 0 {
		t.Errorf("the charge ran %d certified-epsilon searches after Decide, want 0 (memo hit)", n)
	}
	// Another process charges: the next charge composes with more spend,
	// a composition nobody priced yet.
	if _, err := otherProcess(t, path).Charge(ctx, gauss(1), nil); err != nil {
		t.Fatal(err)
	}
	before = tally.CertifiedSearches.Load()
	if _, err := l.Charge(ctx, sub(1.5), nil); err != nil {
		t.Fatal(err)
	}
	if n := tally.CertifiedSearches.Load() - before; n == 0 {
		t.Error("a charge at a new head found its certified epsilon in the memo without a search")
	}
}
