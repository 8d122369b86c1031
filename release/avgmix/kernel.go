package avgmix

import "unsafe"

// group holds the row pointers of one kernel call: feature rows 0-7 are
// added into the accumulator; entries 8-15 are the next group's feature rows
// and entries 16-23 its label rows, which the AVX2 kernel prefetches while it
// works. Unused slots point at a zero row.
type group [24]*float32

// addGroupGo adds rows 0-7 of g into acc[from:to]. Every stored value is a
// multiple of the quantisation step below 2^24 steps, so the float64 sums are
// exact and the order of the additions does not matter.
func addGroupGo(acc []float64, g *group, from, to int) {
	if from >= to {
		return
	}
	r0 := unsafe.Slice(g[0], to)
	r1 := unsafe.Slice(g[1], to)
	r2 := unsafe.Slice(g[2], to)
	r3 := unsafe.Slice(g[3], to)
	r4 := unsafe.Slice(g[4], to)
	r5 := unsafe.Slice(g[5], to)
	r6 := unsafe.Slice(g[6], to)
	r7 := unsafe.Slice(g[7], to)
	acc = acc[:to]
	for j := from; j < to; j++ {
		acc[j] += ((float64(r0[j]) + float64(r1[j])) + (float64(r2[j]) + float64(r3[j]))) +
			((float64(r4[j]) + float64(r5[j])) + (float64(r6[j]) + float64(r7[j])))
	}
}
