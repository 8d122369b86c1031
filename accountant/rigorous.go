package accountant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/dpsql/dpsql/accountant/pld"
)

// Rigorous accounting. GDP composition is exact for Gaussian and external
// entries only; once a subsampled Gaussian or a Laplace entry is present,
// budget decisions use the privacy loss distribution (PLD) accountant of
// package pld, whose every epsilon and delta is an upper bound.
//
// Entries are mapped as follows (replace_one entries as stated, see ReplaceOne):
//   - gaussian, external: mu = GDPMu() (sqrt(steps) included); all of them
//     merge exactly into one Gaussian of
//     mu = sqrt(sum mu_i^2), whose PLD is composed last (or, with no other
//     entries, converted exactly with Delta/Epsilon).
//   - laplace: Laplace noise with sensitivity/scale = Epsilon, composed Steps
//     times.
//   - truncated_laplace, optnoise: their exact PLDs (see noise_kinds.go).
//   - subsampled_gaussian: Poisson rate Q, noise multiplier Sigma, Steps
//     steps, both directions kept. Replace-one is refused: a replace-one
//     neighbour under Poisson sampling is not two composed add/remove steps
//     (group privacy is not composition), so composing twice would be unsound.

// rigorousConfig is the discretisation used for ledger accounting.
var rigorousConfig = pld.Config{}

// RigorousDelta returns an upper bound on delta(epsilon) for the composition
// of ms.
func RigorousDelta(ms []Mechanism, epsilon float64) (float64, error) {
	if !(epsilon >= 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("epsilon must be a finite number >= 0, got %v", epsilon)
	}
	c, err := rigComposeAll(ms)
	if err != nil {
		return 0, err
	}
	return c.delta(epsilon)
}

// RigorousEpsilon returns an upper bound on the smallest epsilon such that the
// composition of ms is (epsilon, delta)-DP (+Inf if no finite epsilon can be
// certified at this delta).
func RigorousEpsilon(ms []Mechanism, delta float64) (float64, error) {
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	c, err := rigComposeAll(ms)
	if err != nil {
		return 0, err
	}
	return c.epsilon(delta)
}

// CalibrateSubsampledSigma returns the smallest noise multiplier (to a
// relative 1e-4) for which steps Poisson-subsampled Gaussian steps at rate q
// are (epsilon, delta)-DP by the rigorous accountant.
func CalibrateSubsampledSigma(q float64, steps int, epsilon, delta float64) (float64, error) {
	return rigorousConfig.CalibrateSubsampledGaussian(q, steps, epsilon, delta)
}

// rigComposition is a composed scope: the exactly-Gaussian part as sum mu_i^2,
// and the rest as a PLD (nil if there is none).
type rigComposition struct {
	count int64
	muSq  float64
	pld   *pld.PLD
}

func (c *rigComposition) addGaussian(mu float64) {
	// Round the running sum up: it must never fall below the true sum.
	c.muSq = (c.muSq + mu*mu) * (1 + 4*rigULP)
}

const rigULP = 1.0 / (1 << 53)

// full returns the PLD of the whole composition (nil if it is exactly
// Gaussian) and the merged mu.
func (c *rigComposition) full() (*pld.PLD, float64, error) {
	mu := math.Sqrt(c.muSq) * (1 + 2*rigULP)
	if c.pld == nil || mu == 0 {
		return c.pld, mu, nil
	}
	g, err := rigGaussianPLD(mu)
	if err != nil {
		return nil, 0, err
	}
	p, err := c.pld.Compose(g)
	return p, mu, err
}

func (c *rigComposition) delta(eps float64) (float64, error) {
	p, mu, err := c.full()
	if err != nil {
		return 0, err
	}
	if p != nil {
		return p.Delta(eps)
	}
	if mu == 0 {
		return 0, nil
	}
	return Delta(mu, eps)
}

func (c *rigComposition) epsilon(delta float64) (float64, error) {
	p, mu, err := c.full()
	if err != nil {
		return 0, err
	}
	if p != nil {
		return p.Epsilon(delta)
	}
	if mu == 0 {
		return 0, nil
	}
	return Epsilon(mu, delta)
}

