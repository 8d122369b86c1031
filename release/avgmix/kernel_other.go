//go:build !amd64

package avgmix

const useAVX2 = false

// addGroup adds rows 0-7 of g into acc.
func addGroup(acc []float64, g *group) { addGroupGo(acc, g, 0, len(acc)) }
