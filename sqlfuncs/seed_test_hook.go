//go:build dpsql_testseed

package sqlfuncs

import "github.com/dpsql/dpsql/release"

// seededNoise honours the "seed" option in test builds (-tags dpsql_testseed).
func seededNoise(fn string, seed *uint64) (*release.Noise, error) {
	if seed == nil {
		return nil, nil
	}
	return release.NewSeededNoise(*seed), nil
}

// seedOption reports whether the "seed" option works; it is true in test builds.
const seedOption = true
