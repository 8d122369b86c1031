package pld

import (
	"math"
	"testing"
)

// TestSelfComposeRoundoffExact: t-fold self-composition at large t keeps its
// round-off bound small (the coefficients near |P_k| = 1, where the FFT's
// absolute error would be amplified t-fold, are recomputed with relative
// accuracy) and stays an upper bound on an independently known curve: t
// Gaussians of mu are one Gaussian of sqrt(t) mu (GaussianDelta, exact). The
// old bound grew as t: about 2.3e-9 at t = 10000, so epsilon at delta = 1e-9
// was refused.
func TestSelfComposeRoundoffExact(t *testing.T) {
	// tol is the discretisation error allowed (relative, on delta and on
	// epsilon): at mu = 0.002 one step's mean loss, mu^2/2 = 2e-6, is far
	// below the grid step h = 2^-13, and 50000 steps add up to a few 1e-3.
	for _, c := range []struct {
		mu    float64
		steps int
		tol   float64
	}{{0.01, 10000, 1e-3}, {0.002, 50000, 1e-2}, {0.05, 1000, 1e-3}} {
		g, err := GaussianMu(c.mu)
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.SelfCompose(c.steps)
		if err != nil {
			t.Fatal(err)
		}
		mu := math.Sqrt(float64(c.steps)) * c.mu
		r := p.RoundoffBound()
		t.Logf("mu=%g t=%d: bins %d, round-off bound %.3g", c.mu, c.steps, p.Bins(), r)
		if !(r < 1e-11) {
			t.Errorf("mu=%g t=%d: round-off bound %g, want < 1e-11", c.mu, c.steps, r)
		}
		for _, e := range []float64{0, 0.5, 1, 2, 4, 6} {
			got, _ := p.Delta(e)
			want, _ := GaussianDelta(mu, e)
			if got < want || got > want*(1+2*c.tol)+1e-10 {
				t.Errorf("mu=%g t=%d: delta(%v) = %.9g, exact %.9g", c.mu, c.steps, e, got, want)
			}
		}
		got, err := p.Epsilon(1e-9)
		if err != nil {
			t.Fatalf("mu=%g t=%d: epsilon(1e-9): %v", c.mu, c.steps, err)
		}
		want, _ := GaussianEpsilon(mu, 1e-9)
		if got < want || got > want*(1+c.tol) {
			t.Errorf("mu=%g t=%d: epsilon(1e-9) = %.7f, exact %.7f", c.mu, c.steps, got, want)
		}
	}
}

// TestSelfComposeMatchesSquaring: the subsampled Gaussian self-composed
// 4096 times agrees with twelve successive squarings (Compose, an
// independent route through linear convolutions) to the discretisation
// error (0.4% at delta = 1e-7, where the twelve truncations of the squarings
// add up), and its round-off bound is far smaller.
func TestSelfComposeMatchesSquaring(t *testing.T) {
	base, err := SubsampledGaussian(0.001, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := base.SelfCompose(4096)
	if err != nil {
		t.Fatal(err)
	}
	sq := base
	for range 12 {
		if sq, err = sq.Compose(sq); err != nil {
			t.Fatal(err)
		}
	}
	for _, delta := range []float64{1e-5, 1e-7} {
		a, b := eps(t, p, delta), eps(t, sq, delta)
		if math.Abs(a/b-1) > 5e-3 {
			t.Errorf("delta %g: self-composed %v, squared %v", delta, a, b)
		}
	}
	t.Logf("round-off: self-composed %.3g, squared %.3g", p.RoundoffBound(), sq.RoundoffBound())
	if !(p.RoundoffBound() < sq.RoundoffBound()/10) {
		t.Errorf("round-off: self-composed %g, squared %g", p.RoundoffBound(), sq.RoundoffBound())
	}
}
