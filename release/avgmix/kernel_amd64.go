package avgmix

// addGroupAVX2 adds rows 0-7 of grp into acc[0 : n&^15] and prefetches rows
// 8-15 at the same offsets. It needs AVX2.
//
//go:noescape
func addGroupAVX2(acc *float64, grp *group, n int)

// cpuid executes CPUID with the given leaf and subleaf.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// xgetbv0 returns XCR0.
func xgetbv0() (eax, edx uint32)

// hasAVX2 reports whether the CPU and the operating system support AVX2.
func hasAVX2() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}

var useAVX2 = hasAVX2()

// addGroup adds rows 0-7 of g into acc.
func addGroup(acc []float64, g *group) {
	n, done := len(acc), 0
	if useAVX2 && n >= 16 {
		addGroupAVX2(&acc[0], g, n)
		done = n &^ 15
	}
	addGroupGo(acc, g, done, n)
}
