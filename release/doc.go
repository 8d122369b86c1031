// Package release holds dpsql's mechanisms: pure Go over vectors and matrices,
// with no SQL. Every function here draws its randomness from a [Noise], which is
// seeded from crypto/rand and samples on a power-of-two grid so that outputs have
// no floating-point gaps (Mironov 2012; Canonne, Kamath, Steinke 2020).
//
// Sub-packages hold the larger mechanisms: [github.com/dpsql/dpsql/release/avgmix]
// (NeuroMixGDP average mixup) and [github.com/dpsql/dpsql/release/dfs] (private
// feature selection).
package release
