package accountant

import (
	"errors"
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// spendOf folds ms into the Spend the budget decision receives.
func spendOf(t *testing.T, ms ...mechanism.Mechanism) Spend {
	t.Helper()
	var sp Spend
	for _, m := range ms {
		mu := m.GDPMu()
		sp.SumSq += mu * mu
		if !m.IsGaussian() {
			sp.NonGaussian++
		}
		var err error
		if sp.Comp, err = sp.Comp.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return sp
}

func TestDecide(t *testing.T) {
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	sub := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.7, Steps: 120} // epsilon 2.4612 at 1e-5 alone
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.5}
	muBudget := Budget{Scope: "s", Mu: 1, Delta: 1e-5}
	epsBudget := Budget{Scope: "s", Mu: 1.1, Epsilon: 3, Delta: 1e-5} // Mu(3, 1e-5) ~ 0.73; 1.1 shows which one decides
	for _, tc := range []struct {
		name     string
		b        Budget
		prior    []mechanism.Mechanism
		m        mechanism.Mechanism
		ok       bool
		unit     string // of the refusal
		rigorous bool
	}{
		{"empty scope, exactly the budget", muBudget, nil, g(1), true, "", false},
		{"empty scope, over the budget", muBudget, nil, g(1.0001), false, "mu", false},
		{"0.6 then exactly 0.8", muBudget, []mechanism.Mechanism{g(0.6)}, g(0.8), true, "", false},
		{"0.6 then 0.81", muBudget, []mechanism.Mechanism{g(0.6)}, g(0.81), false, "mu", false},
		{"external composes like gaussian", muBudget, []mechanism.Mechanism{{Kind: mechanism.KindExternal, Mu: 0.6}}, g(0.8), true, "", false},
		{"steps count", muBudget, nil, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5, Steps: 4}, true, "", false},
		{"steps count, over", muBudget, nil, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5, Steps: 5}, false, "mu", false},
		{"subsampled decided by PLD", epsBudget, []mechanism.Mechanism{g(0.3)}, sub, true, "", true},
		{"second subsampled over epsilon", epsBudget, []mechanism.Mechanism{g(0.3), sub}, sub, false, "epsilon", true},
		{"gaussian after subsampled is rigorous", epsBudget, []mechanism.Mechanism{sub}, g(0.05), true, "", true},
		{"laplace in a mu budget", muBudget, nil, lap, true, "", true},
		{"laplace too large", muBudget, nil, mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 6}, false, "epsilon", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decide(tc.b, spendOf(t, tc.prior...), tc.m, 0)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			} else {
				var be *BudgetError
				if !errors.As(err, &be) || !errors.Is(err, ErrBudget) {
					t.Fatalf("err = %v, want a *BudgetError", err)
				}
				if be.Unit != tc.unit || be.Scope != "s" || be.Mechanism != tc.m.Kind {
					t.Errorf("refusal %+v, want unit %s", be, tc.unit)
				}
				return
			}
			if c.Rigorous != tc.rigorous {
				t.Errorf("rigorous = %v, want %v", c.Rigorous, tc.rigorous)
			}
			if n := c.Comp.Count(); n != int64(len(tc.prior)+1) {
				t.Errorf("composition holds %d entries, want %d", n, len(tc.prior)+1)
			}
			// The figures agree with an independent accounting of the list.
			all := append(append([]mechanism.Mechanism(nil), tc.prior...), tc.m)
			want, err := RigorousEpsilon(all, tc.b.Delta)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(c.Epsilon/want-1) > 1e-3 {
				t.Errorf("epsilon %v, want about %v", c.Epsilon, want)
			}
			if !tc.rigorous {
				if want := math.Sqrt(math.Max(tc.b.Mu*tc.b.Mu-c.MuAfter*c.MuAfter, 0)); c.MuRemaining != want {
					t.Errorf("mu remaining %v, want %v", c.MuRemaining, want)
				}
			}
		})
	}
}

// An entry that cannot be accounted is refused with an error, not a decision.
func TestDecideUnaccountable(t *testing.T) {
	_, err := Decide(Budget{Scope: "s", Mu: 1, Delta: 1e-5}, Spend{}, mechanism.Mechanism{Kind: "magic"}, 0)
	if err == nil || errors.Is(err, ErrBudget) {
		t.Errorf("err = %v, want a refusal that is not a budget decision", err)
	}
}
