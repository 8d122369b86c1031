package accountant

import (
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// lapDelta is delta(eps) of Laplace noise with sensitivity/scale e0:
// 1 - e^((eps - e0)/2) on [-e0, e0], 0 above.
func lapDelta(e0, eps float64) float64 {
	if eps >= e0 {
		return 0
	}
	return -math.Expm1((eps - e0) / 2)
}

// A laplace_inf entry is a Laplace plus delta mass at +infinity: its rigorous
// delta(eps) lies between the Laplace's plus delta and the Laplace's at eps
// shifted down by two grid steps plus delta; at or above
// epsilon + -log(1-delta) + a grid step only the mass remains; no epsilon
// exists at or below its delta; and it composes with plain Laplace parts in
// a composite as their pure epsilons add (to the grid: two steps of 2^-13).
func TestLaplaceInfAccounting(t *testing.T) {
	for _, tc := range []struct{ e0, delta, eps float64 }{
		{0.5, 1e-7, 0.3}, {1, 1e-5, 0.2}, {2, 1e-9, 1.9}, {0.25, 5e-6, 0},
	} {
		m := mechanism.Mechanism{Kind: mechanism.KindLaplaceInf, Epsilon: tc.e0, Delta: tc.delta}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		if !math.IsInf(m.GDPMu(), 1) || m.IsGaussian() {
			t.Fatalf("GDPMu = %v, IsGaussian %v: want +Inf and not Gaussian", m.GDPMu(), m.IsGaussian())
		}
		got, err := RigorousDelta([]mechanism.Mechanism{m}, tc.eps)
		if err != nil {
			t.Fatal(err)
		}
		l := lapDelta(tc.e0, tc.eps)
		lo := l + tc.delta*(1-l)
		hi := lapDelta(tc.e0, tc.eps-2.0/8192) + tc.delta
		if got < lo*(1-1e-9) || got > hi {
			t.Errorf("%+v: rigorous delta %g, want in [%g, %g]", tc, got, lo, hi)
		}
		top, err := RigorousDelta([]mechanism.Mechanism{m}, tc.e0-math.Log1p(-tc.delta)+2.0/8192)
		if err != nil || top < tc.delta || top > tc.delta*(1+1e-6)+1e-12 {
			t.Errorf("%+v: delta above the largest loss %g, want %g", tc, top, tc.delta)
		}
		e, err := RigorousEpsilon([]mechanism.Mechanism{m}, tc.delta)
		if err != nil || !math.IsInf(e, 1) {
			t.Errorf("epsilon at delta = its own mass: got %v, %v; want +Inf", e, err)
		}
	}
	c := mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{
		{Kind: mechanism.KindLaplaceInf, Epsilon: 0.5, Delta: 9.9e-6},
		{Kind: mechanism.KindLaplace, Sensitivity: 50, Epsilon: 0.4},
	}}
	e, err := RigorousEpsilon([]mechanism.Mechanism{c}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if pure := 0.9 - math.Log1p(-9.9e-6); e > pure+2.0/8192 || e < 0.9-1e-3 {
		t.Errorf("composite epsilon %v, want about %v (pure composition plus the shift)", e, pure)
	}
	for _, bad := range []mechanism.Mechanism{
		{Kind: mechanism.KindLaplaceInf, Epsilon: 0.3},
		{Kind: mechanism.KindLaplaceInf, Delta: 1e-7},
		{Kind: mechanism.KindLaplaceInf, Epsilon: 0.3, Delta: 1},
		{Kind: mechanism.KindLaplaceInf, Epsilon: 0.3, Delta: 1e-7, Neighbours: mechanism.ReplaceOne},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
