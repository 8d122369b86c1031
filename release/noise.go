package release

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"

	"github.com/dpsql/dpsql/internal/lru"
)

// GridBits fixes the noise grid relative to the noise scale: a Gaussian of
// scale sigma is sampled on the grid g = 2^(floor(log2 sigma) - GridBits), so
// sigma/g lies in [2^GridBits, 2^(GridBits+1)).
const GridBits = 15

// MinSigma is the smallest noise scale [Noise.AddGaussian] accepts: it keeps
// the grid step and every k*g a normal float64, so they are exact.
const MinSigma = 0x1p-1000

// Grid returns the power-of-two grid step used for Gaussian noise of scale sigma.
func Grid(sigma float64) float64 {
	_, e := math.Frexp(sigma) // sigma = f * 2^e, f in [0.5, 1)
	return math.Ldexp(1, e-1-GridBits)
}

// NoiseTV bounds, per coordinate, the total-variation distance between the
// noise [Noise.AddGaussian] draws and the exact rounded Gaussian its privacy
// argument assumes (see AddGaussian, "Sampler and its error": the sampler is
// exact rejection sampling on |k| < 13s, and P(|k| >= 13s) < 2^-125.9). A
// release of c noisy coordinates with an (epsilon, delta) guarantee is
// (epsilon, delta + (1 + e^epsilon) c NoiseTV)-DP.
const NoiseTV = 0x1p-125

// NoiseTVOf returns the total-variation bound of c noisy coordinates, c*NoiseTV.
func NoiseTVOf(c int) float64 { return float64(c) * NoiseTV }

// GaussianMu returns the mu-GDP parameter of [Noise.AddGaussian] with scale
// sigma on dim coordinates of a quantity with L2 sensitivity S. Rounding the
// input to the grid can move each coordinate of the difference between two
// neighbours by at most one grid step, so the sensitivity that counts is
// S + g*sqrt(dim).
func GaussianMu(sensitivity, sigma float64, dim int) float64 {
	return GridSensitivity(sensitivity, sigma, dim) / sigma
}

// GridSensitivity is the L2 sensitivity [Noise.AddGaussian] actually has on dim
// coordinates of a quantity with sensitivity S: S + Grid(sigma)*sqrt(dim).
func GridSensitivity(sensitivity, sigma float64, dim int) float64 {
	return sensitivity + Grid(sigma)*math.Sqrt(float64(dim))
}

// GaussianSigma returns the smallest practical noise scale sigma such that
// [GaussianMu](sensitivity, sigma, dim) <= mu.
//
// On each binade [2^(e-1), 2^e) of sigma the grid g is fixed and GaussianMu
// decreases in sigma, so the smallest sigma of the binade that works is
// max(2^(e-1), (S + g*sqrt(dim))/mu) if that is below 2^e. The search starts
// at the binade of S/mu (no smaller sigma can work) and moves up; with
// mu > 2^-14*sqrt(dim) it ends within two binades. The result meets mu up to
// a few ulps of rounding, always from below.
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
	rd := math.Sqrt(float64(dim))
	// Grid(sigma) <= sigma * 2^-GridBits; below this the grid alone eats most of mu.
	slack := rd * math.Ldexp(1, -GridBits)
	if mu <= 2*slack {
		return 0, fmt.Errorf("mu = %g is too small for %d coordinates on the noise grid (need mu > %.3g)", mu, dim, 2*slack)
	}
	sigma := sensitivity / mu
	for range 4 {
		if !(sigma >= MinSigma) || math.IsInf(sigma, 0) {
			return 0, fmt.Errorf("noise scale %g for sensitivity %g and mu %g is outside [%g, MaxFloat64]", sigma, sensitivity, mu, MinSigma)
		}
		g := Grid(sigma)
		lo, hi := math.Ldexp(g, GridBits), math.Ldexp(g, GridBits+1) // the binade of sigma, where Grid is g
		c := max((sensitivity+g*rd)/mu, lo)
		for i := 0; i < 8 && c < hi && GaussianMu(sensitivity, c, dim) > mu; i++ {
			c = math.Nextafter(c, math.Inf(1)) // undo rounding in the division
		}
		if c < hi && GaussianMu(sensitivity, c, dim) <= mu {
			return c, nil
		}
		sigma = hi
	}
	return 0, errors.New("internal error: grid calibration exceeded mu")
}

