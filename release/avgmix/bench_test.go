package avgmix

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/release"
)

// The Fashion-MNIST shape: n = T = 60000 rows of 784 features and 10 labels.
const (
	benchN = 60000
	benchD = 784
	benchK = 10
	benchM = 64
)

var benchData = sync.OnceValue(func() Data {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, benchN*benchD)
	y := make([]float32, benchN*benchK)
	for i := range benchN {
		// Pixel-like values in [0, 1), about half of them zero.
		for j := range benchD {
			if v := r.Float32()*2 - 1; v > 0 {
				x[i*benchD+j] = v
			}
		}
		y[i*benchK+r.IntN(benchK)] = 1
	}
	return Data{X: x, D: benchD, Y: y, K: benchK, N: benchN}
})

func benchRelease(b *testing.B, sampling string, p float64) {
	data := benchData()
	noise := release.NewSeededNoise(1)
	plan, err := NewPlan(noise, benchN, benchD, benchK, Params{T: benchN, M: benchM, Mu: 1, Sampling: sampling, P: p})
	if err != nil {
		b.Fatal(err)
	}
	var sink float32
	emit := func(i int, x, y []float32) error { sink += x[0] + y[0]; return nil }
	if err := Release(noise, data, plan, emit); err != nil { // clip once outside the timer
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Release(noise, data, plan, emit); err != nil {
			b.Fatal(err)
		}
	}
	rows := float64(b.N) * float64(plan.T)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	_ = sink
}

// BenchmarkRelease runs the whole mechanism (clipping pass, sampling, sums,
// noise, emission) on the Fashion-MNIST shape with m = 64.
func BenchmarkRelease(b *testing.B) { benchRelease(b, Poisson, 0) }

// BenchmarkReleaseHierarchical is the same with hierarchical sampling, p = 0.3.
func BenchmarkReleaseHierarchical(b *testing.B) { benchRelease(b, Hierarchical, 0.3) }

// BenchmarkGather measures the sums alone: 64 random rows of 784 features per
// output, on one goroutine.
func BenchmarkGather(b *testing.B) {
	data := benchData()
	r := rand.New(rand.NewPCG(3, 4))
	acc := make([]float64, benchD)
	zero := make([]float32, benchD)
	w := &worker{data: data, zero: zero}
	for range benchM * 64 {
		w.idx = append(w.idx, int32(r.IntN(benchN)))
	}
	b.ResetTimer()
	var g group
	for b.Loop() {
		clear(acc)
		for p := 0; p < len(w.idx); p += 8 {
			for k := range 8 {
				g[k] = w.rowPtr(p + k)
				g[8+k] = w.rowPtr(p + 8 + k)
			}
			addGroup(acc, &g)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/output")
}
