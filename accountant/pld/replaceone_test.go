package pld

import (
	"math"
	"testing"
)

// hockeyByQuadrature integrates max(p - e^eps q, 0) for the replace-one pair
// on a fine grid: an independent evaluation of delta(eps).
func hockeyByQuadrature(q, sigma, eps float64) float64 {
	dens := func(o, shift float64) float64 {
		n := func(m float64) float64 {
			z := (o - m) / sigma
			return math.Exp(-z*z/2) / (sigma * math.Sqrt(2*math.Pi))
		}
		return (1-q)*n(0) + q*n(shift)
	}
	lo, hi := -12*sigma-2, 12*sigma+2
	const n = 400000
	h := (hi - lo) / n
	s := 0.0
	for i := 0; i <= n; i++ {
		o := lo + float64(i)*h
		f := math.Max(dens(o, 1)-math.Exp(eps)*dens(o, -1), 0)
		w := 2.0
		if i == 0 || i == n {
			w = 1
		} else if i%2 == 1 {
			w = 4
		}
		s += w * f
	}
	return s * h / 3
}

func TestSubReplaceCurve(t *testing.T) {
	for _, tc := range []struct{ q, sigma float64 }{{0.01, 0.8}, {0.1, 1}, {0.5, 2}, {0.002, 0.7}} {
		c := subReplace{tc.q, tc.sigma}
		for _, eps := range []float64{-1, -0.01, 0, 0.01, 0.1, 0.5, 1, 2} {
			got, e := c.delta(eps)
			want := hockeyByQuadrature(tc.q, tc.sigma, eps)
			if math.Abs(got-want) > 1e-7+1e-5*want {
				t.Errorf("q %v sigma %v eps %v: delta %v (err %v), quadrature %v", tc.q, tc.sigma, eps, got, e, want)
			}
			if !(e >= 0) || e > 1e-9*math.Max(got, 1e-6) {
				t.Errorf("q %v sigma %v eps %v: error bound %v for delta %v", tc.q, tc.sigma, eps, e, got)
			}
		}
	}
}

// Replace-one costs more than one add/remove step and no more than the
// group-privacy bound of two; q = 1 is the Gaussian of mu = 2/sigma.
func TestSubsampledGaussianReplaceOne(t *testing.T) {
	const q, sigma, delta = 0.02, 0.9, 1e-5
	r1, err := SubsampledGaussianReplaceOne(q, sigma)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := SubsampledGaussian(q, sigma)
	if err != nil {
		t.Fatal(err)
	}
	r100, _ := r1.SelfCompose(100)
	ar100, _ := ar.SelfCompose(100)
	ar200, _ := ar.SelfCompose(200)
	eR, _ := r100.Epsilon(delta)
	eA, _ := ar100.Epsilon(delta)
	e2, _ := ar200.Epsilon(delta)
	if !(eR > eA) {
		t.Errorf("100 replace-one steps: epsilon %v, not above 100 add/remove steps' %v", eR, eA)
	}
	// Group privacy: (2 eps, (1 + e^eps) delta) from (eps, delta) add/remove.
	dA, _ := ar100.Delta(eA)
	if dR, _ := r100.Delta(2 * eA); dR > (1+math.Exp(eA))*dA*1.001 {
		t.Errorf("replace-one delta(2 eps) %v above the group-privacy bound %v", dR, (1+math.Exp(eA))*dA)
	}
	t.Logf("epsilon at %g after 100 steps: add/remove %.4f, 200 add/remove %.4f, replace-one %.4f", delta, eA, e2, eR)
	g, _ := SubsampledGaussianReplaceOne(1, 2)
	gm, _ := GaussianMu(1)
	a, _ := g.Epsilon(delta)
	b, _ := gm.Epsilon(delta)
	if a != b {
		t.Errorf("q = 1: %v, want the Gaussian mu = 1's %v", a, b)
	}
	for _, bad := range [][2]float64{{0, 1}, {1.5, 1}, {0.1, 0}, {0.1, math.Inf(1)}} {
		if _, err := SubsampledGaussianReplaceOne(bad[0], bad[1]); err == nil {
			t.Errorf("SubsampledGaussianReplaceOne(%v, %v) accepted", bad[0], bad[1])
		}
	}
}
