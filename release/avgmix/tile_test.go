package avgmix

import (
	"slices"
	"testing"
)

// A seeded release is the same, bit for bit, with the tiled gather and the
// row-wise one, also with subsets over maxUnitRows rows (which the tiled
// gather hands back to the row-wise one) and widths that are not a multiple
// of 16.
func TestReleaseSameTiled(t *testing.T) { compareTiled(t) }

// compareTiled runs TestReleaseSameTiled with the kernels the package uses.
func compareTiled(t *testing.T) {
	tiled := tiledGather
	defer func() { tiledGather = tiled }()
	for _, tc := range []struct {
		name       string
		n, d, k, m int
	}{
		{"d37", 500, 37, 4, 20},
		{"d64", 700, 64, 3, 40},
		{"d784", 300, 784, 10, 30},
		{"over127", 400, 48, 5, 150},
	} {
		data := tinyData(4, tc.n, tc.d, tc.k, 1)
		plan, err := NewPlan(nil, tc.n, tc.d, tc.k, Params{T: 600, M: tc.m, Mu: 1})
		if err != nil {
			t.Fatal(err)
		}
		tiledGather = false
		want := collect(t, seededNoise(t, 14), cloneData(data), plan)
		tiledGather = true
		got := collect(t, seededNoise(t, 14), cloneData(data), plan)
		if !slices.EqualFunc(want, got, slices.Equal) {
			t.Errorf("%s: the tiled release differs from the row-wise one", tc.name)
		}
	}
}
