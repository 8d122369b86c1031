package avgmix

import "unsafe"

// group holds the row pointers of one kernel call: feature rows 0-7 are
// added into the accumulator; entries 8-15 are the next group's feature rows,
// entries 16-23 the first and 24-31 the last values of its label rows, which
// the SIMD kernels prefetch while they work (a label row may straddle two
// cache lines). Unused slots point at a zero row.
//
// During a release the feature rows hold units, not floats: each stored
// value x = u h is replaced by the int32 u (|u| < 2^24, see clipUnits) in the
// same four bytes. The pointers keep the *float32 type of the rows they
// point into.
type group [32]*float32

// maxUnitRows is the largest number of rows whose units may be summed in one
// int32: 127 (2^24 - 1) < 2^31.
const maxUnitRows = 127

// addUnitsGo adds the units of rows 0-7 of g into acc[from:to] in int32.
// The caller keeps at most maxUnitRows rows in acc, so nothing overflows.
func addUnitsGo(acc []int32, g *group, from, to int) {
	if from >= to {
		return
	}
	r0 := unitRow(g[0], to)
	r1 := unitRow(g[1], to)
	r2 := unitRow(g[2], to)
	r3 := unitRow(g[3], to)
	r4 := unitRow(g[4], to)
	r5 := unitRow(g[5], to)
	r6 := unitRow(g[6], to)
	r7 := unitRow(g[7], to)
	acc = acc[:to]
	for j := from; j < to; j++ {
		acc[j] += ((r0[j] + r1[j]) + (r2[j] + r3[j])) + ((r4[j] + r5[j]) + (r6[j] + r7[j]))
	}
}

// unitSumsGo sets acc[j] = (acc[j] + float64(u[j])) * h and clears u: with
// h = 1 it moves partial sums of units into acc, with h the step it turns
// the float64 sum of units into the sum of values. Both are exact while the
// sums of units stay below 2^53 in magnitude, as h is a power of two.
func unitSumsGo(acc []float64, u []int32, h float64) {
	acc = acc[:len(u)]
	for j, v := range u {
		acc[j] = (acc[j] + float64(v)) * h
	}
	clear(u)
}

// fromUnitsGo sets v[j] = float32(u) * h for the units u stored in v[j]. It
// is exact for the steps quantStep returns (2^-124 <= h <= 2^77): |u| < 2^24
// is a float32, and u h is a normal float32.
func fromUnitsGo(v []float32, h float32) {
	for j, u := range unitRow(unsafe.SliceData(v), len(v)) {
		v[j] = float32(u) * h
	}
}

// unitRow views the n values at p as the int32 units they hold.
func unitRow(p *float32, n int) []int32 { return unsafe.Slice((*int32)(unsafe.Pointer(p)), n) }
