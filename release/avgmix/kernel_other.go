//go:build !amd64

package avgmix

const (
	useAVX2   = false
	useAVX512 = false
)

// addUnits adds the units of rows 0-7 of g into acc (see addUnitsGo).
func addUnits(acc []int32, g *group) { addUnitsGo(acc, g, 0, len(acc)) }

// unitSums moves the units u into the float64 sums acc (see unitSumsGo).
func unitSums(acc []float64, u []int32, h float64) { unitSumsGo(acc, u, h) }

// fromUnitsStep turns the units in v back into floats of step h (see
// fromUnitsGo).
func fromUnitsStep(v []float32, h float32) { fromUnitsGo(v, h) }
