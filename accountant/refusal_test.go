package accountant

import (
	"strings"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Refusals say why in words a user knows (issue 23, part 2): no +Inf, no
// "noise_tv", no error of the PLD code.
func TestRefusalMessages(t *testing.T) {
	tv := release.NoiseTVOf(1)
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.5}
	huge := Budget{Scope: "big", Mu: 1e6, Delta: 1e-5}
	small := Budget{Scope: "default", Mu: 1, Delta: 1e-5}
	for _, tc := range []struct {
		name  string
		b     Budget
		prior []mechanism.Mechanism
		m     mechanism.Mechanism
		want  []string
	}{
		// A scope of mu 10^6 holds at most what its samplers let it
		// certify: about epsilon 75 at delta 1e-5. The old message said
		// "needs epsilon = +Inf ... pays the samplers' total-variation
		// bound noise_tv".
		{"samplers' cap", huge, []mechanism.Mechanism{g(5)}, g(9),
			[]string{`privacy budget exceeded in scope "big"`, "the most this scope can certify at that delta", "2^-125 per value drawn", "nothing was released"}},
		{"samplers' cap, mixed", huge, []mechanism.Mechanism{g(5), lap}, g(9),
			[]string{"the most this scope can certify at that delta"}},
		// dp_laplace(1, 1, 1e300) failed with "pld: loss range search did
		// not terminate".
		{"laplace 1e300", small, nil, mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 1e300},
			[]string{"this laplace call alone needs epsilon = 1e+300 at delta = 1e-05, over the budget of"}},
		// gdp_spend(1e300) after a Laplace charge failed with "mu must be
		// positive and finite, got +Inf".
		{"gdp_spend 1e300, mixed", small, []mechanism.Mechanism{lap}, mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: 1e300},
			[]string{"this external call alone needs mu = 1e+300, over the budget of 1"}},
		{"gdp_spend 1e300", small, []mechanism.Mechanism{g(0.5)}, mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: 1e300},
			[]string{"alone needs mu = 1e+300"}},
		{"plain", small, []mechanism.Mechanism{g(0.9)}, g(0.5),
			[]string{"spent mu = 0.9, this gaussian call needs mu = 0.5, which would bring the total to 1.02956, over the budget of 1"}},
		{"plain epsilon", small, []mechanism.Mechanism{lap, lap, lap, lap, lap, lap, lap, lap}, lap,
			[]string{"spent epsilon = ", " at delta = 1e-05, this laplace call needs epsilon = ", "over the budget of 4.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spendAfter(t, tc.b, tc.prior, tv)
			_, err := Decide(tc.b, s, tc.m, tv)
			if !IsBudgetExceeded(err) {
				t.Fatalf("not refused for budget: %v", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, bad := range []string{"Inf", "noise_tv", "pld:", "NaN"} {
				if strings.Contains(msg, bad) {
					t.Errorf("message %q holds %q", msg, bad)
				}
			}
		})
	}
}

// Exactly 100 charges of 0.1 spend a budget of 1: the last is accepted and
// the scope shows 1 of 1 spent, not 1.0000000000000002 (issue 23, part 2).
func TestHundredTenthsSpendOne(t *testing.T) {
	b := Budget{Scope: "default", Mu: 1, Delta: 1e-5}
	var s Spend
	var last Checked
	for i := range 100 {
		c, err := Decide(b, s, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.1}, 0)
		if err != nil {
			t.Fatalf("charge %d: %v", i+1, err)
		}
		s, last = s.With(c), c
	}
	if last.MuAfter != 1 || last.MuRemaining != 0 {
		t.Errorf("after 100 charges of 0.1: spent %v, remaining %v; want 1 and 0", last.MuAfter, last.MuRemaining)
	}
	if _, err := Decide(b, s, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.01}, 0); !IsBudgetExceeded(err) {
		t.Errorf("a 101st charge: %v", err)
	}
	if r, err := Room(t.Context(), b, s, 0); err != nil || r != 0 {
		t.Errorf("room after: %v, %v", r, err)
	}
}
