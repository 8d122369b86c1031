package release

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
)

// GridBits fixes the noise grid relative to the noise scale: a Gaussian of
// scale sigma is sampled on the grid g = 2^(floor(log2 sigma) - GridBits), so
// sigma/g lies in [2^GridBits, 2^(GridBits+1)).
const GridBits = 15

// Grid returns the power-of-two grid step used for Gaussian noise of scale sigma.
func Grid(sigma float64) float64 {
	_, e := math.Frexp(sigma) // sigma = f * 2^e, f in [0.5, 1)
	return math.Ldexp(1, e-1-GridBits)
}

// GaussianMu returns the mu-GDP parameter of [Noise.AddGaussian] with scale
// sigma on dim coordinates of a quantity with L2 sensitivity S. Rounding the
// input to the grid can move each coordinate of the difference between two
// neighbours by at most one grid step, so the sensitivity that counts is
// S + g*sqrt(dim).
func GaussianMu(sensitivity, sigma float64, dim int) float64 {
	return (sensitivity + Grid(sigma)*math.Sqrt(float64(dim))) / sigma
}

// GaussianSigma returns the smallest practical noise scale sigma such that
// [GaussianMu](sensitivity, sigma, dim) <= mu.
func GaussianSigma(sensitivity, mu float64, dim int) (float64, error) {
	if !(sensitivity > 0) || math.IsInf(sensitivity, 0) {
		return 0, fmt.Errorf("sensitivity must be a positive finite number, got %v", sensitivity)
	}
	if !(mu > 0) || math.IsInf(mu, 0) {
		return 0, fmt.Errorf("mu must be a positive finite number, got %v", mu)
	}
	if dim < 1 {
		return 0, fmt.Errorf("dimension must be at least 1, got %d", dim)
	}
	// Grid(sigma) <= sigma * 2^-GridBits, so this sigma satisfies the bound.
	slack := math.Sqrt(float64(dim)) * math.Ldexp(1, -GridBits)
	if mu <= 2*slack {
		return 0, fmt.Errorf("mu = %g is too small for %d coordinates on the noise grid (need mu > %.3g)", mu, dim, 2*slack)
	}
	sigma := sensitivity / (mu - slack)
	if GaussianMu(sensitivity, sigma, dim) > mu {
		return 0, errors.New("internal error: grid calibration exceeded mu")
	}
	return sigma, nil
}

// Noise is a source of secure noise. It is not safe for concurrent use; give
// each goroutine its own with [Noise.Split].
type Noise struct {
	r *mrand.Rand
}

// NewNoise returns a Noise whose ChaCha8 stream is seeded from crypto/rand.
func NewNoise() *Noise {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("release: crypto/rand failed: " + err.Error()) // crypto/rand.Read never fails on supported platforms
	}
	return &Noise{r: mrand.New(mrand.NewChaCha8(seed))}
}

// NewSeededNoise returns a deterministic Noise. It is a test hook: releases made
// with it are not private. dpsql never calls it outside tests.
func NewSeededNoise(seed uint64) *Noise {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return &Noise{r: mrand.New(mrand.NewChaCha8(s))}
}

// Split returns an independent Noise seeded from this one's stream, for another goroutine.
func (n *Noise) Split() *Noise {
	var s [32]byte
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(s[8*i:], n.r.Uint64())
	}
	return &Noise{r: mrand.New(mrand.NewChaCha8(s))}
}

// Rand exposes the underlying secure stream for sampling decisions (subsets,
// permutations). Its values must never be used as additive noise directly.
func (n *Noise) Rand() *mrand.Rand { return n.r }

// AddGaussian rounds each dst[i] to the grid [Grid](sigma) and adds Gaussian
// noise of scale sigma sampled on that grid. The result is exact on the grid,
// so it carries no floating-point gaps.
func (n *Noise) AddGaussian(dst []float64, sigma float64) {
	g := Grid(sigma)
	s := sigma / g
	for i, x := range dst {
		k := math.Round(s * n.r.NormFloat64()) // placeholder sampler, replaced by the grid sampler
		dst[i] = (math.Round(x/g) + k) * g
	}
}

// AddGaussian32 is [Noise.AddGaussian] for float32 vectors. The sum is formed
// exactly in float64 on the grid and then rounded to float32, which is
// post-processing.
func (n *Noise) AddGaussian32(dst []float32, sigma float64) {
	g := Grid(sigma)
	s := sigma / g
	for i, x := range dst {
		k := math.Round(s * n.r.NormFloat64())
		dst[i] = float32((math.Round(float64(x)/g) + k) * g)
	}
}
