package pld

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/dsp/fourier"
)

func TestGoodSize(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 1}, {1, 1}, {2, 2}, {7, 8}, {11, 12}, {13, 15}, {17, 18}, {31, 32}, {97, 100}, {1001, 1024}, {1025, 1080},
	} {
		if got := goodSize(c.n); got != c.want {
			t.Errorf("goodSize(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestFFTMatchesDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 20, 25, 27, 30, 32, 45, 60, 64, 75, 81, 100, 120, 125, 128, 360, 625, 1024} {
		x := make([]complex128, n)
		var l1 float64
		for i := range x {
			x[i] = complex(rng.Float64()-0.5, rng.Float64()-0.5)
			l1 += cmplx.Abs(x[i])
		}
		want := make([]complex128, n)
		for k := range want {
			for j, v := range x {
				s, c := math.Sincos(-2 * math.Pi * float64((j*k)%n) / float64(n))
				want[k] += v * complex(c, s)
			}
		}
		got := append([]complex128(nil), x...)
		plan := planFor(n)
		plan.transform(got, make([]complex128, n), false)
		for k := range got {
			if d := cmplx.Abs(got[k] - want[k]); d > 1e-13*l1 {
				t.Fatalf("n=%d: X[%d] = %v, want %v", n, k, got[k], want[k])
			}
		}
		plan.transform(got, make([]complex128, n), true)
		for k := range got {
			if d := cmplx.Abs(got[k]/complex(float64(n), 0) - x[k]); d > 1e-13*l1 {
				t.Fatalf("n=%d: inverse[%d] = %v, want %v", n, k, got[k], x[k])
			}
		}
	}
}

// The transform agrees with gonum's FFTPACK port, and its error against it
// stays inside the componentwise bound fftRelErr(n) ||x||_1 (twice: both
// transforms err).
func TestFFTMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{2, 48, 1000, 3 * 5 * 5 * 64, 1 << 14, 30000} {
		x := make([]complex128, n)
		var l1 float64
		for i := range x {
			x[i] = complex(rng.ExpFloat64(), 0)
			l1 += real(x[i])
		}
		want := fourier.NewCmplxFFT(n).Coefficients(nil, x)
		got := append([]complex128(nil), x...)
		planFor(n).transform(got, make([]complex128, n), false)
		bound := 2 * fftRelErr(n) * l1
		var worst float64
		for k := range got {
			worst = math.Max(worst, cmplx.Abs(got[k]-want[k]))
		}
		if worst > bound {
			t.Errorf("n=%d: max |difference| %g exceeds bound %g", n, worst, bound)
		}
	}
}
