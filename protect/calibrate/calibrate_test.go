package calibrate

import (
	"math"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

// Under a mu budget the Gaussian split gives mu_b^2 proportional to
// sqrt(W_b), composing to exactly mu; each sigma is the value's L2
// sensitivity (sqrt(max_groups) rows bound) over its mu_b; and the objective
// equals the Lagrange optimum (sum sqrt(W_b))^2 max_groups / mu^2, below any
// other split of the same mu.
func TestGaussianSplitClosedForm(t *testing.T) {
	vs := []Value{
		{Name: "a", Rows: 1, Bound: 1, Weight: 1},
		{Name: "b", Rows: 3, Bound: 1, Weight: 4},
		{Name: "c", Rows: 2, Bound: 1, Weight: 9, Dim: 8},
	}
	const mu, k = 0.7, 4
	p, err := Make(Request{Values: vs, MaxGroups: k, Mu: mu})
	if err != nil {
		t.Fatal(err)
	}
	if p.Law != Gaussian || p.Mechanism.Kind != mechanism.KindGaussian || p.Mechanism.Mu != mu {
		t.Fatalf("plan %+v", p)
	}
	var sq, sumRoot float64
	for _, v := range vs {
		sumRoot += math.Sqrt(v.Weight)
	}
	for i, n := range p.Values {
		sq += n.Mu * n.Mu
		if want := mu * mu * math.Sqrt(vs[i].Weight) / sumRoot; !near(n.Mu*n.Mu, want, 1e-12) {
			t.Errorf("%s: mu_b^2 %v, want %v", n.Name, n.Mu*n.Mu, want)
		}
		if want := math.Sqrt(k) * float64(n.Rows) / n.Mu; !near(n.Sigma, want, 1e-12) {
			t.Errorf("%s: sigma %v, want %v", n.Name, n.Sigma, want)
		}
	}
	if !near(sq, mu*mu, 1e-12) {
		t.Errorf("sum mu_b^2 = %v, want %v", sq, mu*mu)
	}
	opt := sumRoot * sumRoot * k / (mu * mu)
	if !near(p.Objective, opt, 1e-12) {
		t.Errorf("objective %v, want the optimum %v", p.Objective, opt)
	}
	equal := 0.0
	for _, v := range vs {
		equal += v.Weight * k / (mu * mu / 3)
	}
	if !(opt < equal) {
		t.Errorf("optimum %v not below the equal split's %v", opt, equal)
	}
	if p.GaussianDraws() != 1+1+8 {
		t.Errorf("Gaussian draws per group %d, want 10", p.GaussianDraws())
	}
}

// A fixed-point sum's quantum is a power of two no finer than its noise grid,
// and its sensitivity counts half a quantum per row.
func TestFixedQuantum(t *testing.T) {
	for _, law := range []Law{Gaussian, Laplace} {
		p, err := Make(Request{Values: []Value{{Name: "sum", Rows: 2, Bound: 50, Fixed: true, Weight: 1}}, MaxGroups: 1,
			Epsilon: 1, Delta: 1e-6, Noise: law})
		if err != nil {
			t.Fatal(err)
		}
		n := p.Values[0]
		if fr, _ := math.Frexp(n.Quantum); fr != 0.5 || n.Quantum < n.Grid() || n.Quantum > 0x1p-13*n.Scale() {
			t.Errorf("%s: quantum %v, grid %v, scale %v", law, n.Quantum, n.Grid(), n.Scale())
		}
		s := 2 * (50 + n.Quantum/2)
		if law == Laplace {
			s += n.Lap.Grid
		}
		if n.Sensitivity < s || n.Sensitivity > s*(1+1e-15) {
			t.Errorf("%s: sensitivity %v, want %v", law, n.Sensitivity, s)
		}
	}
}

// Under (epsilon, delta) with Laplace noise the split gives epsilon_b
// proportional to W_b^(1/3), their sum within the accountant's grid of
// epsilon less the selection's shift; all of delta but a hundredth (capped
// by the scope's room) goes to the selection; and the accountant certifies
// the charged composite (epsilon, delta)-DP.
func TestLaplaceSplitClosedForm(t *testing.T) {
	vs := []Value{
		{Name: "persons", Rows: 1, Bound: 1, Weight: 2.5, Selection: true},
		{Name: "sum", Rows: 1, Bound: 50, Fixed: true, Weight: 1.25},
		{Name: "count", Rows: 1, Bound: 1, Weight: 0.3},
	}
	for _, tc := range []struct{ eps, delta, room, ds float64 }{
		{1, 1e-5, 0, 0.99e-5}, {1, 1e-5, 5e-6, 5e-6}, {0.1, 1e-8, 0, 0.99e-8}, {5, 1e-8, 1, 0.99e-8},
	} {
		p, err := Make(Request{Values: vs, MaxGroups: 1, Epsilon: tc.eps, Delta: tc.delta, Noise: Laplace, SelectionRoom: tc.room})
		if err != nil {
			t.Fatal(err)
		}
		if p.SelectionDelta != tc.ds {
			t.Errorf("%+v: delta_s %v, want %v", tc, p.SelectionDelta, tc.ds)
		}
		var sum, root float64
		for _, v := range vs {
			root += math.Cbrt(v.Weight)
		}
		for i, n := range p.Values {
			sum += n.Epsilon
			if i > 0 {
				want := p.Values[0].Epsilon * math.Cbrt(vs[i].Weight/vs[0].Weight)
				if !near(n.Epsilon, want, 1e-4) {
					t.Errorf("%+v: %s epsilon %v, want %v", tc, n.Name, n.Epsilon, want)
				}
			}
			if n.Law != Laplace || !near(n.Lap.Scale*n.Epsilon, n.Sensitivity, 1e-12) {
				t.Errorf("%s: %+v", n.Name, n)
			}
		}
		eta := -math.Log1p(-tc.ds)
		if sum > tc.eps-eta || sum < tc.eps-eta-4*step-tc.eps*0x1p-10 {
			t.Errorf("%+v: epsilons sum to %v, want just below %v", tc, sum, tc.eps-eta)
		}
		got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{p.Mechanism}, tc.delta)
		if err != nil || got > tc.eps {
			t.Errorf("%+v: charged composite certifies epsilon %v (%v)", tc, got, err)
		}
		parts := p.Mechanism.Parts
		if p.Mechanism.Kind != mechanism.KindComposite || len(parts) != 3 || parts[0].Kind != mechanism.KindLaplaceInf ||
			parts[0].Delta != tc.ds || parts[1].Kind != mechanism.KindLaplace {
			t.Errorf("mechanism %+v", p.Mechanism)
		}
		if err := p.Mechanism.Validate(); err != nil {
			t.Error(err)
		}
		// The objective is the optimum 2 (sum W_b^(1/3))^3 / epsilon^2 of
		// the epsilons actually used (to the grids' and quanta's share of
		// the charged sensitivities).
		if opt := 2 * root * root * root / (sum * sum); !near(p.Objective, opt, 1e-3) {
			t.Errorf("%+v: objective %v, want %v", tc, p.Objective, opt)
		}
	}
}

