package avgmix

import "golang.org/x/sys/cpu"

// addUnitsAVX2 adds the units of rows 0-7 of grp into acc[0 : n&^15] and
// prefetches rows 8-15 at the same offsets. It needs AVX2.
//
//go:noescape
func addUnitsAVX2(acc *int32, grp *group, n int)

// addUnitsAVX512 is addUnitsAVX2 with 512-bit registers. It needs AVX-512F.
//
//go:noescape
func addUnitsAVX512(acc *int32, grp *group, n int)

// unitSumsAVX2 sets acc[j] = (acc[j] + float64(u[j])) * h and u[j] = 0 for
// j < n&^7. It needs AVX2.
//
//go:noescape
func unitSumsAVX2(acc *float64, u *int32, n int, h float64)

// unitSumsAVX512 is unitSumsAVX2 for j < n&^15. It needs AVX-512F.
//
//go:noescape
func unitSumsAVX512(acc *float64, u *int32, n int, h float64)

// fromUnitsAVX512 sets v[j] = float32(u) * h for the units u stored in v[j],
// j < n&^31. It needs AVX-512F.
//
//go:noescape
func fromUnitsAVX512(v *float32, n int, h float32)

// fromUnitsAVX2 is fromUnitsAVX512 for j < n&^15. It needs AVX2.
//
//go:noescape
func fromUnitsAVX2(v *float32, n int, h float32)

// CPU and operating system support.
var (
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX512F
)

// addUnits adds the units of rows 0-7 of g into acc (see addUnitsGo).
func addUnits(acc []int32, g *group) {
	n, done := len(acc), 0
	if n >= 16 {
		switch {
		case useAVX512:
			addUnitsAVX512(&acc[0], g, n)
			done = n &^ 15
		case useAVX2:
			addUnitsAVX2(&acc[0], g, n)
			done = n &^ 15
		}
	}
	addUnitsGo(acc, g, done, n)
}

// unitSums moves the units u into the float64 sums acc (see unitSumsGo).
func unitSums(acc []float64, u []int32, h float64) {
	n, done := len(u), 0
	switch {
	case useAVX512 && n >= 16:
		unitSumsAVX512(&acc[0], &u[0], n, h)
		done = n &^ 15
	case useAVX2 && n >= 8:
		unitSumsAVX2(&acc[0], &u[0], n, h)
		done = n &^ 7
	}
	unitSumsGo(acc[done:n], u[done:], h)
}

// fromUnitsStep turns the units in v back into floats of step h (see
// fromUnitsGo).
func fromUnitsStep(v []float32, h float32) {
	n, done := len(v), 0
	switch {
	case useAVX512 && n >= 32:
		fromUnitsAVX512(&v[0], n, h)
		done = n &^ 31
	case useAVX2 && n >= 16:
		fromUnitsAVX2(&v[0], n, h)
		done = n &^ 15
	}
	fromUnitsGo(v[done:], h)
}
