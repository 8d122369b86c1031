package synth

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The class means have norm a and pairwise inner products -a^2/(K-1) (a
// simplex ETF), and the drawn rows scatter around them with variance S^2.
func TestETF(t *testing.T) {
	const K, d, a, s = 5, 12, 0.5, 0.2
	e, err := NewETF(rand.New(rand.NewPCG(1, 2)), K, d, a, s)
	if err != nil {
		t.Fatal(err)
	}
	for c := range K {
		for c2 := range K {
			var dot float64
			for j := range d {
				dot += e.Means[c][j] * e.Means[c2][j]
			}
			want := -a * a / (K - 1)
			if c == c2 {
				want = a * a
			}
			if math.Abs(dot-want) > 1e-12 {
				t.Errorf("<mean %d, mean %d> = %v, want %v", c, c2, dot, want)
			}
		}
	}
	const n = 20000
	x, classes := e.Draw(rand.New(rand.NewPCG(3, 4)), n)
	var ss float64
	for i := range n {
		if classes[i] != i%K {
			t.Fatalf("row %d has class %d", i, classes[i])
		}
		for j := range d {
			r := float64(x[i*d+j]) - e.Means[classes[i]][j]
			ss += r * r
		}
	}
	// The sample variance of n d = 240000 N(0, s^2) draws: within 5 standard errors.
	v := ss / (n * d)
	if se := s * s * math.Sqrt(2.0/(n*d)); math.Abs(v-s*s) > 5*se {
		t.Errorf("within-class variance %v, want %v +- %v", v, s*s, 5*se)
	}
	if _, err := NewETF(rand.New(rand.NewPCG(1, 2)), 5, 3, a, s); err == nil {
		t.Error("K > d accepted")
	}
}