// A statement given mu is Gaussian; noise = 'laplace' with mu is refused.
func TestMuIsGaussian(t *testing.T) {
	vs := []Value{{Name: "persons", Rows: 1, Bound: 1, Weight: 1, Selection: true}}
	p, err := Make(Request{Values: vs, MaxGroups: 1, Mu: 0.5, SelectionDelta: 1e-8})
	if err != nil || p.Law != Gaussian || p.Mechanism.Kind != mechanism.KindGaussianInf || p.Mechanism.Delta != 1e-8 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := Make(Request{Values: vs, MaxGroups: 1, Mu: 0.5, SelectionDelta: 1e-8, Noise: Laplace}); err == nil {
		t.Error("laplace with mu accepted")
	}
}

// The Gaussian statement's mu is the largest the accountant certifies: its
// rigorous epsilon at delta is at most epsilon, and mu is within a few grid
// steps of the exact conversion.
func TestCertifiedMu(t *testing.T) {
	for _, tc := range []struct{ eps, delta, ds float64 }{{1, 1e-5, 1e-6}, {0.1, 1e-8, 1e-9}, {5, 1e-5, 0}, {2, 1e-8, 5e-9}} {
		mu, err := certifiedMu(tc.eps, tc.delta, tc.ds)
		if err != nil {
			t.Fatal(err)
		}
		m := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu}
		if tc.ds > 0 {
			m = mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: mu, Delta: tc.ds}
		}
		got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, tc.delta)
		if err != nil || got > tc.eps {
			t.Errorf("%+v: mu %v certifies epsilon %v (%v)", tc, mu, got, err)
		}
		exact, _ := accountant.Mu(tc.eps+math.Log1p(-tc.ds), tc.delta-tc.ds)
		if mu > exact || mu < exact*(1-0.01) {
			t.Errorf("%+v: mu %v, exact %v", tc, mu, exact)
		}
	}
}

