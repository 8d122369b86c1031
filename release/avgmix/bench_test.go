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
//
// Column tiles do not help on this VM (2026-11-23, load 0.5-1.1; the
// experiment is commit b43b6cd, reverted in the next one). Summing a batch
// tile by tile (16 columns, one cache line per row; for each tile all the
// batch's outputs, the same exact sums) turns each row's 49 streamed lines
// into 49 random single-line reads. Four alternating pairs of
//
//	go test -c -o old.test ./release/avgmix   # main; b43b6cd gives new.test
//	./old.test -test.run '^$' -test.bench '^BenchmarkRelease$' -test.benchtime 5x
//
// took 1.30-1.62 cpu-s per release tiled against 1.05-1.16 row-wise. That
// commit's BenchmarkTileExp (-bench 'TileExp$' -benchtime 20x) took, per
// output of 64 rows: one batch of 82 outputs (no row is reused) 18-22 us tiled
// against 11.4 us; 4096 outputs (each row reused about 4 times) 26-28 us
// against 9.1 us, as a tile's column of the table (60000 lines, 3.8 MB) does
// not stay in this VM's share of the L3: rows drawn from the first 16384
// only (a 1 MB column) still took 17 us, from the first 4096 (256 KB, in L2)
// 2.9 us against 4.5 us, the one case where tiles won. The table in huge
// pages (madvise) changed neither, so the random lines wait on memory, not on
// the TLB. Reuse would need groups of a thousand outputs or more whose
// subsets are drawn before the noise of the earlier ones, which the worker's
// single stream (per batch: subsets, then noise) does not allow unless the
// noise is drawn ahead too.
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
