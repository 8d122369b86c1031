package accountant

import (
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// A gaussian_inf entry is a Gaussian plus delta mass at +infinity: its
// rigorous delta(eps) lies between the Gaussian's plus delta (the least a
// dominating pair can have) and the Gaussian's at eps shifted down by two grid
// steps (the shift by -log(1-delta) rounded up, and the discretisation) plus
// delta; no epsilon exists at or below its delta.
func TestGaussianInfAccounting(t *testing.T) {
	for _, tc := range []struct{ mu, delta, eps float64 }{
		{0.5, 1e-7, 1}, {0.5, 1e-7, 2}, {1, 1e-6, 1.5}, {0.2, 1e-9, 0.5},
	} {
		m := mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: tc.mu, Delta: tc.delta}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		if m.GDPMu() != tc.mu || m.IsGaussian() {
			t.Fatalf("GDPMu = %v, IsGaussian %v: want the Gaussian part's mu, and not exactly GDP", m.GDPMu(), m.IsGaussian())
		}
		got, err := RigorousDelta([]mechanism.Mechanism{m}, tc.eps)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := Delta(tc.mu, tc.eps)
		lo := g + tc.delta*(1-g)
		gs, _ := Delta(tc.mu, tc.eps-2.0/8192)
		hi := gs + tc.delta
		if got < lo*(1-1e-9) || got > hi {
			t.Errorf("mu %g delta %g eps %g: rigorous delta %g, want in [%g, %g]", tc.mu, tc.delta, tc.eps, got, lo, hi)
		}
		e, err := RigorousEpsilon([]mechanism.Mechanism{m}, tc.delta)
		if err != nil || !math.IsInf(e, 1) {
			t.Errorf("epsilon at delta = its own mass: got %v, %v; want +Inf", e, err)
		}
	}
}

// Composition: two gaussian_inf entries hold about twice the mass at
// +infinity, and the cached composition agrees with the direct one.
func TestGaussianInfComposes(t *testing.T) {
	a := mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: 0.3, Delta: 1e-7}
	b := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.4}
	ms := []mechanism.Mechanism{a, b, a}
	direct, err := RigorousDelta(ms, 1)
	if err != nil {
		t.Fatal(err)
	}
	var cache []byte
	for _, m := range ms {
		if cache, err = composeInto(cache, m); err != nil {
			t.Fatal(err)
		}
	}
	cached, err := cachedDelta(cache, 1)
	if err != nil {
		t.Fatal(err)
	}
	mu := math.Sqrt(0.3*0.3*2 + 0.4*0.4)
	g, _ := Delta(mu, 1)
	gs, _ := Delta(mu, 1-4.0/8192)
	if direct < g+1.9e-7 || direct > gs+2e-7 {
		t.Errorf("composed delta %g, want about %g + 2e-7", direct, g)
	}
	if math.Abs(cached-direct) > 1e-4*direct {
		t.Errorf("cached %g vs direct %g", cached, direct)
	}
	for _, bad := range []mechanism.Mechanism{
		{Kind: mechanism.KindGaussianInf, Mu: 0.3},
		{Kind: mechanism.KindGaussianInf, Delta: 1e-7},
		{Kind: mechanism.KindGaussianInf, Mu: 0.3, Delta: 1},
		{Kind: mechanism.KindGaussianInf, Mu: 0.3, Delta: 1e-7, Neighbours: mechanism.ReplaceOne},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