// The selection's thresholds: a group held by one person (in each of
// max_groups groups) is kept with probability at most delta_s/max_groups,
// and not much less (the threshold is tight), under both laws; computed from
// the grid laws exactly as package release samples them.
func TestSelectionThresholds(t *testing.T) {
	for _, k := range []int{1, 3} {
		vs := []Value{{Name: "persons", Rows: 1, Bound: 1, Weight: 1, Selection: true}}
		for _, law := range []Law{Laplace, Gaussian} {
			p, err := Make(Request{Values: vs, MaxGroups: k, Epsilon: 1, Delta: 1e-5, Noise: law})
			if err != nil {
				t.Fatal(err)
			}
			s := p.Selection()
			g := s.Grid()
			if law == Laplace && p.Threshold != math.Round(p.Threshold/g)*g {
				t.Errorf("%s: threshold %v not on the grid %v", law, p.Threshold, g)
			}
			j := math.Ceil((p.Threshold - 1) / g) // noise steps a one-person group needs
			var prob, tighter float64
			if law == Laplace {
				st := float64(s.Lap.Steps)
				prob = 0.5 * math.Exp(-(j-0.5)/st)
				tighter = 0.5 * math.Exp(-(j-1.5)/st)
			} else {
				sg := s.Sigma / g
				prob = 0.5 * math.Erfc((j-0.5)/sg/math.Sqrt2)
				tighter = 0.5 * math.Erfc((j-1.5)/sg/math.Sqrt2)
			}
			if per := p.SelectionDelta / float64(k); prob > per || tighter <= per*(1-1e-3) {
				t.Errorf("%s k=%d: P(kept) %g, one step lower %g, want at most %g and the step above it", law, k, prob, tighter, per)
			}
		}
	}
}

// noise = 'auto' takes the law of the smaller objective: Laplace for the
// accuracy table's statement (one group per person, two values), the
// Gaussian when a person may touch 64 groups; it reports the other's
// objective; a law that cannot be planned leaves the other.
func TestAutoChoosesLowerError(t *testing.T) {
	vs := []Value{
		{Name: "persons", Rows: 1, Bound: 1, Weight: 2.6, Selection: true},
		{Name: "sum(x - 50)", Rows: 1, Bound: 50, Fixed: true, Weight: 1.25},
	}
	for _, tc := range []struct {
		k    int
		want Law
	}{{1, Laplace}, {64, Gaussian}} {
		p, err := Make(Request{Values: vs, MaxGroups: tc.k, Epsilon: 1, Delta: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		if p.Law != tc.want || !(p.Objective <= p.Other) {
			t.Errorf("max_groups %d: %s (objective %v, other %v), want %s", tc.k, p.Law, p.Objective, p.Other, tc.want)
		}
		forced, err := Make(Request{Values: vs, MaxGroups: tc.k, Epsilon: 1, Delta: 1e-5, Noise: map[Law]Law{Laplace: Gaussian, Gaussian: Laplace}[tc.want]})
		if err != nil || !near(forced.Objective, p.Other, 1e-9) {
			t.Errorf("max_groups %d: the other law's objective %v, reported %v (%v)", tc.k, forced.Objective, p.Other, err)
		}
	}
}

// Bad requests are refused with a message.
func TestRequestChecks(t *testing.T) {
	ok := []Value{{Name: "n", Rows: 1, Bound: 1, Weight: 1}}
	for _, r := range []Request{
		{MaxGroups: 1, Epsilon: 1, Delta: 1e-5},
		{Values: ok, MaxGroups: 0, Epsilon: 1, Delta: 1e-5},
		{Values: []Value{{Name: "n", Rows: 1, Bound: 1}}, MaxGroups: 1, Epsilon: 1, Delta: 1e-5},
		{Values: ok, MaxGroups: 1, Epsilon: 1},
		{Values: ok, MaxGroups: 1, Epsilon: 1, Delta: 1e-5, Noise: "uniform"},
		{Values: append(ok, Value{Name: "p", Rows: 1, Bound: 1, Weight: 1, Selection: true}, Value{Name: "q", Rows: 1, Bound: 1, Weight: 1, Selection: true}), MaxGroups: 1, Epsilon: 1, Delta: 1e-5},
		{Values: []Value{{Name: "p", Rows: 1, Bound: 1, Weight: 1, Selection: true}}, MaxGroups: 1, Epsilon: 1, Delta: 1e-5, SelectionDelta: 1e-5},
	} {
		if _, err := Make(r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

var _ = release.Grid

// A Laplace value alone at a large delta uses it: the accountant certifies
// Laplace of epsilon0 = epsilon - 2 log(1 - delta) at (epsilon, delta) (the
// profile 1 - e^((eps - eps0)/2)), and the plan finds it to 2^-10.
func TestLaplaceUsesSpareDelta(t *testing.T) {
	for _, tc := range []struct{ eps, delta float64 }{{0.1, 0.1}, {1, 0.01}, {0.5, 1e-5}} {
		p, err := Make(Request{Values: []Value{{Name: "n", Rows: 1, Bound: 1, Weight: 1}}, MaxGroups: 1, Epsilon: tc.eps, Delta: tc.delta, Noise: Laplace})
		if err != nil {
			t.Fatal(err)
		}
		want := tc.eps - 2*math.Log1p(-tc.delta)
		if got := p.Values[0].Epsilon; got > want || got < want*(1-0x1p-9)-3*step {
			t.Errorf("%+v: epsilon %v, want about %v", tc, got, want)
		}
	}
}
