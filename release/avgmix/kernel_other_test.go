//go:build !amd64

package avgmix

// simdUnitKernels lists the SIMD unit kernels this machine runs: none.
func simdUnitKernels() map[string]func(acc []int32, g *group) { return nil }

// simdUnitSums lists the SIMD versions of unitSums this machine runs: none.
func simdUnitSums() map[string]func(acc []float64, u []int32, h float64) { return nil }

// simdFromUnits lists the SIMD versions of fromUnitsStep this machine runs:
// none.
func simdFromUnits() map[string]func(v []float32, h float32) { return nil }
