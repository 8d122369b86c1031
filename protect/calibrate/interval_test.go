package calibrate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsql/dpsql/release"
)

func lapNoisy(scale float64) Noisy {
	return Noisy{Law: Laplace, Lap: lapGrid(scale)}
}

func lapGrid(scale float64) (l release.LaplaceGrid) {
	l.Scale, l.Grid, l.Steps = scale, scale*0x1p-16, 1<<16
	return l
}

// The two-Laplace tail agrees with a numerical convolution of the densities,
// for distinct and (nearly) equal scales, where it never falls below it.
func TestTwoLaplaceTail(t *testing.T) {
	for _, tc := range []struct{ a, b float64 }{{1, 2}, {50, 3}, {2, 2}, {1, 1.0005}, {7, 0}} {
		for _, x := range []float64{0, 0.5, 3, 10} {
			got := TwoLaplaceTail(tc.a, tc.b, x)
			want := numericTail(tc.a, tc.b, x)
			if math.Abs(got-want) > 1e-6 && !(math.Abs(tc.a-tc.b) < 1e-3*tc.b && got >= want) {
				t.Errorf("a=%v b=%v t=%v: tail %v, numerical %v", tc.a, tc.b, x, got, want)
			}
		}
	}
}

// numericTail integrates P(|X+Y| > t) = E[P(|x + Y| > t)] over X's density.
func numericTail(a, b, t float64) float64 {
	if b == 0 {
		return math.Exp(-t / a)
	}
	tailY := func(u float64) float64 { // P(Y > u)
		if u >= 0 {
			return 0.5 * math.Exp(-u/b)
		}
		return 1 - 0.5*math.Exp(u/b)
	}
	const n = 400000
	lim := 60 * a
	h := 2 * lim / n
	s := 0.0
	for i := range n {
		x := -lim + (float64(i)+0.5)*h
		fx := math.Exp(-math.Abs(x)/a) / (2 * a)
		s += fx * (tailY(t-x) + 1 - tailY(-t-x))
	}
	return s * h
}

// Coverage of HalfWidth over simulated draws (math/rand: the law, not the
// sampler, is under test): one Laplace, two Laplace of different scales, two
// Gaussians within 0.3% of conf; a Laplace with a Gaussian (the union bound)
// at least conf.
func TestHalfWidthCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lap := func(b float64) float64 {
		u := r.Float64() - 0.5
		return -b * math.Copysign(math.Log1p(-2*math.Abs(u)), u)
	}
	const conf, n = 0.95, 400000
	for _, tc := range []struct {
		name  string
		terms []Term
		draw  func() float64
		exact bool
	}{
		{"laplace", []Term{{lapNoisy(3), 1}}, func() float64 { return lap(3) }, true},
		{"two laplace", []Term{{lapNoisy(100), 1}, {lapNoisy(2), 50}}, func() float64 { return lap(100) + 50*lap(2) }, true},
		{"two gaussians", []Term{{Noisy{Law: Gaussian, Sigma: 3}, 1}, {Noisy{Law: Gaussian, Sigma: 1}, -2}},
			func() float64 { return 3*r.NormFloat64() - 2*r.NormFloat64() }, true},
		{"mixed", []Term{{lapNoisy(3), 1}, {Noisy{Law: Gaussian, Sigma: 2}, 1}}, func() float64 { return lap(3) + 2*r.NormFloat64() }, false},
	} {
		h := HalfWidth(conf, tc.terms...)
		in := 0
		for range n {
			if math.Abs(tc.draw()) <= h {
				in++
			}
		}
		cov := float64(in) / n
		if cov < conf-0.003 || (tc.exact && cov > conf+0.003) {
			t.Errorf("%s: half-width %v covers %.4f, want %v", tc.name, h, cov, conf)
		}
	}
}
