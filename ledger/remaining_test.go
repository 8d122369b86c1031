package ledger

import (
	"context"
	"math"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// One state, one figure (issue 23, part 2): what a charge's receipt says
// can still be charged is what Remaining computes afresh in another
// process, what dp_budget_status shows and what Verify recomputes; a
// Gaussian of that mu is accepted and one a little larger refused. Made
// after Gaussian, Laplace and external charges, in a file whose cap binds
// one scope and not the other.
func TestOneRemainingFigure(t *testing.T) {
	ctx := context.Background()
	l, db, path := newLedger(t, mustBudget(t, "default", 2, 0, 1e-5))
	if err := l.Init(ctx, mustBudget(t, "other", 1, 0, 1e-5)); err != nil {
		t.Fatal(err)
	}
	if err := l.Init(ctx, mustBudget(t, accountant.FileScope, 1.5, 0, 1e-5)); err != nil {
		t.Fatal(err)
	}
	lap := func(scope string, eps float64) Charge {
		return Charge{Scope: scope, Mechanism: mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: eps}, Query: "SELECT test"}
	}
	tvGauss := func(scope string, mu float64) Charge {
		return Charge{Scope: scope, Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu},
			Details: mechanism.Gaussian{Dim: 1, NoiseTV: 0x1p-125}, Query: "SELECT test"}
	}
	var last Receipt
	for _, c := range []Charge{tvGauss("default", 0.3), lap("default", 0.2), tvGauss("other", 0.2), gauss(0.1), lap("other", 0.1)} {
		rc, err := l.Charge(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = rc
	}
	view := func(scope string) float64 {
		var r float64
		if err := db.QueryRowContext(ctx, `SELECT mu_remaining FROM dp_budget_status WHERE scope = ?`, scope).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	fresh := otherProcess(t, path)
	for _, scope := range []string{"default", "other", accountant.FileScope} {
		st, err := fresh.Remaining(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		mine, err := l.Remaining(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		if v := view(scope); st.MuRemaining != mine.MuRemaining || v != st.MuRemaining || !(v > 0) {
			t.Errorf("scope %s: Remaining says %v (this process %v), dp_budget_status %v", scope, st.MuRemaining, mine.MuRemaining, v)
		}
		if scope == "other" && last.MuRemaining != st.MuRemaining {
			t.Errorf("the last charge's receipt says %v, Remaining %v", last.MuRemaining, st.MuRemaining)
		}
		if scope == accountant.FileScope {
			continue
		}
		// The figure is chargeable, and (to Room's precision) no more.
		d, err := fresh.Decide(ctx, tvGauss(scope, st.MuRemaining*(1+3e-4)))
		if err != nil {
			t.Fatal(err)
		}
		if d.Ready() {
			t.Errorf("scope %s: a Gaussian of 1.0003 times the remaining %v is accepted", scope, st.MuRemaining)
		}
		if d, err := fresh.Decide(ctx, tvGauss(scope, st.MuRemaining)); err != nil || !d.Ready() {
			t.Errorf("scope %s: a Gaussian of the remaining %v is refused (%v)", scope, st.MuRemaining, err)
		}
	}
	// The cap binds "default" (its own room is larger than the cap's).
	own, _ := accountant.Room(ctx, l.memo.scopes["default"].budget, l.memo.scopes["default"].spend, roomTV)
	if capRoom := view(accountant.FileScope); !(own > capRoom) || view("default") != capRoom {
		t.Errorf("default's own room %v, the cap's %v, shown %v", own, capRoom, view("default"))
	}
	if _, err := Verify(ctx, db); err != nil {
		t.Fatal(err)
	}
	// A Laplace charge leaves a figure, not 0 (the view said 0 before).
	if r := view("other"); !(r > 0.1) || math.IsInf(r, 0) {
		t.Errorf("after a Laplace charge, other shows %v", r)
	}
}