// rigMechanismPLD returns the PLD of a non-Gaussian entry (all its steps),
// from the memo when the same entry was seen recently.
func rigMechanismPLD(m Mechanism) (*pld.PLD, error) {
	k := rigMemoKey{kind: m.Kind, q: m.Q, sigma: m.Sigma, eps: m.Epsilon, steps: int(m.steps()), extra: m.noiseKey()}
	return rigMemo.get(k, func() (*pld.PLD, error) {
		var p *pld.PLD
		var err error
		switch m.Kind {
		case KindLaplace:
			p, err = rigorousConfig.Laplace(k.eps, 1)
		case KindSubsampledGaussian:
			p, err = rigorousConfig.SubsampledGaussian(m.Q, m.Sigma)
		case KindTruncatedLaplace, KindOptNoise:
			p, err = m.noisePLD(rigorousConfig)
		default:
			return nil, fmt.Errorf("%s: no PLD for this kind", m.Kind)
		}
		if err != nil {
			return nil, err
		}
		if k.steps > 1 {
			return p.SelfCompose(k.steps)
		}
		return p, nil
	})
}

// rigGaussianPLD returns the PLD of a mu-GDP Gaussian, memoised.
func rigGaussianPLD(mu float64) (*pld.PLD, error) {
	return rigMemo.get(rigMemoKey{kind: KindGaussian, mu: mu}, func() (*pld.PLD, error) {
		return rigorousConfig.GaussianMu(mu)
	})
}

// rigMemoKey identifies a built PLD; PLDs are immutable, so they can be shared.
type rigMemoKey struct {
	kind          string
	q, sigma, eps float64
	mu            float64
	steps         int
	extra         string // noise families: see Mechanism.noiseKey
}

// rigPLDMemo keeps the most recently built PLDs (a ledger repeats its entries:
// the same training step, the same query shape), up to a total bin count.
type rigPLDMemo struct {
	mu    sync.Mutex
	m     map[rigMemoKey]*pld.PLD
	order []rigMemoKey
	bins  int
}

const rigMemoMaxBins = 1 << 23 // 64 MiB of float64

var rigMemo = &rigPLDMemo{m: map[rigMemoKey]*pld.PLD{}}

func (c *rigPLDMemo) get(k rigMemoKey, build func() (*pld.PLD, error)) (*pld.PLD, error) {
	c.mu.Lock()
	if p, ok := c.m[k]; ok {
		// Least recently used goes first: move k to the back.
		if i := slices.Index(c.order, k); i >= 0 {
			c.order = append(append(c.order[:i:i], c.order[i+1:]...), k)
		}
		c.mu.Unlock()
		return p, nil
	}
	c.mu.Unlock()
	p, err := build()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && p.Bins() <= rigMemoMaxBins/4 {
		c.m[k] = p
		c.order = append(c.order, k)
		c.bins += p.Bins()
		for c.bins > rigMemoMaxBins && len(c.order) > 1 {
			old := c.order[0]
			c.order = c.order[1:]
			c.bins -= c.m[old].Bins()
			delete(c.m, old)
		}
	}
	return p, nil
}

