package pld

import (
	"errors"
	"math"
	"testing"
)

// Accumulate's approximations (tails trimmed, the grid coarsened by connect
// the dots, round-off charged by scaling) must leave every figure an upper
// bound. Gaussians compose exactly (mu = sqrt(sum mu_i^2)), so their
// composition is a case where the exact figure is known: the accumulated
// figure is never below it, and close to it.
func TestAccumulateNeverBelowExact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mus     []float64
		maxBins int
		tol     float64 // relative, on epsilon, above the exact figure
	}{
		// Direct convolutions, no coarsening.
		{"small", []float64{0.1, 0.2, 0.05, 0.3}, 1 << 14, 1e-4},
		// Many narrow entries: the grid is coarsened several times; each
		// entry is then discretised on a grid coarse against its own
		// width, which costs precision (never soundness) as the cap shrinks.
		{"many, capped at 512 bins", repeat(0.05, 400), 512, 6e-2},
		{"many, capped at 2^11", repeat(0.05, 400), 1 << 11, 1e-2},
		{"many, capped at 2^14", repeat(0.05, 400), 1 << 14, 1e-3},
		// A wide entry (an FFT), then narrow ones.
		{"wide then narrow", append([]float64{1.5}, repeat(0.02, 200)...), 1 << 12, 2e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sq float64
			var p *PLD
			for _, mu := range tc.mus {
				sq += mu * mu
				h := DefaultInterval
				if p != nil {
					h = p.Interval()
				}
				g, err := Config{Interval: h}.GaussianMu(mu)
				if err != nil {
					t.Fatal(err)
				}
				if p == nil {
					p = g
				} else if p, err = p.Accumulate(g, tc.maxBins); err != nil {
					t.Fatal(err)
				}
				if n := max(len(p.rem.p), 0); n > tc.maxBins && p != g {
					t.Fatalf("%d bins, cap %d", n, tc.maxBins)
				}
			}
			mu := math.Sqrt(sq)
			for _, delta := range []float64{1e-3, 1e-5, 1e-9} {
				if delta < 1e-8 && p.RoundoffBound() > delta/10 {
					// Hundreds of FFT convolutions (entries wide against
					// the grid): their bound leaves delta 1e-9 uncertifiable.
					if _, err := p.Epsilon(delta); !errors.Is(err, ErrRoundoff) {
						t.Errorf("delta %g, round-off %g: %v", delta, p.RoundoffBound(), err)
					}
					continue
				}
				got, err := p.Epsilon(delta)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := GaussianEpsilon(mu, delta)
				if got < want || got > want*(1+tc.tol)+1e-9 {
					t.Errorf("mu %.4f, delta %g: epsilon %.8f, exact %.8f (grid %g)", mu, delta, got, want, p.Interval())
				}
			}
			for _, eps := range []float64{0, 0.1, 0.5, 1, 2, 4} {
				got, err := p.Delta(eps)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := GaussianDelta(mu, eps)
				if got < want {
					t.Errorf("mu %.4f: delta(%g) = %.6g below the exact %.6g", mu, eps, got, want)
				}
			}
		})
	}
}

// A Gaussian with mass at +infinity composed many times is exactly a
// Gaussian of the merged mu with mass 1 - (1 - delta_s)^k there: the
// accumulated figure is never below it.
func TestAccumulateGaussianInfNeverBelowExact(t *testing.T) {
	const mu0, ds, k = 0.05, 1e-9, 300
	gi, err := Config{}.GaussianMuInf(mu0, ds)
	if err != nil {
		t.Fatal(err)
	}
	p := gi
	for range k - 1 {
		e, err := Config{Interval: p.Interval()}.GaussianMuInf(mu0, ds)
		if err != nil {
			t.Fatal(err)
		}
		if p, err = p.Accumulate(e, 1<<12); err != nil {
			t.Fatal(err)
		}
	}
	mass := 1 - math.Pow(1-ds, k)
	for _, delta := range []float64{1e-5, 1e-6} {
		got, err := p.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := GaussianEpsilon(mu0*math.Sqrt(k), (delta-mass)/(1-mass))
		if got < want || got > want*1.01 {
			t.Errorf("delta %g: epsilon %.6f, exact %.6f", delta, got, want)
		}
	}
}

// The published reference: mu = 0.5016 is (2, 1e-5)-DP, through the PLD
// as through the closed form.
func TestGaussianReference(t *testing.T) {
	p, err := GaussianMu(0.5016)
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.Epsilon(1e-5)
	if err != nil || e < 1.999 || e > 2.0015 {
		t.Errorf("PLD epsilon at 1e-5 of mu 0.5016: %v, %v; want 2", e, err)
	}
	c, _ := GaussianEpsilon(0.5016, 1e-5)
	if math.Abs(c-2) > 2e-3 || e < c {
		t.Errorf("closed form %v, PLD %v", c, e)
	}
}

// Moving a measure to a coarser grid by connect the dots dominates it, and
// costs far less than rounding every loss up.
func TestCoarsenedDominates(t *testing.T) {
	p, err := GaussianMu(0.8)
	if err != nil {
		t.Fatal(err)
	}
	exact, _ := GaussianEpsilon(0.8, 1e-5)
	for _, k := range []int{2, 8, 64} {
		c := p.coarsened(k)
		for _, eps := range []float64{-1, 0, 0.3, 1, 2.5} {
			a := p.rem.delta(p.h, eps)
			b := c.rem.delta(c.h, eps)
			if b < a {
				t.Errorf("x%d: delta(%g) = %g below the finer %g", k, eps, b, a)
			}
		}
		e, _ := c.Epsilon(1e-5)
		if e < exact || e > exact+c.h/10 {
			t.Errorf("x%d: epsilon %v, exact %v, spacing %v", k, e, exact, c.h)
		}
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}
