package pld

import (
	"math"
	"testing"
)

// tlapDeltaNumeric integrates (p - e^eps q)_+ for the truncated Laplace pair
// by the midpoint rule on a fine grid, plus the exact mass where q = 0.
func tlapDeltaNumeric(t, a, eps float64) float64 {
	c := 0.5 / (1 - math.Exp(-a))
	dens := func(z float64) float64 {
		if z < -a || z > a {
			return 0
		}
		return c * math.Exp(-math.Abs(z))
	}
	const n = 400000
	lo, hi := -a, a+t
	h := (hi - lo) / n
	var s float64
	for i := range n {
		z := lo + (float64(i)+0.5)*h
		if d := dens(z-t) - math.Exp(eps)*dens(z); d > 0 {
			s += d * h
		}
	}
	return s
}

func TestTruncatedLaplace(t *testing.T) {
	for _, c := range []struct{ eps, delta float64 }{{1, 1e-5}, {0.1, 0.01}, {3, 0.3}, {2, 0.45}} {
		a := math.Log1p(math.Expm1(c.eps) / (2 * c.delta))
		p, err := TruncatedLaplace(c.eps, 1, a)
		if err != nil {
			t.Fatal(err)
		}
		// Geng et al.: (eps, delta) exactly at the calibration.
		if d, _ := p.Delta(c.eps); d < c.delta || d > c.delta*(1+2e-3) { // connect-the-dots is pessimistic at the kink eps = t
			t.Errorf("%+v: delta(eps) = %v, want %v", c, d, c.delta)
		}
		// The closed form against numerical integration, at several eps.
		for _, e := range []float64{-c.eps * 1.5, -c.eps / 2, 0, c.eps / 3, c.eps * 0.9} {
			want := tlapDeltaNumeric(c.eps, a, e)
			v, _ := tlapCurve{c.eps, a}.delta(e)
			if math.Abs(v-want) > 2e-5 { // the midpoint rule's error at the support's edges
				t.Errorf("%+v: curve(%v) = %v, numerical %v", c, e, v, want)
			}
			if d, _ := p.Delta(math.Max(e, 0)); e >= 0 && (d < want-2e-5 || d > want+2e-4) {
				t.Errorf("%+v: PLD delta(%v) = %v, numerical %v", c, e, d, want)
			}
		}
	}
	for _, bad := range [][3]float64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {2, 1, 1}, {1, math.NaN(), 1}, {1, 1, math.Inf(1)}} {
		if _, err := TruncatedLaplace(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("TruncatedLaplace%v accepted", bad)
		}
	}
}

// TestRoundedAboveContinuous pins the reason rounded laws are charged as
// post-processing: the discrete Laplace's curve lies above the continuous
// one (shift = scale = 8 steps: delta(0.9) 0.0506 against 0.0488).
func TestRoundedAboveContinuous(t *testing.T) {
	var g []float64
	for k := -400; k <= 400; k++ {
		g = append(g, math.Exp(-math.Abs(float64(k))/8))
	}
	disc, _ := Discrete(g, 8)
	cont, _ := Laplace(8, 8)
	dd, _ := disc.Delta(0.9)
	dc, _ := cont.Delta(0.9)
	if math.Abs(dd-0.0506) > 5e-4 || math.Abs(dc-0.0488) > 5e-4 {
		t.Errorf("delta(0.9): discrete %v, continuous %v; want 0.0506, 0.0488", dd, dc)
	}
}

func TestGridNoise(t *testing.T) {
	// Uniform on 10 intervals, shift up to 1 interval: delta(eps) = 1/10.
	u := make([]float64, 10)
	for i := range u {
		u[i] = 1
	}
	p, err := GridNoise(u, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Delta(3); d < 0.1 || d > 0.1+1e-9 {
		t.Errorf("uniform, shift 1: delta(3) = %v, want 0.1", d)
	}
	p, _ = GridNoise(u, 3)
	if d, _ := p.Delta(3); d < 0.3 || d > 0.3+1e-9 {
		t.Errorf("uniform, shift 3: delta(3) = %v, want 0.3", d)
	}
	// Geometric weights r^|j| with r = e^(-eps/D), shifts up to D: within the
	// support the ratio is at most e^eps, so delta(eps) is the largest mass
	// pushed off the support, the D outermost intervals of one side.
	const D, half, eps = 4, 60, 1.0
	r := math.Exp(-eps / D)
	var w []float64
	var sum float64
	for j := -half; j < half; j++ {
		v := math.Pow(r, math.Abs(float64(j)+0.5))
		w = append(w, v)
		sum += v
	}
	var edge float64
	for i := 0; i < D; i++ {
		edge += w[i] / sum
	}
	p, err = GridNoise(w, D)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Delta(eps); d < edge || d > edge*(1+1e-6)+1e-9 {
		t.Errorf("geometric: delta(eps) = %v, want %v", d, edge)
	}
	// And the asymmetric case agrees with Discrete's (both directions).
	q, _ := Discrete([]float64{1, 2, 5, 2, 1, 0.5}, 1)
	gp, _ := GridNoise([]float64{1, 2, 5, 2, 1, 0.5}, 1)
	for _, e := range []float64{0, 0.3, 1} {
		a, _ := q.Delta(e)
		b, _ := gp.Delta(e)
		if math.Abs(a-b) > 1e-7*a {
			t.Errorf("delta(%v): GridNoise %v, Discrete %v", e, b, a)
		}
	}
	for _, bad := range []struct {
		w []float64
		k int
	}{{nil, 1}, {[]float64{1}, 0}, {[]float64{1, -1}, 1}, {[]float64{0, 0}, 1}, {[]float64{1, math.NaN()}, 1}, {[]float64{1}, MaxGridShifts + 1}} {
		if _, err := GridNoise(bad.w, bad.k); err == nil {
			t.Errorf("GridNoise(%v, %d) accepted", bad.w, bad.k)
		}
	}
}
