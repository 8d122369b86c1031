//go:build !dpsql_testseed

package main

import "github.com/dpsql/dpsql/release"

// seededNoise returns crypto/rand noise: seeded noise is a test hook that
// exists only in builds tagged dpsql_testseed. Run with -tags dpsql_testseed
// to reproduce the published tables exactly.
func seededNoise(uint64) *release.Noise { return release.NewNoise() }

// noiseNote says where the noise comes from.
const noiseNote = "crypto/rand (seeded noise needs -tags dpsql_testseed): results vary from run to run within their standard errors"
