package avgmix

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkTileExp compares the column-tiled gather (tileSumsAVX512: for
// each tile of 16 columns, the tile sums of all G outputs) with the row-wise
// one (worker.sum), for G outputs of 64 rows drawn from the first n rows of
// the Fashion-MNIST-shaped table as units, prefetching pd rows ahead:
//
//	go test ./release/avgmix -run '^$' -bench 'TileExp$' -benchtime 20x
//
// See BenchmarkGather's comment in bench_test.go for the figures.
func BenchmarkTileExp(b *testing.B) { tileExp(b, false) }

// BenchmarkTileExpHuge is BenchmarkTileExp with the table in transparent
// huge pages (madvise), to see whether the tiles' random lines wait on the
// TLB: it logs the process's AnonHugePages.
func BenchmarkTileExpHuge(b *testing.B) { tileExp(b, true) }

func tileExp(b *testing.B, huge bool) {
	data := benchData()
	units := make([]float32, len(data.X))
	if huge {
		bs := unsafe.Slice((*byte)(unsafe.Pointer(&units[0])), len(units)*4)
		if err := unix.Madvise(bs, unix.MADV_HUGEPAGE); err != nil {
			b.Log(err)
		}
	}
	u := unitRow(&units[0], len(units))
	for i, v := range data.X {
		u[i] = int32(v * (1 << 23))
	}
	data.X = units
	if huge {
		sm, _ := os.ReadFile("/proc/self/smaps_rollup")
		for _, l := range strings.Split(string(sm), "\n") {
			if strings.HasPrefix(l, "AnonHuge") {
				b.Log(l)
			}
		}
	}
	xr, _ := newRows(data)
	zero := make([]float32, benchD)
	for _, G := range []int{82, 4096} {
		for _, nrows := range []int{4096, 16384, benchN} {
			for _, pd := range []int{16, 64} {
				r := rand.New(rand.NewPCG(3, 4))
				idx := make([]int32, benchM*G)
				ptrs := make([]unsafe.Pointer, benchM*G+128)
				ends := make([]int32, G)
				dst := make([]int32, G*benchD)
				for o := range G {
					ends[o] = int32((o + 1) * benchM)
				}
				b.Run(fmt.Sprintf("tile/G=%d/n=%d/pd=%d", G, nrows, pd), func(b *testing.B) {
					cpu0 := processCPU()
					for b.Loop() {
						b.StopTimer()
						for i := range idx {
							idx[i] = int32(r.IntN(nrows))
						}
						b.StartTimer()
						for i, v := range idx {
							ptrs[i] = unsafe.Pointer(xr.at(int(v)))
						}
						for i := len(idx); i < len(ptrs); i++ {
							ptrs[i] = unsafe.Pointer(&zero[0])
						}
						for c := 0; c < benchD; c += 16 {
							tileSumsAVX512(&dst[c], &ptrs[0], &ends[0], G, c*4, benchD*4, &ptrs[pd])
						}
					}
					b.ReportMetric((processCPU()-cpu0)*1e9/float64(b.N)/float64(G), "cpu-ns/output")
				})
				if pd != 16 {
					continue
				}
				b.Run(fmt.Sprintf("rows/G=%d/n=%d", G, nrows), func(b *testing.B) {
					w := &worker{data: data, x: xr, zero: zero, units: make([]int32, benchD)}
					acc, accY := make([]float64, benchD), make([]float64, benchK)
					cpu0 := processCPU()
					for b.Loop() {
						b.StopTimer()
						w.idx = w.idx[:0]
						for range benchM * G {
							w.idx = append(w.idx, int32(r.IntN(nrows)))
						}
						b.StartTimer()
						for o := range G {
							clear(acc)
							w.sum(o*benchM, (o+1)*benchM, 0x1p-23, acc, accY)
						}
					}
					b.ReportMetric((processCPU()-cpu0)*1e9/float64(b.N)/float64(G), "cpu-ns/output")
				})
			}
		}
	}
}
