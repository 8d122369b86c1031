//go:build !dpsql_testseed

package release

import "encoding/binary"

// NewSeededNoise is, for this package's own tests in a normal build, the
// deterministic constructor that seed_testseed.go compiles only with -tags
// dpsql_testseed. Test files are not part of the package other packages
// import, so a normal build still has no seeded constructor.
func NewSeededNoise(seed uint64) *Noise {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return newNoise(s)
}
