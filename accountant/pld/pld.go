package pld

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Defaults of Config.
const (
	DefaultInterval = 1.0 / 8192 // loss grid spacing, in nats (2^-13, about 1.22e-4)
	DefaultTail     = 1e-15      // mass one truncation may move to +infinity
	DefaultMaxBins  = 1 << 22    // bins per direction before the grid is coarsened
)

// Config sets the discretisation. The zero value uses the defaults.
type Config struct {
	// Interval is the spacing h of the loss grid, rounded down to a power of
	// two so that every grid point k h is exact in floating point (the
	// construction divides differences of delta at neighbouring points by
	// e^h - 1, which would amplify rounded abscissae). Connect-the-dots keeps
	// the error second order in h: 2^-10 already gives epsilon to four
	// digits after thousands of compositions. If a mechanism's loss range
	// needs more than MaxBins bins, the interval is doubled until it fits.
	Interval float64
	// Tail is the mass a single truncation may move to +infinity (it then
	// counts fully in every delta). It also bounds the mass merged upwards
	// from the lower tail.
	Tail float64
	// MaxBins caps the bins per direction.
	MaxBins int
}

func (c Config) withDefaults() (Config, error) {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Tail == 0 {
		c.Tail = DefaultTail
	}
	if c.MaxBins == 0 {
		c.MaxBins = DefaultMaxBins
	}
	if !(c.Interval >= 0x1p-40 && c.Interval <= 1) {
		return c, fmt.Errorf("pld: interval must lie in [2^-40, 1], got %v", c.Interval)
	}
	_, exp := math.Frexp(c.Interval) // Interval = frac 2^exp, frac in [1/2, 1)
	c.Interval = math.Ldexp(1, exp-1)
	if !(c.Tail > 0 && c.Tail < 1e-6) {
		return c, fmt.Errorf("pld: tail must lie in (0, 1e-6), got %v", c.Tail)
	}
	if c.MaxBins < 16 {
		return c, fmt.Errorf("pld: max bins must be at least 16, got %d", c.MaxBins)
	}
	return c, nil
}

// PLD is the privacy loss distribution of a mechanism (or of a composition of
// mechanisms) under add/remove neighbours, in both directions: remove compares
// M(D) with M(D') for D' = D minus one row, add compares M(D') with M(D). Each
// direction is a pessimistic discrete measure on the loss grid {k h} plus mass
// at +infinity (infinite losses, truncated tails and the round-off bound), so
// that every delta and epsilon read from it is an upper bound. A PLD is
// immutable; operations return new values.
type PLD struct {
	h       float64
	tail    float64
	maxBins int
	rem     *pmf
	add     *pmf // nil: symmetric, same as rem
}

// Point is one point of a trade-off curve: a test of type I error Alpha
// cannot have type II error below Beta.
type Point struct{ Alpha, Beta float64 }

func (c Config) fromMechanism(m mechanism) (*PLD, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	h := c.Interval
	for {
		p, err := c.tryBuild(m, h)
		var wide errTooWide
		if errors.As(err, &wide) && h < 1 {
			h *= 2
			continue
		}
		return p, err
	}
}

func (c Config) tryBuild(m mechanism, h float64) (*PLD, error) {
	p := &PLD{h: h, tail: c.Tail, maxBins: c.MaxBins}
	addC := m.add
	if addC == nil {
		addC = m.rem
	}
	var err error
	if p.rem, err = build(m.rem, addC, h, c.Tail, c.MaxBins); err != nil {
		return nil, err
	}
	if m.add != nil {
		if p.add, err = build(m.add, m.rem, h, c.Tail, c.MaxBins); err != nil {
			return nil, err
		}
	}
	return p, p.trim()
}

