//go:build !dpsql_testseed

package sqlfuncs

import (
	"fmt"

	"github.com/dpsql/dpsql/release"
)

// seededNoise refuses the "seed" option: fixed seeds make releases
// reproducible, which makes them non-private. Build with -tags dpsql_testseed
// to enable it in tests.
func seededNoise(fn string, seed *uint64) (*release.Noise, error) {
	if seed != nil {
		return nil, fmt.Errorf("%s: option \"seed\" is a test hook, available only in builds with -tags dpsql_testseed; a fixed seed makes a release non-private", fn)
	}
	return nil, nil
}

// seedOption reports whether the "seed" option works; it is false: a normal build refuses it.
const seedOption = false
