//go:build dpsql_testseed

package main

import "github.com/dpsql/dpsql/release"

// seededNoise returns the deterministic noise of stream s: this build has the
// seed test hook (-tags dpsql_testseed), so the tables are reproducible.
func seededNoise(s uint64) *release.Noise { return release.NewSeededNoise(s) }

// noiseNote says where the noise comes from.
const noiseNote = "seeded (release.NewSeededNoise, -tags dpsql_testseed): reproducible; an experiment, not a private release"