func finitePos(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// Gaussian returns the PLD of Gaussian noise of standard deviation sigma on a
// query of L2 sensitivity s (mu = s/sigma).
func (c Config) Gaussian(sensitivity, sigma float64) (*PLD, error) {
	if !finitePos(sensitivity) || !finitePos(sigma) {
		return nil, fmt.Errorf("pld: gaussian needs positive finite sensitivity and sigma, got %v, %v", sensitivity, sigma)
	}
	return c.GaussianMu(sensitivity / sigma)
}

// GaussianMu returns the PLD of a mu-GDP Gaussian mechanism.
func (c Config) GaussianMu(mu float64) (*PLD, error) {
	if !finitePos(mu) {
		return nil, fmt.Errorf("pld: mu must be positive and finite, got %v", mu)
	}
	return c.fromMechanism(mechanism{rem: gaussCurve{mu}})
}

// SubsampledGaussian returns the PLD of one step of the Poisson-subsampled
// Gaussian mechanism: each row enters the batch independently with
// probability q, and Gaussian noise of sigma times the (L2) sensitivity is
// added. Both directions are kept; they differ for q < 1.
func (c Config) SubsampledGaussian(q, sigma float64) (*PLD, error) {
	if !(q > 0 && q <= 1) {
		return nil, fmt.Errorf("pld: sampling rate q must lie in (0, 1], got %v", q)
	}
	if !finitePos(sigma) {
		return nil, fmt.Errorf("pld: noise multiplier sigma must be positive and finite, got %v", sigma)
	}
	if q == 1 {
		return c.GaussianMu(1 / sigma)
	}
	return c.fromMechanism(mechanism{rem: subRemove{q, sigma}, add: subAdd{q, sigma}})
}

// Laplace returns the PLD of Laplace noise of scale b on a query of L1
// sensitivity s; it is (s/b, 0)-DP.
func (c Config) Laplace(sensitivity, scale float64) (*PLD, error) {
	if !finitePos(sensitivity) || !finitePos(scale) {
		return nil, fmt.Errorf("pld: laplace needs positive finite sensitivity and scale, got %v, %v", sensitivity, scale)
	}
	e0 := sensitivity / scale
	if !finitePos(e0) {
		return nil, fmt.Errorf("pld: laplace sensitivity/scale is not finite")
	}
	return c.fromMechanism(mechanism{rem: laplaceCurve{e0}})
}

// Discrete returns the PLD of an additive noise mechanism on an integer grid:
// probs[i] is the probability of noise value i (plus any offset), and the
// query moves by at most sensitivity grid steps. probs is normalised to sum
// 1; values must be finite and non-negative. Shifts where one distribution
// has mass and the other none give infinite losses.
func (c Config) Discrete(probs []float64, sensitivity int) (*PLD, error) {
	if len(probs) == 0 {
		return nil, errors.New("pld: discrete noise needs at least one probability")
	}
	if sensitivity < 1 {
		return nil, fmt.Errorf("pld: discrete sensitivity must be >= 1 grid step, got %d", sensitivity)
	}
	var sum float64
	for i, v := range probs {
		if !(v >= 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("pld: probability %d is %v", i, v)
		}
		sum += v
	}
	if !(sum > 0) {
		return nil, errors.New("pld: probabilities sum to 0")
	}
	n := len(probs) + sensitivity
	pm := make([]float64, n) // P(o) = p(o - s)
	qm := make([]float64, n) // Q(o) = p(o)
	for i, v := range probs {
		pm[i+sensitivity] = v / sum
		qm[i] = v / sum
	}
	return c.fromMechanism(mechanism{rem: newAtomCurve(pm, qm), add: newAtomCurve(qm, pm)})
}

// Package-level constructors with the default Config.

// Gaussian is Config{}.Gaussian.
func Gaussian(sensitivity, sigma float64) (*PLD, error) {
	return Config{}.Gaussian(sensitivity, sigma)
}

// GaussianMu is Config{}.GaussianMu.
func GaussianMu(mu float64) (*PLD, error) { return Config{}.GaussianMu(mu) }

// SubsampledGaussian is Config{}.SubsampledGaussian.
func SubsampledGaussian(q, sigma float64) (*PLD, error) {
	return Config{}.SubsampledGaussian(q, sigma)
}

// Laplace is Config{}.Laplace.
func Laplace(sensitivity, scale float64) (*PLD, error) {
	return Config{}.Laplace(sensitivity, scale)
}

// Discrete is Config{}.Discrete.
func Discrete(probs []float64, sensitivity int) (*PLD, error) {
	return Config{}.Discrete(probs, sensitivity)
}

// Interval returns the grid spacing h of the loss values.
func (p *PLD) Interval() float64 { return p.h }

// Bins returns the number of grid bins held (both directions).
func (p *PLD) Bins() int {
	if !p.ok() {
		return 0
	}
	n := len(p.rem.p)
	if p.add != nil {
		n += len(p.add.p)
	}
	return n
}

// InfMass returns the larger direction's mass at +infinity: infinite losses
// plus truncated tails. No epsilon exists for a delta below it.
func (p *PLD) InfMass() float64 {
	if !p.ok() {
		return 1
	}
	v := p.rem.inf
	if p.add != nil {
		v = math.Max(v, p.add.inf)
	}
	return v
}

// RoundoffBound returns the larger direction's bound on accumulated
// floating-point error, already included in every delta reported.
func (p *PLD) RoundoffBound() float64 {
	if !p.ok() {
		return 1
	}
	v := p.rem.err
	if p.add != nil {
		v = math.Max(v, p.add.err)
	}
	return v
}

func (p *PLD) dirs() []*pmf {
	if p.add == nil {
		return []*pmf{p.rem}
	}
	return []*pmf{p.rem, p.add}
}

func (p *PLD) addOrRem() *pmf {
	if p.add != nil {
		return p.add
	}
	return p.rem
}

// align returns copies of p and o on a common grid, moving the finer one to
// the coarser grid by connect the dots when the intervals differ by a power
// of two.
func align(p, o *PLD) (*PLD, *PLD, error) {
	if p.h == o.h {
		return p, o, nil
	}
	fine, coarse := p, o
	if p.h > o.h {
		fine, coarse = o, p
	}
	r := coarse.h / fine.h
	k := int(math.Round(r))
	if k < 2 || math.Abs(r-float64(k)) > 1e-9*r || k&(k-1) != 0 {
		return nil, nil, fmt.Errorf("pld: cannot compose PLDs with intervals %g and %g", p.h, o.h)
	}
	c := fine.coarsened(k)
	c.h = coarse.h
	if fine == p {
		return c, o, nil
	}
	return p, c, nil
}

// coarsened returns p on the grid k times coarser (k a power of two), by
// connect the dots from p's own curve (pmf.recoarsen): a dominating measure
// whose error is second order in the new spacing.
func (p *PLD) coarsened(k int) *PLD {
	c := *p
	c.rem = p.rem.recoarsen(p.h, k)
	if p.add != nil {
		c.add = p.add.recoarsen(p.h, k)
	}
	c.h = p.h * float64(k)
	return &c
}

// fit moves p (in place) to the finest coarser grid on which it fits in
// maxBins bins per direction (see fitCTD).
func (p *PLD) fit() { p.fitCTD(p.maxBins) }

var errZero = errors.New("pld: PLD not built (use a constructor or UnmarshalBinary)")

func (p *PLD) ok() bool { return p != nil && p.rem != nil }

// Compose returns the PLD of running both mechanisms (on independent noise).
func (p *PLD) Compose(o *PLD) (*PLD, error) {
	if !p.ok() || !o.ok() {
		return nil, errZero
	}
	a, b, err := align(p, o)
	if err != nil {
		return nil, err
	}
	out := &PLD{h: a.h, tail: math.Max(a.tail, b.tail), maxBins: max(a.maxBins, b.maxBins)}
	if a.add == nil && b.add == nil {
		out.rem, _ = conv(a.rem, b.rem, nil, nil)
	} else {
		out.rem, out.add = conv(a.rem, b.rem, a.addOrRem(), b.addOrRem())
	}
	if err := out.trim(); err != nil {
		return nil, err
	}
	out.fit()
	return out, nil
}

func (p *PLD) trim() error {
	for _, d := range p.dirs() {
		if err := d.clampTrim(p.tail); err != nil {
			return err
		}
	}
	return nil
}

// SelfCompose returns the PLD of k independent runs of the mechanism. When
// few small convolutions suffice, they are direct (binary powering, round-off
// relative to each bin: see Accumulate), so that an entry composed thousands
// of times carries no absolute round-off bound of its own; otherwise one FFT
// powers the spectrum. If the k-fold loss range does not fit in MaxBins
// bins, the grid is coarsened by powers of two first (by connect the dots).
func (p *PLD) SelfCompose(k int) (*PLD, error) {
	if !p.ok() {
		return nil, errZero
	}
	if k < 1 {
		return nil, fmt.Errorf("pld: self-composition count must be >= 1, got %d", k)
	}
	if k > 1 {
		if d := p.selfComposeDirect(k); d != nil && d.Bins() <= d.maxBins {
			return d, nil
		}
	}
	for {
		out := &PLD{h: p.h, tail: p.tail, maxBins: p.maxBins}
		var err error
		out.rem, out.add, err = power(p.rem, p.add, k, p.h, p.tail, p.maxBins)
		var wide errTooWide
		if errors.As(err, &wide) && p.h < 1 {
			p = p.coarsened(2)
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := out.trim(); err != nil {
			return nil, err
		}
		out.fit()
		return out, nil
	}
}

// Delta returns an upper bound on the smallest delta such that the mechanism
// is (epsilon, delta)-DP: the larger of the two directions' hockey-stick
// divergences of the pessimistic discretisation, plus mass at +infinity and
// the round-off bound.
func (p *PLD) Delta(epsilon float64) (float64, error) {
	if !p.ok() {
		return 0, errZero
	}
	if !(epsilon >= 0) {
		return 0, fmt.Errorf("pld: epsilon must be >= 0, got %v", epsilon)
	}
	var d float64
	for _, x := range p.dirs() {
		d = math.Max(d, x.delta(p.h, epsilon))
	}
	return math.Min(d, 1), nil
}

// Epsilon returns an upper bound on the smallest epsilon >= 0 such that the
// mechanism is (epsilon, delta)-DP, or +Inf when the mass at +infinity
// reaches delta. It fails with ErrRoundoff when the round-off bound exceeds
// delta/10: the figure would then rest on floating-point luck.
func (p *PLD) Epsilon(delta float64) (float64, error) {
	if !p.ok() {
		return 0, errZero
	}
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("pld: delta must lie strictly between 0 and 1, got %v", delta)
	}
	if r := p.RoundoffBound(); r > delta/10 {
		return 0, fmt.Errorf("%w (bound %.3g, delta %.3g)", ErrRoundoff, r, delta)
	}
	var e float64
	for _, x := range p.dirs() {
		e = math.Max(e, x.epsilon(p.h, delta))
	}
	return e, nil
}

// TradeOff returns n >= 2 points (alpha evenly spaced in [0, 1]) of a lower
// bound on the mechanism's trade-off curve (type II error beta against type
// I error alpha, for telling D from D' in either direction):
// beta(alpha) >= max over eps >= 0 of 1 - delta(eps) - e^eps alpha and
// e^-eps (1 - delta(eps) - alpha) (Dong, Roth, Su 2019, Prop. 2.12), using
// this PLD's upper bounds on delta at up to 4096 grid points.
func (p *PLD) TradeOff(n int) ([]Point, error) {
	if !p.ok() {
		return nil, errZero
	}
	if n < 2 {
		return nil, fmt.Errorf("pld: trade-off curve needs at least 2 points, got %d", n)
	}
	kmax := 0
	for _, x := range p.dirs() {
		kmax = max(kmax, x.lo+len(x.p))
	}
	stride := max(1, (kmax+1)/4096)
	var ks []int
	for k := 0; k <= kmax; k += stride {
		ks = append(ks, k)
	}
	ks = append(ks, kmax+1)
	ds := make([]float64, len(ks))
	for _, x := range p.dirs() {
		g := x.deltaGrid(p.h, ks)
		for i := range ds {
			ds[i] = math.Max(ds[i], g[i])
		}
	}
	pts := make([]Point, n)
	for i := range pts {
		a := float64(i) / float64(n-1)
		var b float64
		for j, k := range ks {
			e := float64(k) * p.h
			d := math.Min(ds[j], 1)
			b = math.Max(b, math.Max(1-d-math.Exp(e)*a, math.Exp(-e)*(1-d-a)))
		}
		pts[i] = Point{a, b}
	}
	return pts, nil
}

// deltaGrid returns delta at the grid points ks (ascending, >= 0).
func (a *pmf) deltaGrid(h float64, ks []int) []float64 {
	out := make([]float64, len(ks))
	c := a.inf + a.err
	em := -math.Expm1(-h)
	eh := math.Exp(-h)
	xmax := math.Max(math.Abs(float64(a.lo)*h), math.Abs(float64(a.lo+len(a.p))*h))
	slack := 1 + (float64(2*len(a.p)+16)+8*xmax)*unitRoundoff
	var d, g float64
	i := len(ks) - 1
	for k := a.lo + len(a.p) - 1; ; k-- {
		// d, g describe grid point k (masses strictly above k).
		for i >= 0 && ks[i] >= k {
			if ks[i] == k {
				out[i] = c + d*slack
			} else { // above the support
				out[i] = c
			}
			i--
		}
		if i < 0 {
			return out
		}
		if k <= a.lo-1 {
			// Below the support: d + g - e^(x - x_k) g for x <= x_k.
			for ; i >= 0; i-- {
				r := math.Exp(float64(ks[i]-k) * h)
				out[i] = c + (d+g*(1-r))*slack
			}
			return out
		}
		pk := a.p[k-a.lo]
		d += em * (g + pk)
		g = eh * (g + pk)
	}
}

// ---- serialisation ----

const magic = "dpPLD\x01"

// MarshalBinary encodes the PLD (little-endian): magic, interval, tail,
// max bins, a direction count, then per direction lo, inf, err, n and n
// float64 masses.
func (p *PLD) MarshalBinary() ([]byte, error) {
	if !p.ok() {
		return nil, errZero
	}
	n := 0
	for _, d := range p.dirs() {
		n += 32 + 8*len(d.p)
	}
	b := make([]byte, 0, len(magic)+25+n)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.h))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.tail))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.maxBins))
	b = append(b, byte(len(p.dirs())))
	for _, d := range p.dirs() {
		b = binary.LittleEndian.AppendUint64(b, uint64(int64(d.lo)))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.inf))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.err))
		b = binary.LittleEndian.AppendUint64(b, uint64(len(d.p)))
		for _, v := range d.p {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b, nil
}

