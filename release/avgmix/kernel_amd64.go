package avgmix

import "golang.org/x/sys/cpu"

// addGroupAVX2 adds rows 0-7 of grp into acc[0 : n&^15] and prefetches rows
// 8-15 at the same offsets. It needs AVX2.
//
//go:noescape
func addGroupAVX2(acc *float64, grp *group, n int)

var useAVX2 = cpu.X86.HasAVX2 // CPU and operating system support

// addGroup adds rows 0-7 of g into acc.
func addGroup(acc []float64, g *group) {
	n, done := len(acc), 0
	if useAVX2 && n >= 16 {
		addGroupAVX2(&acc[0], g, n)
		done = n &^ 15
	}
	addGroupGo(acc, g, done, n)
}