// Noise is a source of secure noise. It is not safe for concurrent use; give
// each goroutine its own with [Noise.Split].
//
// # Generator
//
// Every random bit a Noise uses comes from one stream of 64-bit words. Where
// crypto/aes runs on the CPU's AES instructions (AES-NI with SSE4.1 and SSSE3
// on amd64, the AES extension on arm64, CPACF on s390x) the stream is the
// AES-256-CTR keystream: a 32-byte key (from crypto/rand for [NewNoise], from
// the parent's stream for [Noise.Split]), counter blocks 0, 1, 2, ...
// (128-bit big endian, incremented as crypto/cipher's CTR does), and word i
// is bytes 8i..8i+7 of the keystream read little endian. Elsewhere it is
// math/rand/v2's ChaCha8 seeded with those 32 bytes, word i its i-th Uint64:
// exactly the stream every Noise used before.
//
// Why AES-CTR: the Gaussian sampler takes two words per coordinate, and a
// dp_avgmix release on the Fashion-MNIST shape draws about 4.8e7 samples.
// With AES instructions the whole sampler runs about twice as fast as on
// ChaCha8 (BenchmarkAddGaussianRelease; figures in docs/privacy-model.md). As a source of
// uniform bits: for q blocks under one key, no adversary tells AES-256-CTR
// from uniform bits with advantage above Adv_PRP(AES-256) + q(q-1)/2^129 (the
// PRP/PRF switching lemma: the counter blocks are distinct, so a random
// permutation never repeats an output block where a random function might).
// A whole dp_avgmix release draws about 2^25.5 blocks (4.8e7 samples of 16
// bytes) over all its workers' streams; at q = 2^26 the term is 2^-77.
// A key never produces more than 2^32 + 2 blocks (after 2^32 the stream
// rekeys from its own next 32 bytes, which bounds the term by 2^-65 per
// key), and every Split child has its own key. The privacy guarantees thus
// hold against adversaries who cannot break AES-256, as they held against
// those who cannot break ChaCha8, with their distinguishing advantage added
// to delta.
//
// Unlike math/rand/v2's ChaCha8, which overwrites its key with its own output
// every 992 bytes, an AES stream keeps its key in memory while the Noise
// lives: someone who reads the process's memory can recompute noise already
// drawn from that Noise. Such a reader also sees the data the noise protects.
//
// Why only with AES instructions: Go's software AES (used without them, or
// with -tags purego, or with GODEBUG=cpu.aes=off) is table-based, and its
// memory accesses leak key bits through cache timing to other code on the
// machine; ChaCha8 is constant-time everywhere. The check uses
// golang.org/x/sys/cpu, which reads the same GODEBUG settings as the
// runtime. ppc64 stays on ChaCha8: a GODEBUG setting this package cannot see
// switches its AES assembly off.
type Noise struct {
	src *stream
	r   *mrand.Rand
	tab *gaussTable // last Gaussian table used, saves the cache lookup
}

func newNoise(seed [32]byte) *Noise {
	src := newStream(seed)
	return &Noise{src: src, r: mrand.New(src)}
}

// NewNoise returns a Noise whose stream is keyed (ChaCha8: seeded) from
// crypto/rand; see [Noise] for the generator.
func NewNoise() *Noise {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("release: crypto/rand failed: " + err.Error()) // crypto/rand.Read never fails on supported platforms
	}
	return newNoise(seed)
}

// Split returns an independent Noise for another goroutine, keyed (or, for
// ChaCha8, seeded) with the next 32 bytes of this one's stream.
func (n *Noise) Split() *Noise {
	var s [32]byte
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(s[8*i:], n.src.Uint64())
	}
	return newNoise(s)
}

// Rand exposes the underlying secure stream for sampling decisions (subsets,
// permutations). Its values must never be used as additive noise directly.
func (n *Noise) Rand() *mrand.Rand { return n.r }

