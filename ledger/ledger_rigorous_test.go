package ledger

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

func subsampled(q, sigma float64, steps int) Charge {
	return Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: sigma, Steps: steps}}
}

func TestMixedScopeUsesRigorousAccountant(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 0, 3, 1e-5))
	if _, err := l.Charge(ctx, gauss(0.3), nil); err != nil {
		t.Fatal(err)
	}
	// q = 0.01, sigma = 0.7, T = 120 alone is epsilon 2.4612 at 1e-5.
	r, err := l.Charge(ctx, subsampled(0.01, 0.7, 120), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := accountant.RigorousEpsilon([]mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.3}, {Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.7, Steps: 120}}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Rigorous || math.Abs(r.Epsilon-want) > 1e-3*want {
		t.Errorf("receipt epsilon %v (rigorous %v), want the PLD figure %v", r.Epsilon, r.Rigorous, want)
	}
	st, _ := ReadStatus(ctx, db, "default")
	if !st.EpsilonRigorous.Valid || math.Abs(st.EpsilonRigorous.Float64-want) > 1e-3*want {
		t.Errorf("dp_budget_status.epsilon_rigorous = %v, want %v", st.EpsilonRigorous, want)
	}
	// dp_epsilon reads the same composition the budget check decided on.
	if got, err := l.ScopeEpsilon(ctx, "default", 1e-5); err != nil || got != st.EpsilonRigorous.Float64 {
		t.Errorf("ScopeEpsilon = %v, %v; want exactly epsilon_rigorous %v", got, err, st.EpsilonRigorous.Float64)
	}
	// The same release again would go past epsilon = 3: refused in epsilon units.
	_, err = l.Charge(ctx, subsampled(0.01, 0.7, 120), nil)
	var be *accountant.BudgetError
	if !errors.As(err, &be) || be.Unit != "epsilon" || !strings.Contains(err.Error(), "at delta = 1e-05") {
		t.Fatalf("over-budget subsampled charge: %v", err)
	}
	// A stale cache is rebuilt from the ledger and gives the same decision.
	if _, err := db.Exec(`UPDATE dp_scope_state SET pld = NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, subsampled(0.01, 0.7, 120), nil); !errors.As(err, &be) {
		t.Errorf("after dropping the cache: %v", err)
	}
	if r, err := l.Charge(ctx, gauss(0.05), nil); err != nil || !r.Rigorous {
		t.Errorf("small Gaussian after a subsampled entry: %+v %v (must be decided rigorously)", r, err)
	}
}

func TestUnaccountableLedgerRowRefuses(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if _, err := l.Charge(ctx, subsampled(0.01, 1, 10), nil); err != nil {
		t.Fatal(err)
	}
	// A row no accountant understands (written by hand, bypassing dpsql,
	// correctly chained).
	if _, err := appendRow(ctx, db, Row{Kind: EventCharge, Scope: "default", Mechanism: "magic", Mu: 0.1, Params: `{"mechanism":"magic"}`}); err != nil {
		t.Fatal(err)
	}
	_, err := l.Charge(ctx, subsampled(0.01, 1, 10), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot be re-accounted") {
		t.Errorf("charge after an unaccountable row: %v", err)
	}
}

// TestLedgerTinyDeltaManyCharges charges alternating releases through the
// ledger into a delta = 1e-9 scope: all are accepted (the old accountant
// refused the 26th or so with a round-off error).
func TestLedgerTinyDeltaManyCharges(t *testing.T) {
	ctx := context.Background()
	l, _, _ := newLedger(t, mustBudget(t, "default", 0, 3, 1e-9))
	n := 120
	if testing.Short() {
		n = 40
	}
	for i := range n {
		m := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.002}
		if i%2 == 1 {
			m = mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.001, Sigma: 2, Steps: 10}
		}
		r, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: m}, nil)
		if err != nil {
			t.Fatalf("charge %d: %v", i+1, err)
		}
		if i > 0 && !r.Rigorous {
			t.Fatalf("charge %d not decided rigorously", i+1)
		}
	}
}
