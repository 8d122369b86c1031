package release

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	mrand "math/rand/v2"
	"sync"
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
// argument assumes (see AddGaussian). A release of c noisy coordinates with an
// (epsilon, delta) guarantee is (epsilon, delta + (1 + e^epsilon) c NoiseTV)-DP.
const NoiseTV = 0x1p-46

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
type Noise struct {
	src *mrand.ChaCha8
	r   *mrand.Rand
	tab *gaussTable // last Gaussian table used, saves the cache lookup
}

func newNoise(seed [32]byte) *Noise {
	src := mrand.NewChaCha8(seed)
	return &Noise{src: src, r: mrand.New(src)}
}

// NewNoise returns a Noise whose ChaCha8 stream is seeded from crypto/rand.
func NewNoise() *Noise {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("release: crypto/rand failed: " + err.Error()) // crypto/rand.Read never fails on supported platforms
	}
	return newNoise(seed)
}

// Split returns an independent Noise seeded from this one's stream, for another goroutine.
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
// Only the Noise's ChaCha8 stream is used. k is encoded as (sign, m) with
// k = m for sign 0 and k = -m-1 for sign 1. The magnitudes m < J*128 form J
// blocks of 128, with J*128 >= 13s + 1/2. Block j (both signs) has mass
// Phi-differences over two intervals of length 128/s, computed by 4-point
// Gauss-Legendre on phi(a)*exp(-a*v - v^2/2) and quantized into an integer
// Walker/Vose alias table whose weights sum to exactly 2^63. A 64-bit word
// picks the column (top bits) and the coin (low bits). Inside the block a second word proposes m and the sign
// uniformly and accepts with probability P(m')/P(128j), m' = m + sign, from
// P(k) = phi(k/s)/s * (1 + k^2/(24 s^4) - 1/(24 s^2)) (relative error
// < 2^-55 for |k| <= 14s): a 32-bit squeeze settles all but ~0.3% of draws,
// the rest compare 56 bits against the float64 ratio. A rejection redraws
// inside the same block, so the block law is kept. Run time depends on the
// sample only through those rare redraws.
//
// Errors against P, in total variation per coordinate: the cut |k| >= J*128
// has mass < 2(1 - Phi(13)) < 2^-125. Block masses: the quadrature error is
// below 2^-60 relative and float64 rounding gives about (4 + a^2)*2^-53 at
// a = |k|/s, under 2^-49 once weighted by the mass (E a^2 = 1); rounding them
// to integer weights costs at most 9J units of 2^-63, under 2^-47 (blocks
// lighter than 2^-64, beyond about 9.3s, become unreachable; that is inside
// this term). Within a block the acceptance ratios are exact to 2^-51
// relative, so the conditional law is within 2^-50. Altogether
// TV(sampled, P) < 2^-46 per coordinate; TestNoiseTableLaw computes the
// sampled law exactly from the tables and measures about 2^-52. With
// eta = dim*2^-46 the release is (eps, delta(eps) + (1 + e^eps)*eta)-DP for
// every (eps, delta(eps)) that mu-GDP gives.
//
// Tables depend only on s. One takes 24 bytes per alias column, a power of
// two >= J (96 or 192 KiB), builds in under a millisecond, and is cached
// (at most 64 tables, shared by all goroutines).
func (n *Noise) AddGaussian(dst []float64, sigma float64) {
	t, g := n.gaussTable(sigma)
	invg, lim := 1/g, 0x1p52*g
	src := n.src
	for i, x := range dst {
		if math.Abs(x) < lim { // NaN and ±Inf pass through unchanged
			x = math.RoundToEven(x*invg) * g
		}
		dst[i] = x + float64(t.sample(src))*g
	}
}