// AddGaussian rounds each dst[i] to the grid [Grid](sigma) and adds Gaussian
// noise of scale sigma sampled on that grid. The result is exact on the grid,
// so it carries no floating-point gaps. It panics unless sigma is finite and
// at least [MinSigma]: releasing without noise is never the fallback.
//
// # Distribution
//
// Let g = Grid(sigma) and s = sigma/g, in [2^15, 2^16). Coordinate i is
// released as y = (r + k)*g with r = round(x/g) (half to even) and k drawn
// independently from the rounded Gaussian, the law of round(s*Z), Z ~ N(0,1):
//
//	P(k) = Phi((k+1/2)/s) - Phi((k-1/2)/s),  k in Z,  Var k = s^2 + 1/12.
//
// # Privacy
//
// As r is an integer, r + round(s*Z) = round(r + s*Z) almost surely, so the
// integer r + k is a post-processing of the Gaussian mechanism r + s*Z applied
// to the rounded vector r. For neighbours with ||x - x'||_2 <= S each
// coordinate of r - r' is within 1/2 + 1/2 = 1 of (x_i - x'_i)/g, so
// ||r - r'||_2 <= S/g + sqrt(dim) and the release is mu-GDP (Dong, Roth, Su
// 2022) with mu = (S/g + sqrt(dim))/s = (S + g*sqrt(dim))/sigma, which is
// [GaussianMu]. For the ideal k this holds exactly; unlike the discrete
// Gaussian no closeness-to-continuous argument is needed.
//
// # No floating-point gaps
//
// y is computed as r*g + k*g. Both terms are exact multiples of g (|x| >=
// 2^52 g is already on the grid and is not divided; |k| < 2^20 and g >=
// 2^-1016 keep k*g exact), so the sum is exact while |r + k| < 2^53 and is
// otherwise the correctly rounded value of (r + k)*g; float32 output rounds
// that once more. In every case y is a fixed function of the integer r + k
// and the public g: the reachable outputs and their probabilities are those of
// the integer mechanism, and the gaps of floating-point samplers (Mironov
// 2012) do not arise.
//
// # Sampler and its error
//
// Only the Noise's word stream is used, and its words are treated as
// independent uniform bits. k is encoded as (sign, m) with k = m for sign 0
// and k = -m-1 for sign 1, so that P(k) = P(mm) with mm = m + sign >= 0. The
// magnitudes m < J*128 form J blocks of 128, with J*128 >= 13s + 1/2.
//
// The sampler is exact rejection sampling from the unnormalised law
//
//	Pt(mm) = exp(-mm^2/(2s^2)) I(mm),  I(mm) = integral_{-1/2}^{1/2} exp(-mm t/s^2 - t^2/(2s^2)) dt,
//
// which is P(mm) times the constant s sqrt(2 pi). One try: a 64-bit word
// picks block j through an integer Walker/Vose alias table with weights W_j
// summing to exactly 2^63, so block j has probability W_j/2^63 exactly; a
// second word proposes (m, sign) uniformly in the block and accepts with
// probability
//
//	alpha_j(mm) = Pt(mm) / (M W_j),
//
// M a float64 constant of the table (taken as the exact number it is). A
// rejected try starts again from the block. One try thus yields k with
// probability (W_j/2^63)(1/256) Pt(mm)/(M W_j) = Pt(mm)/(2^71 M), exactly
// proportional to P(k) on the cut: the weights W_j only steer efficiency
// (they approximate M^-1 Pt(128j)), never the law. What must hold is
// alpha <= 1, i.e. M W_j >= Pt(128j), the largest Pt in block j: the build
// computes Pt(128j) in float64 within 2^-44.9 relative (exp of an argument
// below 85 whose relative error is 3u: absolute error below 2^-45) and takes
// W_j = max(1, ceil(Pt(128j)/M (1 + 2^-30))), so every block, even the
// farthest, keeps a positive weight.
//
// The acceptance test compares the uniform U in [0, 1), whose bits are drawn
// lazily, with alpha. The fast path evaluates alpha in float64 as
// beta_j rho(mm): beta_j = Pt(128j)/(M W_j), stored (relative error at most
// 2^-44.8: the Pt estimate above plus three roundings), and
// rho(mm) = Pt(mm)/Pt(128j) = exp(-(mm-128j)(mm+128j)/(2s^2)) *
// (c0 + mm^2 c2)/(c0 + (128j)^2 c2) with c0 = 1 - 1/(24s^2), c2 = 1/(24s^4),
// the series I = 1 + mm^2/(24s^4) - 1/(24s^2) + R with |R| < 2^-55.5 for
// mm <= 14s and s >= 2^15, and an exp argument below 2^-4 (relative error
// at most 2^-49.5 altogether). So |alpha_hat/alpha - 1| < 2^-44. With the
// margin tau = 2^-36 the fast path decides only where that cannot matter: a
// 32-bit squeeze (a bound on the block's smallest alpha, less tau) accepts
// most proposals at once; otherwise the 56 bits a of U accept if
// a + 1 <= 2^56 alpha_hat (1 - tau) and reject if a >= 2^56 alpha_hat
// (1 + tau). In between, which happens with probability about 2^-35 per
// try, the slow path computes alpha in 256-bit math/big arithmetic
// (alphaBig: relative error below 2^-230, see there) and compares
// floor(2^248 alpha) with U's first 248 bits, three more words of the
// stream. Every decision therefore agrees with "U < alpha" except on an
// event of probability below 2^-229 per slow-path try.
//
// Errors against P, in total variation per coordinate: the sampled law is P
// conditioned on the cut |k| < J*128 (exactly, up to the slow path's 2^-229
// per try, about 2^-264 per sample), so the distance is P(cut) <=
// 2(1 - Phi(13)) < 2^-125.9. Hence TV(sampled, P) < 2^-125 = [NoiseTV]:
// TestNoiseAlphaBig checks the slow path against an independent 900-bit erf
// series, TestNoiseFastPath the fast path and every squeeze and beta against
// the slow path, TestNoiseTableLaw the alias weights and the per-try law. With
// eta = dim*NoiseTV the release is (eps, delta(eps) + (1 + e^eps)*eta)-DP for
// every (eps, delta(eps)) that mu-GDP gives.
//
// Run time depends on the sample only through rejected tries (about 0.2% of
// them) and the slow path (about 2^-35 of them, some 50 microseconds each).
// Tables depend only on s. One takes 24 bytes per alias column, a power of
// two >= J, and 16 bytes per block (at most 300 KiB), builds in about a
// millisecond, and is cached (at most 64 tables, shared by all goroutines).
func (n *Noise) AddGaussian(dst []float64, sigma float64) { addGaussian(n, dst, sigma) }

