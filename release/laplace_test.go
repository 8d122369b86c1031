package release

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// roundedLaplaceP is the law of round(L), L ~ Laplace(s), conditioned on
// |k| <= kmax when kmax > 0, computed from the continuous CDF.
func roundedLaplaceP(k, s, kmax int64) float64 {
	if kmax > 0 && (k > kmax || k < -kmax) {
		return 0
	}
	sf := float64(s)
	surv := func(x float64) float64 { return 0.5 * math.Exp(-x/sf) } // P(L > x), x >= 0
	a := math.Abs(float64(k))
	var p float64
	if k == 0 {
		p = 1 - 2*surv(0.5)
	} else {
		p = surv(a-0.5) - surv(a+0.5)
	}
	if kmax > 0 {
		p /= 1 - 2*surv(float64(kmax)+0.5)
	}
	return p
}

// chiSquare draws n values with draw and tests them against p on [-w, w]
// (the rest pooled), failing below a p-value of 1e-4.
func chiSquare(t *testing.T, n int, w int64, draw func() int64, p func(int64) float64) {
	t.Helper()
	counts := map[int64]int{}
	for range n {
		k := draw()
		if k > w || k < -w {
			k = w + 1 // pooled tail
		}
		counts[k]++
	}
	var stat float64
	tail := 1.0
	cells := 0
	for k := -w; k <= w; k++ {
		e := p(k) * float64(n)
		tail -= p(k)
		if e == 0 {
			if counts[k] != 0 {
				t.Fatalf("value %d drawn %d times but has probability 0", k, counts[k])
			}
			continue
		}
		d := float64(counts[k]) - e
		stat += d * d / e
		cells++
	}
	if e := tail * float64(n); e > 5 {
		d := float64(counts[w+1]) - e
		stat += d * d / e
		cells++
	}
	pv := 1 - distuv.ChiSquared{K: float64(cells - 1)}.CDF(stat)
	if pv < 1e-4 {
		t.Errorf("chi-square %.1f on %d cells: p-value %.2g", stat, cells, pv)
	}
}

func TestRoundedLaplaceLaw(t *testing.T) {
	for _, c := range []struct{ s, kmax int64 }{{1, 0}, {3, 0}, {7, 0}, {3, 4}, {5, 2}} {
		r := NewSeededNoise(uint64(100*c.s + c.kmax)).r
		chiSquare(t, 200000, 6*c.s, func() int64 { return roundedLaplace(r, c.s, c.kmax) },
			func(k int64) float64 { return roundedLaplaceP(k, c.s, c.kmax) })
	}
}

func TestGeometricAndBernoulli(t *testing.T) {
	r := NewSeededNoise(7).r
	const n = 200000
	hits := 0
	for range n {
		if bernExpNeg(r, 3, 4) {
			hits++
		}
	}
	p := math.Exp(-0.75)
	if se := math.Sqrt(p * (1 - p) / n); math.Abs(float64(hits)/n-p) > 5*se {
		t.Errorf("Bernoulli(exp(-3/4)) frequency %v, want %v", float64(hits)/n, p)
	}
	const s = 4
	q := math.Exp(-1.0 / s)
	chiSquare(t, n, 30, func() int64 { return geometric(r, s) - 15 }, func(k int64) float64 {
		x := k + 15
		if x < 0 {
			return 0
		}
		return (1 - q) * math.Pow(q, float64(x))
	})
}

// TestTruncatedLaplaceSupport draws 10^6 values and checks none leaves the
// support, at a calibration where truncation is frequent.
func TestTruncatedLaplaceSupport(t *testing.T) {
	l, err := TruncatedLaplaceFor(1, 0.5, 0.45)
	if err != nil {
		t.Fatal(err)
	}
	n := NewSeededNoise(11)
	hitEdge := 0
	for range 1000000 {
		y := n.AddLaplace(0, l)
		if math.Abs(y) > l.Support || math.Abs(y) > float64(l.MaxSteps)*l.Grid {
			t.Fatalf("draw %v outside the support %v", y, l.Support)
		}
		if math.Abs(y) > 0.99*l.Support {
			hitEdge++
		}
	}
	if hitEdge == 0 {
		t.Errorf("no draw near the edge of the support: the test does not exercise truncation")
	}
}

func TestLaplaceCalibration(t *testing.T) {
	for _, c := range []struct{ s, eps, delta float64 }{{1, 1, 1e-5}, {3, 0.1, 0.01}, {1e-3, 4, 0.3}, {1e6, 0.5, 1e-10}} {
		l, err := TruncatedLaplaceFor(c.s, c.eps, c.delta)
		if err != nil {
			t.Fatal(err)
		}
		if !(l.Sensitivity >= c.s+l.Grid) || !(l.Sensitivity/l.Scale <= c.eps) {
			t.Errorf("%+v: charged ratio %v above epsilon %v", c, l.Sensitivity/l.Scale, c.eps)
		}
		if r := l.Scale / (c.s / c.eps); r < 1 || r > 1+0x1p-14 { // grid slack g <= S 2^-15, s rounded up
			t.Errorf("%+v: scale %v is %v times S/eps", c, l.Scale, r)
		}
		if !(l.Delta <= c.delta*(1+1e-9)) || l.Delta < c.delta*0.99 {
			t.Errorf("%+v: certified delta %v", c, l.Delta)
		}
		if a := c.s / c.eps * math.Log1p(math.Expm1(c.eps)/(2*c.delta)); l.Support < a || l.Support > a*(1+1e-3)+l.Grid {
			t.Errorf("%+v: support %v, want about %v", c, l.Support, a)
		}
	}
	for _, c := range []struct{ s, eps, delta float64 }{{0, 1, 0.1}, {1, 0, 0.1}, {1, 1, 0.5}, {1, 1, 0}, {math.NaN(), 1, 0.1}, {1, math.Inf(1), 0.1}} {
		if _, err := TruncatedLaplaceFor(c.s, c.eps, c.delta); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestAddLaplaceMoments(t *testing.T) {
	for _, trunc := range []bool{false, true} {
		l, _ := LaplaceFor(2, 0.5)
		if trunc {
			l, _ = TruncatedLaplaceFor(2, 0.5, 0.2)
		}
		n := NewSeededNoise(3)
		const m = 200000
		var s1, s2 float64
		for range m {
			z := n.AddLaplace(10, l) - 10
			s1 += math.Abs(z)
			s2 += z * z
		}
		ea, e2 := l.ExpectedAbs(), l.ExpectedSquare()
		if se := math.Sqrt((e2 - ea*ea) / m); math.Abs(s1/m-ea) > 5*se {
			t.Errorf("truncated=%v: E|Z| %v, want %v", trunc, s1/m, ea)
		}
		if math.Abs(s2/m-e2) > 0.02*e2 {
			t.Errorf("truncated=%v: E Z^2 %v, want %v", trunc, s2/m, e2)
		}
	}
}

func BenchmarkRoundedLaplace(b *testing.B) {
	l, _ := LaplaceFor(1, 1)
	n := NewSeededNoise(1)
	var s float64
	for b.Loop() {
		s += n.AddLaplace(0, l)
	}
	_ = s
}