// rigComposeAll validates ms, merges the Gaussian entries, groups identical
// non-Gaussian entries (summing their steps) and composes the groups.
func rigComposeAll(ms []Mechanism) (*rigComposition, error) {
	c := &rigComposition{}
	type key struct {
		kind     string
		q, sigma float64
		eps      float64
		extra    string // noise families: see Mechanism.noiseKey
	}
	groups := map[key]int{}
	reps := map[key]Mechanism{}
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		c.count++
		if m.IsGaussian() {
			c.addGaussian(m.GDPMu())
			continue
		}
		k := key{kind: m.Kind, q: m.Q, sigma: m.Sigma, eps: m.Epsilon, extra: m.noiseKey()}
		groups[k] += int(m.steps())
		reps[k] = m
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { // deterministic order
		a, b := keys[i], keys[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.q != b.q {
			return a.q < b.q
		}
		if a.sigma != b.sigma {
			return a.sigma < b.sigma
		}
		if a.eps != b.eps {
			return a.eps < b.eps
		}
		return a.extra < b.extra
	})
	for _, k := range keys {
		m := reps[k]
		m.Steps = groups[k]
		p, err := rigMechanismPLD(m)
		if err != nil {
			return nil, err
		}
		if c.pld == nil {
			c.pld = p
		} else if c.pld, err = c.pld.Compose(p); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ---- cached compositions ----
//
// A ledger scope can keep its composition in the database and extend it one
// entry at a time instead of re-accounting its whole history:
//
//	cache, err := accountant.ComposeInto(cache, m) // cache == nil: empty scope
//	eps, err := accountant.CachedEpsilon(cache, delta)
//
// The cache is a BLOB: the magic "dpRC\x01", the entry count (uint64), the
// rounded-up sum of squared mu of exactly-Gaussian entries not yet folded
// into the PLD (float64), a flag byte, and, if the flag is 1, a PLD
// (pld.PLD.MarshalBinary). Everything is little-endian.
//
// While a scope holds only Gaussian and external entries, the cache keeps
// their sum of mu^2 and every figure is the exact GDP conversion. The first
// other entry starts the PLD; the merged Gaussian is then convolved into it,
// and so is every later Gaussian entry as it comes, so that reading epsilon
// or delta from a cache is one sweep over the PLD, never a convolution. Each
// extension is one convolution (PLDs of repeated entries are memoised). The
// figures are upper bounds like those of RigorousDelta/RigorousEpsilon on
// the same entries, and agree with them to the discretisation error
// (composition order and the Gaussian merge differ).

const rigCacheMagic = "dpRC\x01"

// ComposeInto returns the cache of the composition of cached (nil or empty:
// nothing yet) with m.
func ComposeInto(cached []byte, m Mechanism) ([]byte, error) {
	c, err := decodeRigCache(cached)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c.count++
	var p *pld.PLD
	switch {
	case m.IsGaussian() && c.pld == nil:
		c.addGaussian(m.GDPMu()) // still exactly Gaussian: stay exact
		return c.encode()
	case m.IsGaussian():
		p, err = rigGaussianPLD(m.GDPMu())
	default:
		p, err = rigMechanismPLD(m)
	}
	if err != nil {
		return nil, err
	}
	if c.pld == nil {
		c.pld = p
	} else if c.pld, err = c.pld.Compose(p); err != nil {
		return nil, err
	}
	// Fold the Gaussian part into the PLD, so that a query needs no
	// convolution.
	if c.muSq > 0 {
		full, _, err := c.full()
		if err != nil {
			return nil, err
		}
		c.pld, c.muSq = full, 0
	}
	return c.encode()
}

// CachedDelta returns the rigorous delta(epsilon) of a cached composition.
func CachedDelta(cached []byte, epsilon float64) (float64, error) {
	if !(epsilon >= 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("epsilon must be a finite number >= 0, got %v", epsilon)
	}
	c, err := decodeRigCache(cached)
	if err != nil {
		return 0, err
	}
	return c.delta(epsilon)
}

// CachedEpsilon returns the rigorous epsilon at delta of a cached composition.
func CachedEpsilon(cached []byte, delta float64) (float64, error) {
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	c, err := decodeRigCache(cached)
	if err != nil {
		return 0, err
	}
	return c.epsilon(delta)
}

// CachedCount returns the number of entries composed into a cache.
func CachedCount(cached []byte) (int64, error) {
	c, err := decodeRigCache(cached)
	if err != nil {
		return 0, err
	}
	return c.count, nil
}

func (c *rigComposition) encode() ([]byte, error) {
	b := make([]byte, 0, len(rigCacheMagic)+17)
	b = append(b, rigCacheMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.count))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.muSq))
	if c.pld == nil {
		return append(b, 0), nil
	}
	p, err := c.pld.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b = append(b, 1)
	return append(b, p...), nil
}

func decodeRigCache(data []byte) (*rigComposition, error) {
	c := &rigComposition{}
	if len(data) == 0 {
		return c, nil
	}
	if len(data) < len(rigCacheMagic)+17 || string(data[:len(rigCacheMagic)]) != rigCacheMagic {
		return nil, errors.New("invalid rigorous accounting cache: bad header")
	}
	r := data[len(rigCacheMagic):]
	c.count = int64(binary.LittleEndian.Uint64(r))
	c.muSq = math.Float64frombits(binary.LittleEndian.Uint64(r[8:]))
	flag := r[16]
	r = r[17:]
	if c.count < 0 || !(c.muSq >= 0) || math.IsInf(c.muSq, 1) {
		return nil, errors.New("invalid rigorous accounting cache: bad counters")
	}
	switch flag {
	case 0:
		if len(r) != 0 {
			return nil, errors.New("invalid rigorous accounting cache: trailing bytes")
		}
	case 1:
		c.pld = new(pld.PLD)
		if err := c.pld.UnmarshalBinary(r); err != nil {
			return nil, fmt.Errorf("invalid rigorous accounting cache: %w", err)
		}
	default:
		return nil, errors.New("invalid rigorous accounting cache: bad flag")
	}
	return c, nil
}
