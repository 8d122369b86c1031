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
	noise := release.NewNoise()
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
	cpu0 := processCPU()
	for b.Loop() {
		if err := Release(noise, data, plan, emit); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPU() - cpu0
	rows := float64(b.N) * float64(plan.T)
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	_ = sink
}

// BenchmarkRelease runs the whole mechanism (clipping pass, sampling, sums,
// noise, emission) on the Fashion-MNIST shape with m = 64.
//
//	go test ./release/avgmix/ -run '^$' -bench . -benchtime 5x -count 3
//
// On the 2-core AMD EPYC (Zen 5) development VM, when otherwise idle, before
// the int32 gather: 0.746 s per release of 60000 rows (12.4 us/row, 80k
// rows/s), 2.3 MB and 86 allocations per release; hierarchical sampling
// 0.81 s. A CPU profile then split the time roughly as noise sampling 45%
// (47.6M rounded-Gaussian draws at about 14 ns each, release.Noise),
// gathering the 64 rows of each output 35% (memory-bound: 12 GB read at about
// 25-35 GB/s), label sums 6%, clipping 5%, subset sampling 4%. With the
// int32 gather (2026-11-23, load 4-9, ten alternating pairs against the
// code before): 1.56-2.38 CPU-seconds per release against 1.72-2.47, lower
// in 8 of the 10 pairs (median ratio 1.12x); the profile now shows the
// gather kernel at 28% of the release and the noise sampler at 41%.
func BenchmarkRelease(b *testing.B) { benchRelease(b, Poisson, 0) }

// BenchmarkReleaseHierarchical is the same with hierarchical sampling, p = 0.3.
func BenchmarkReleaseHierarchical(b *testing.B) { benchRelease(b, Hierarchical, 0.3) }

// BenchmarkGather measures the sums alone: 64 random rows of 784 features per
// output, on one goroutine, the rows stored as units (see group) and drawn
// afresh every iteration, so the table is read from memory as in a release.
// On the VM above at load 9, four alternating pairs against the float64
// kernel it replaced (same harness): 12.6-13.9 us of CPU per output against
// 16.5-20.1 us. In the L2 cache (a 256-row table) the float64 kernel took
// 4.5 us and the int32 one 2.4 us: the gather is bound by memory, and half
// the bytes per row (a 392-wide table) took half the time.
func BenchmarkGather(b *testing.B) {
	data := benchData()
	units := make([]float32, len(data.X))
	u := unitRow(&units[0], len(units))
	for i, v := range data.X {
		u[i] = int32(v * (1 << 23)) // v in [0, 1): units of 2^-23, below 2^23
	}
	data.X = units
	r := rand.New(rand.NewPCG(3, 4))
	acc, accY := make([]float64, benchD), make([]float64, benchK)
	xr, err := newRows(data)
	if err != nil {
		b.Fatal(err)
	}
	w := &worker{data: data, x: xr, zero: make([]float32, benchD), units: make([]int32, benchD)}
	const outputs = 256
	cpu0 := processCPU()
	for b.Loop() {
		b.StopTimer()
		w.idx = w.idx[:0] // fresh rows: the table does not fit the caches
		for range benchM * outputs {
			w.idx = append(w.idx, int32(r.IntN(benchN)))
		}
		b.StartTimer()
		for o := range outputs {
			clear(acc)
			w.sum(o*benchM, (o+1)*benchM, 0x1p-23, acc, accY)
		}
	}
	b.ReportMetric((processCPU()-cpu0)*1e9/float64(b.N)/outputs, "cpu-ns/output")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/outputs, "ns/output")
}
