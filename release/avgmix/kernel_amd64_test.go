package avgmix

import (
	"slices"
	"testing"
)

// simdUnitKernels lists the SIMD unit kernels this machine runs.
func simdUnitKernels() map[string]func(acc []int32, g *group) {
	ks := map[string]func(acc []int32, g *group){}
	simd := func(f func(*int32, *group, int)) func(acc []int32, g *group) {
		return func(acc []int32, g *group) {
			n := len(acc)
			if n >= 16 {
				f(&acc[0], g, n)
			}
			addUnitsGo(acc, g, n&^15, n)
		}
	}
	if useAVX2 {
		ks["avx2"] = simd(addUnitsAVX2)
	}
	if useAVX512 {
		ks["avx512"] = simd(addUnitsAVX512)
	}
	return ks
}

// simdUnitSums lists the SIMD versions of unitSums this machine runs.
func simdUnitSums() map[string]func(acc []float64, u []int32, h float64) {
	ks := map[string]func(acc []float64, u []int32, h float64){}
	if useAVX2 {
		ks["avx2"] = func(acc []float64, u []int32, h float64) {
			n := len(u)
			if n >= 8 {
				unitSumsAVX2(&acc[0], &u[0], n, h)
			}
			unitSumsGo(acc[n&^7:n], u[n&^7:], h)
		}
	}
	if useAVX512 {
		ks["avx512"] = func(acc []float64, u []int32, h float64) {
			n := len(u)
			if n >= 16 {
				unitSumsAVX512(&acc[0], &u[0], n, h)
			}
			unitSumsGo(acc[n&^15:n], u[n&^15:], h)
		}
	}
	return ks
}

// simdFromUnits lists the SIMD versions of fromUnitsStep this machine runs.
func simdFromUnits() map[string]func(v []float32, h float32) {
	ks := map[string]func(v []float32, h float32){}
	if useAVX2 {
		ks["avx2"] = func(v []float32, h float32) {
			if len(v) >= 16 {
				fromUnitsAVX2(&v[0], len(v), h)
			}
			fromUnitsGo(v[len(v)&^15:], h)
		}
	}
	if useAVX512 {
		ks["avx512"] = func(v []float32, h float32) {
			if len(v) >= 32 {
				fromUnitsAVX512(&v[0], len(v), h)
			}
			fromUnitsGo(v[len(v)&^31:], h)
		}
	}
	return ks
}

// A seeded release is the same, bit for bit, whichever kernel sums the rows:
// AVX-512, AVX2 or plain Go (the sums are exact).
func TestReleaseSameWithEveryKernel(t *testing.T) {
	const n, d, k = 500, 37, 4 // d not a multiple of 16: SIMD body and Go tail
	data := tinyData(4, n, d, k, 1)
	plan, err := NewPlan(nil, n, d, k, Params{T: 1000, M: 20, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	avx2, avx512 := useAVX2, useAVX512
	defer func() { useAVX2, useAVX512 = avx2, avx512 }()
	var want [][]float32
	for _, kern := range []struct {
		name         string
		avx2, avx512 bool
	}{{"best", avx2, avx512}, {"avx2", avx2, false}, {"go", false, false}} { // only what the CPU has
		useAVX2, useAVX512 = kern.avx2, kern.avx512
		got := collect(t, seededNoise(t, 14), cloneData(data), plan)
		if want == nil {
			want = got
			continue
		}
		if !slices.EqualFunc(want, got, slices.Equal) {
			t.Errorf("the release with the %s kernels differs from the first one", kern.name)
		}
	}
}
