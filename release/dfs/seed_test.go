package dfs

import (
	"testing"
	"testing/cryptotest"

	"github.com/dpsql/dpsql/release"
)

// seededNoise returns a Noise whose stream is fixed by seed. It makes
// crypto/rand deterministic for the rest of test t (testing/cryptotest) and
// draws an ordinary Noise, so these tests need no seeded constructor: that
// exists only in builds tagged dpsql_testseed.
func seededNoise(t *testing.T, seed uint64) *release.Noise {
	t.Helper()
	cryptotest.SetGlobalRandom(t, seed)
	return release.NewNoise()
}