// AddGaussian32 is [Noise.AddGaussian] for float32 vectors. The sum is formed
// exactly in float64 on the grid and then rounded to float32, which is
// post-processing.
func (n *Noise) AddGaussian32(dst []float32, sigma float64) {
	t, g := n.gaussTable(sigma)
	invg, lim := 1/g, 0x1p52*g
	src := n.src
	for i, x32 := range dst {
		x := float64(x32)
		if math.Abs(x) < lim {
			x = math.RoundToEven(x*invg) * g
		}
		dst[i] = float32(x + float64(t.sample(src))*g)
	}
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

const (
	gaussBlockBits = 7
	gaussBlock     = 1 << gaussBlockBits // magnitudes per block
	gaussCut       = 13                  // the table covers |k| <= gaussCut*s at least
	maxGaussTables = 64                  // cache bound, about 12 MiB at most
)

// gaussColumn is one column of the alias table over blocks.
type gaussColumn struct {
	thr   uint64    // keep this column's block iff coin < thr
	alias uint32    // the other block of the column
	sq    [2]uint32 // squeeze (top 32 bits of the acceptance threshold) of own and alias block
}

// gaussTable samples the rounded Gaussian of scale s (in grid units).
type gaussTable struct {
	s      float64
	shift  uint   // 64 - log2(len(cols)): column = u >> shift
	cmask  uint64 // coin = u & cmask; column capacity is cmask+1
	cols   []gaussColumn
	nblk   int     // J: blocks with index < nblk exist
	inv2s2 float64 // 1/(2 s^2)
	c0     float64 // 1 - 1/(24 s^2)
	c2     float64 // 1/(24 s^4)
}

// block maps a uniform word to a block index and its squeeze threshold.
func (t *gaussTable) block(u uint64) (uint32, uint32) {
	col := u >> t.shift
	c := &t.cols[col]
	if u&t.cmask < c.thr {
		return uint32(col), c.sq[0]
	}
	return c.alias, c.sq[1]
}

// try maps a uniform word to a proposal k in block j and reports whether it
// is accepted. Bits 0-6 give the magnitude in the block, bit 7 the sign, bits
// 8-63 the acceptance uniform (its top 32 bits for the squeeze).
func (t *gaussTable) try(j, sq uint32, u uint64) (int64, bool) {
	m := int64(j)<<gaussBlockBits | int64(u&(gaussBlock-1))
	neg := int64(u>>gaussBlockBits) & 1
	k := m ^ -neg // m, or -m-1
	return k, uint32(u>>32) < sq || u>>8 < t.accept56(j, m+neg)
}

// accept56 returns floor(2^56 * P(mm)/P(128j)) for mm in [128j, 128j+128],
// the acceptance threshold of the proposal whose P-argument is mm.
func (t *gaussTable) accept56(j uint32, mm int64) uint64 {
	m0 := int64(j) << gaussBlockBits
	d := float64((mm - m0) * (mm + m0))
	r := math.Exp(-d*t.inv2s2) * (t.c0 + float64(mm*mm)*t.c2) / (t.c0 + float64(m0*m0)*t.c2)
	return uint64(r * 0x1p56)
}

// sample draws one k.
func (t *gaussTable) sample(src *mrand.ChaCha8) int64 {
	j, sq := t.block(src.Uint64())
	for {
		if k, ok := t.try(j, sq, src.Uint64()); ok {
			return k
		}
	}
}

// phiInt returns the standard normal mass of [a, a+h] for 0 <= h <= 1/256,
// |a| <= 14, as phi(a) * integral_0^h exp(-a v - v^2/2) dv by 4-point
// Gauss-Legendre: the integrand is analytic with |a h| < 0.06, so the rule's
// error is below 2^-60 relative and float64 rounding dominates.
func phiInt(a, h float64) float64 {
	const (
		x1, w1 = 0.33998104358485626, 0.6521451548625461
		x2, w2 = 0.8611363115940526, 0.34785484513745385
	)
	f := func(x float64) float64 {
		v := h / 2 * (1 + x)
		return math.Exp(-v * (a + v/2))
	}
	sum := w2*(f(-x2)+f(x2)) + w1*(f(-x1)+f(x1))
	return math.Exp(-a*a/2) / math.Sqrt(2*math.Pi) * h / 2 * sum
}

// newGaussTable builds the table for scale s in [2^15, 2^16).
func newGaussTable(s float64) *gaussTable {
	nblk := int(math.Ceil((gaussCut*s + 0.5) / gaussBlock))
	logn := bits.Len(uint(nblk - 1))
	n := 1 << logn
	t := &gaussTable{
		s:      s,
		shift:  uint(64 - logn),
		cmask:  1<<(63-logn) - 1,
		cols:   make([]gaussColumn, n),
		nblk:   nblk,
		inv2s2: 1 / (2 * s * s),
		c0:     1 - 1/(24*s*s),
		c2:     1 / (24 * s * s * s * s),
	}
	// Block masses: magnitudes [128j, 128j+128) with sign 0 are k in
	// [128j, 128j+127]; with sign 1 they are k in [-128j-128, -128j-1].
	mass := make([]float64, nblk)
	h := gaussBlock / s
	var total, comp float64 // Neumaier sum
	for j := range mass {
		a := float64(j*gaussBlock) / s
		p := phiInt(a-0.5/s, h) + phiInt(a+0.5/s, h)
		mass[j] = p
		if x := total + p; math.Abs(total) >= p {
			comp += (total - x) + p
			total = x
		} else {
			comp += (p - x) + total
			total = x
		}
	}
	total += comp
	// Integer weights summing to exactly 2^63 = n * capacity.
	capa := t.cmask + 1
	w := make([]uint64, n)
	var sum uint64
	for j, p := range mass {
		w[j] = uint64(math.Round(p / total * 0x1p63))
		sum += w[j]
	}
	w[0] += 1<<63 - sum // a few units; block 0 is the heaviest
	// Vose's alias method in exact integer arithmetic.
	small := make([]uint32, 0, n)
	large := make([]uint32, 0, n)
	for i := n - 1; i >= 0; i-- {
		if w[i] < capa {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		sm := small[len(small)-1]
		small = small[:len(small)-1]
		lg := large[len(large)-1]
		t.cols[sm].thr, t.cols[sm].alias = w[sm], lg
		w[lg] -= capa - w[sm]
		if w[lg] < capa {
			large = large[:len(large)-1]
			small = append(small, lg)
		}
	}
	// The weights sum to n*capacity exactly, so what is left is full.
	for _, i := range append(small, large...) {
		if w[i] != capa {
			panic("release: alias table construction lost mass")
		}
		t.cols[i].thr, t.cols[i].alias = capa, i
	}
	// Squeezes: the acceptance threshold falls with mm, so its value at the
	// block's last argument, less 2^-32 for float rounding, bounds it below.
	sq := make([]uint32, nblk)
	for j := range sq {
		a := t.accept56(uint32(j), int64(j+1)*gaussBlock) >> 24
		if a > 0 {
			a--
		}
		sq[j] = uint32(a)
	}
	for i := range t.cols {
		c := &t.cols[i]
		if i < nblk {
			c.sq[0] = sq[i]
		}
		c.sq[1] = sq[c.alias]
	}
	return t
}

var gaussCache struct {
	sync.Mutex
	m map[float64]*gaussTable
}

// gaussTableFor returns the cached table for s, building it if needed.
func gaussTableFor(s float64) *gaussTable {
	gaussCache.Lock()
	t := gaussCache.m[s]
	gaussCache.Unlock()
	if t != nil {
		return t
	}
	t = newGaussTable(s) // outside the lock; a concurrent duplicate is harmless
	gaussCache.Lock()
	defer gaussCache.Unlock()
	if old := gaussCache.m[s]; old != nil {
		return old
	}
	if gaussCache.m == nil {
		gaussCache.m = make(map[float64]*gaussTable)
	}
	if len(gaussCache.m) >= maxGaussTables {
		for k := range gaussCache.m { // evict an arbitrary table
			delete(gaussCache.m, k)
			break
		}
	}
	gaussCache.m[s] = t
	return t
}