// AddGaussian32 is [Noise.AddGaussian] for float32 vectors. The sum is formed
// exactly in float64 on the grid and then rounded to float32, which is
// post-processing.
func (n *Noise) AddGaussian32(dst []float32, sigma float64) { addGaussian(n, dst, sigma) }

// addGaussian is AddGaussian for both element types. Each coordinate's first
// try is [gaussTable.sample]'s loop body written out here, with the stream's
// next2 inlined by hand (its read position p lives in a register and is
// stored back around calls), so the common case, a try accepted by the
// squeeze, costs no call. A rejected first try goes on in sample, which
// starts again from the block: the same tries on the same words, the same law.
func addGaussian[F float32 | float64](n *Noise, dst []F, sigma float64) {
	t, g := n.gaussTable(sigma)
	invg, lim := 1/g, 0x1p52*g
	src := n.src
	buf, p := &src.buf, src.pos
	for i, xf := range dst {
		x := float64(xf)
		if math.Abs(x) < lim { // NaN and ±Inf pass through unchanged
			x = math.RoundToEven(x*invg) * g
		}
		var u0, u uint64
		if p <= streamWords-2 {
			u0, u = buf[p], buf[p+1]
			p += 2
		} else {
			src.pos = p
			u0, u = src.next2Slow()
			p = src.pos
		}
		j, sq := t.block(u0)
		k, mm := propose(j, u)
		if uint32(u>>32) >= sq {
			src.pos = p
			if !t.accept(j, mm, u>>8, src) {
				k = t.sample(src)
			}
			p = src.pos
		}
		dst[i] = F(x + float64(k)*g)
	}
	src.pos = p
}

// gaussTable validates sigma and returns the sampling table for s = sigma/g
// and the grid g.
func (n *Noise) gaussTable(sigma float64) (*gaussTable, float64) {
	if !(sigma >= MinSigma) || math.IsInf(sigma, 0) {
		panic(fmt.Sprintf("release: Gaussian noise scale must be finite and >= %g, got %v", MinSigma, sigma))
	}
	g := Grid(sigma)
	s := sigma / g
	if n.tab == nil || n.tab.s != s {
		n.tab = gaussTableFor(s)
	}
	return n.tab, g
}

var gaussCache = lru.New[float64, *gaussTable](maxGaussTables, nil)

// gaussTableFor returns the cached table for s, building it if needed.
func gaussTableFor(s float64) *gaussTable {
	// Built outside the lock; a concurrent duplicate is harmless.
	t, _ := gaussCache.GetOr(s, func() (*gaussTable, error) { return newGaussTable(s), nil })
	return t
}