// massOK reports whether an encoded mass is finite and non-negative.
func massOK(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// UnmarshalBinary decodes what MarshalBinary wrote, checking every field.
func (p *PLD) UnmarshalBinary(data []byte) error {
	bad := func(what string) error { return fmt.Errorf("pld: invalid encoding: %s", what) }
	if len(data) < len(magic)+25 || string(data[:len(magic)]) != magic {
		return bad("missing header")
	}
	r := data[len(magic):]
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(r); r = r[8:]; return v }
	f64 := func() float64 { return math.Float64frombits(u64()) }
	var q PLD
	q.h = f64()
	q.tail = f64()
	mb := u64()
	if fr, _ := math.Frexp(q.h); fr != 0.5 || !(q.h >= 0x1p-40 && q.h <= 1) || !(q.tail > 0 && q.tail < 1e-6) || mb < 16 || mb > 1<<30 {
		return bad("parameters out of range")
	}
	q.maxBins = int(mb)
	nd := int(r[0])
	r = r[1:]
	if nd != 1 && nd != 2 {
		return bad("direction count")
	}
	for i := 0; i < nd; i++ {
		if len(r) < 32 {
			return bad("truncated")
		}
		d := &pmf{}
		lo := int64(u64())
		if lo < -1<<40 || lo > 1<<40 {
			return bad("offset out of range")
		}
		d.lo = int(lo)
		d.inf, d.err = f64(), f64()
		n := u64()
		// Masses are upper bounds, finite and non-negative: a build's error
		// margins (amplified by 1/(e^h - 1)) can raise a bin above 1 and a
		// composition's total far above it (a subsampled Gaussian of sigma
		// 2.4e7 has a bin of 2.06; review23), and the encoding must decode
		// whatever was computed: larger masses only overstate delta.
		if !massOK(d.inf) || !massOK(d.err) {
			return bad("tail masses out of range")
		}
		if n < 1 || n > uint64(len(r))/8 || n > uint64(q.maxBins) {
			return bad("bin count")
		}
		d.p = make([]float64, n)
		for k := range d.p {
			v := f64()
			if !massOK(v) {
				return bad("mass out of range")
			}
			d.p[k] = v
		}
		if i == 0 {
			q.rem = d
		} else {
			q.add = d
		}
	}
	if len(r) != 0 {
		return bad("trailing bytes")
	}
	*p = q
	return nil
}

// SubsampledGaussianReplaceOne is Config{}.SubsampledGaussianReplaceOne.
func SubsampledGaussianReplaceOne(q, sigma float64) (*PLD, error) {
	return Config{}.SubsampledGaussianReplaceOne(q, sigma)
}
