//go:build dpsql_testseed

package release

import "encoding/binary"

// NewSeededNoise returns a deterministic Noise. It is a test hook, compiled
// only with -tags dpsql_testseed: releases made with it are not private, and a
// normal build has no way to fix the seed.
func NewSeededNoise(seed uint64) *Noise {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return newNoise(s)
}
