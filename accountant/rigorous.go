package accountant

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/internal/lru"
	"github.com/dpsql/dpsql/mechanism"
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
//   - composite: each part as if it were its own entry (one ledger row, one
//     count).
//   - gaussian_inf: a mu-GDP Gaussian plus Delta mass at +infinity.
//   - truncated_laplace, optnoise: their exact PLDs (see noise_kinds.go).
//   - subsampled_gaussian: Poisson rate Q, noise multiplier Sigma, Steps
//     steps, both directions kept. Replace-one entries use the replace-one
//     pair (pld.SubsampledGaussianReplaceOne; why: neighbours.go).

// rigorousConfig is the discretisation used for ledger accounting.
var rigorousConfig = pld.Config{}

// RigorousDelta returns an upper bound on delta(epsilon) for the composition
// of ms.
func RigorousDelta(ms []mechanism.Mechanism, epsilon float64) (float64, error) {
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
func RigorousEpsilon(ms []mechanism.Mechanism, delta float64) (float64, error) {
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
//
// The search computed the PLD of the sigma it returns; it is memoised as the
// PLD of that subsampled Gaussian entry, so that pricing the entry next (its
// quote, its budget check) reads it instead of computing it again.
func CalibrateSubsampledSigma(q float64, steps int, epsilon, delta float64) (float64, error) {
	sigma, p, err := rigorousConfig.CalibrateSubsampledGaussianPLD(q, steps, epsilon, delta)
	if err != nil || p == nil || steps < 2 {
		return sigma, err
	}
	g := newRigGroup(mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: sigma, Steps: steps})
	rigMemo.Put(rigMemoKey{spec: g.key, steps: int(g.steps)}, p)
	return sigma, nil
}

// rigComposition is a composed scope: the exactly-Gaussian part as sum mu_i^2,
// and the rest as groups of identical entries (kind and parameters), each
// with its total number of steps. legacy holds the composed PLD of a cache
// written before groups were kept (format 1); such a cache has no groups.
type rigComposition struct {
	count  int64
	muSq   float64
	groups []rigGroup
	legacy *pld.PLD
}

// rigGroup is a set of identical non-Gaussian entries: its PLD is the
// single-step PLD self-composed steps times (one FFT, whose round-off does
// not grow with steps, see pld.SelfCompose). Entries are identical when
// their single-step descriptions have the same canonical JSON (key), so
// every kind and field, present or future, takes part in the grouping.
type rigGroup struct {
	key   string              // canonical JSON of m
	m     mechanism.Mechanism // one step (Steps 0)
	steps int64
}

func (g rigGroup) less(o rigGroup) bool { return g.key < o.key }

// newRigGroup returns the group of one non-Gaussian, non-composite entry.
func newRigGroup(m mechanism.Mechanism) rigGroup {
	one := m
	one.Steps = 1
	b, _ := json.Marshal(one)
	return rigGroup{key: string(b), m: one, steps: int64(m.StepsOrOne())}
}

// mechanism returns the group's mechanism composed steps times.
func (g rigGroup) mechanism() mechanism.Mechanism {
	m := g.m
	m.Steps = int(g.steps)
	return m
}

// rigMaxSteps bounds a group's total steps, far beyond any budget.
const rigMaxSteps = 1 << 40

// add records one validated entry (a composite's parts each in turn).
func (c *rigComposition) add(e mechanism.Mechanism) error {
	c.count++
	for _, m := range e.Components() {
		if m.IsGaussian() {
			c.addGaussian(m.GDPMu())
			continue
		}
		g := newRigGroup(m)
		i := sort.Search(len(c.groups), func(i int) bool { return !c.groups[i].less(g) })
		if i < len(c.groups) && !g.less(c.groups[i]) {
			c.groups[i].steps += g.steps
		} else {
			c.groups = slices.Insert(c.groups, i, g)
		}
		if c.groups[i].steps > rigMaxSteps {
			return fmt.Errorf("%s: more than %d steps of one kind in a scope", m.Kind, int64(rigMaxSteps))
		}
	}
	return nil
}

func (c *rigComposition) addGaussian(mu float64) {
	// Round the running sum up: it must never fall below the true sum.
	c.muSq = (c.muSq + mu*mu) * (1 + 4*rigULP)
}

const rigULP = 1.0 / (1 << 53)

// nonGaussian returns the PLD of the non-Gaussian part (nil if there is none):
// each group self-composed, then the groups convolved in their sorted order.
// The number of lossy operations is the number of distinct groups, however
// many entries were charged. The composition of every prefix of the groups
// is memoised, so a charge that changes the last groups (or only the
// Gaussian part) recomputes only what follows the change.
func (c *rigComposition) nonGaussian() (*pld.PLD, error) {
	if c.legacy != nil {
		return c.legacy, nil
	}
	prefix := func(i int) string { return "prefix:" + string(appendGroups(nil, c.groups[:i+1])) }
	var out *pld.PLD
	start := 0
	for i := len(c.groups) - 1; i >= 0; i-- {
		if p, _ := rigFull.Get(prefix(i)); p != nil {
			out, start = p, i+1
			break
		}
	}
	for i := start; i < len(c.groups); i++ {
		g := c.groups[i]
		p, err := rigMechanismPLD(g.mechanism())
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = p
		} else if out, err = out.Compose(p); err != nil {
			return nil, err
		}
		rigFull.Put(prefix(i), out)
	}
	return out, nil
}

// full returns the PLD of the whole composition (nil if it is exactly
// Gaussian) and the merged mu, with a round-off bound at most roundCap
// unless the grouped computation itself exceeds it. Results are memoised by
// content. When Composition.Add recorded this composition as a memoised one plus
// one entry, full extends that PLD by one convolution, as long as the
// round-off bound stays within roundCap; otherwise (and for every entry list)
// it composes the groups afresh, whose bound does not grow with the number of
// entries. Both are upper bounds on the same composition.
func (c *rigComposition) full(roundCap float64) (*pld.PLD, float64, error) {
	mu := math.Sqrt(c.muSq) * (1 + 2*rigULP)
	if c.legacy == nil && len(c.groups) == 0 {
		return nil, mu, nil
	}
	if c.legacy != nil {
		return c.composeGaussian(c.legacy, mu)
	}
	key := c.contentKey()
	if p, _ := rigFull.Get(key); p != nil && p.RoundoffBound() <= roundCap {
		return p, mu, nil
	}
	if st, ok := rigSteps.Get(key); ok {
		// Extend only when the predecessor leaves room for a convolution.
		if prev, _ := rigFull.Get(st.prev); prev != nil && prev.RoundoffBound() <= roundCap/2 {
			p := prev
			// A composite: each non-Gaussian part in turn, then its
			// Gaussian parts as one Gaussian of their merged mu (exact:
			// Gaussians compose to the Gaussian of sqrt(sum mu^2), rounded
			// up here), one convolution instead of one per part.
			//
			// A protected statement's charge (one gaussian_inf part, the
			// rest Gaussian) is one gaussian_inf of the merged mu: the
			// Gaussian parts shift nothing and add no mass at +infinity, so
			// the composition is exactly that Gaussian, shifted and given
			// mass as the gaussian_inf part alone is (pld.GaussianMuInf).
			var gsq float64
			var inf []mechanism.Mechanism
			parts := st.m.Components()
			for _, part := range parts {
				if part.IsGaussian() {
					mu := part.GDPMu()
					gsq = (gsq + mu*mu) * (1 + 4*rigULP)
				} else {
					inf = append(inf, part)
				}
			}
			if len(inf) == 1 && inf[0].Kind == mechanism.KindGaussianInf && gsq > 0 {
				merged := inf[0]
				merged.Mu = math.Sqrt((merged.Mu*merged.Mu+gsq)*(1+4*rigULP)) * (1 + 2*rigULP)
				parts, gsq = []mechanism.Mechanism{merged}, 0
			}
			for _, part := range parts {
				if part.IsGaussian() {
					continue
				}
				e, err := rigMechanismPLD(part)
				if err != nil {
					return nil, 0, err
				}
				if p, err = p.Compose(e); err != nil {
					return nil, 0, err
				}
			}
			if gsq > 0 {
				e, err := rigGaussianPLD(math.Sqrt(gsq) * (1 + 2*rigULP))
				if err != nil {
					return nil, 0, err
				}
				if p, err = p.Compose(e); err != nil {
					return nil, 0, err
				}
			}
			if p.RoundoffBound() <= roundCap {
				rigFull.Put(key, p)
				return p, mu, nil
			}
		}
	}
	p, err := c.nonGaussian()
	if err != nil {
		return nil, 0, err
	}
	if p, _, err = c.composeGaussian(p, mu); err != nil {
		return nil, 0, err
	}
	rigFull.Put(key, p)
	return p, mu, nil
}

func (c *rigComposition) composeGaussian(p *pld.PLD, mu float64) (*pld.PLD, float64, error) {
	if mu == 0 {
		return p, mu, nil
	}
	g, err := rigGaussianPLD(mu)
	if err != nil {
		return nil, 0, err
	}
	p, err = p.Compose(g)
	return p, mu, err
}

// Round-off allowed in a composition extended one entry at a time: a
// thousandth of the delta asked for (epsilon queries), or rigDeltaRoundCap
// (delta queries). The accountant refuses at a tenth.
const (
	rigRoundCapOfDelta = 1e-3
	rigDeltaRoundCap   = 1e-11
)

// rigStep records that a composition (by content) is another plus one entry.
type rigStep struct {
	prev string
	m    mechanism.Mechanism
}

const rigStepMemoSize = 4096

var rigSteps = lru.New[string, rigStep](rigStepMemoSize, nil)

// contentKey identifies the composition's value (not its entry count).
func (c *rigComposition) contentKey() string {
	b := binary.LittleEndian.AppendUint64(nil, math.Float64bits(c.muSq))
	return string(appendGroups(b, c.groups))
}

// rigFull keeps the most recently used composed PLDs (whole compositions
// and prefixes of their groups) by content, up to a total bin count.
var rigFull = lru.New[string, *pld.PLD](rigFullMaxBins, (*pld.PLD).Bins)

const rigFullMaxBins = 1 << 22 // 32 MiB of float64

func (c *rigComposition) delta(eps float64) (float64, error) {
	p, mu, err := c.full(rigDeltaRoundCap)
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
	p, mu, err := c.full(rigRoundCapOfDelta * delta)
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
// from the memo when the same entry was seen recently; the single-step PLD
// is memoised too, so a group that grows by a few steps costs one FFT.
func rigMechanismPLD(m mechanism.Mechanism) (*pld.PLD, error) {
	g := newRigGroup(m)
	k := rigMemoKey{spec: g.key, steps: int(g.steps)}
	return rigMemo.GetOr(k, func() (*pld.PLD, error) {
		one := k
		one.steps = 1
		p, err := rigMemo.GetOr(one, func() (*pld.PLD, error) {
			switch m.Kind {
			case mechanism.KindLaplace:
				return rigorousConfig.Laplace(m.Epsilon, 1)
			case mechanism.KindSubsampledGaussian:
				if m.Neighbours == mechanism.ReplaceOne {
					return rigorousConfig.SubsampledGaussianReplaceOne(m.Q, m.Sigma)
				}
				return rigorousConfig.SubsampledGaussian(m.Q, m.Sigma)
			case mechanism.KindGaussianInf:
				return rigorousConfig.GaussianMuInf(m.Mu, m.Delta)
			case mechanism.KindTruncatedLaplace, mechanism.KindOptNoise:
				return noisePLD(m, rigorousConfig)
			default:
				return nil, fmt.Errorf("%s: no PLD for this kind", m.Kind)
			}
		})
		if err != nil || k.steps == 1 {
			return p, err
		}
		return p.SelfCompose(k.steps)
	})
}

// rigGaussianPLD returns the PLD of a mu-GDP Gaussian, memoised.
func rigGaussianPLD(mu float64) (*pld.PLD, error) {
	return rigMemo.GetOr(rigMemoKey{spec: "gaussian mu " + strconv.FormatUint(math.Float64bits(mu), 16)}, func() (*pld.PLD, error) {
		return rigorousConfig.GaussianMu(mu)
	})
}

// rigMemoKey identifies a built PLD; PLDs are immutable, so they can be shared.
type rigMemoKey struct {
	spec  string // a group's key, or a Gaussian's mu
	steps int
}

// rigMemo keeps the most recently used PLDs (a ledger repeats its entries:
// the same training step, the same query shape), up to a total bin count.
var rigMemo = lru.New[rigMemoKey, *pld.PLD](rigMemoMaxBins, (*pld.PLD).Bins)

const rigMemoMaxBins = 1 << 23 // 64 MiB of float64

// rigComposeAll validates ms, merges the Gaussian entries and groups
// identical non-Gaussian entries (summing their steps).
func rigComposeAll(ms []mechanism.Mechanism) (*rigComposition, error) {
	c := &rigComposition{}
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if err := c.add(m); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
	}
	return c, nil
}

// ---- the encoded composition ----
//
// Composition.MarshalBinary writes: the magic "dpRC\x02", the entry count (uint64), the
// rounded-up sum of squared mu of the exactly-Gaussian entries (float64), the
// flag byte 2, the number of groups (uint32) and per group its single-step
// mechanism as canonical JSON (a uint32 length and the bytes) and its total
// steps (uint64), groups in ascending order of their JSON. Everything is
// little-endian.
//
// An encoded composition holds what RigorousEpsilon groups from the entry list, never a
// computed distribution: extending it is bookkeeping. The figures read from
// it come from the groups (one self-composition per group, one convolution
// per further group and one for the merged Gaussian), whose round-off bound
// does not grow with the number of charges, or, when this process computed
// the previous composition, from that plus one convolution while the
// round-off bound stays below a thousandth of the delta asked for (see
// full). Either is an upper bound; they agree to the discretisation error.
// Group PLDs, group prefixes and the last compositions are memoised in
// memory. Format 1 encodings (magic "dpRC\x01", a composed PLD) are still read
// and extended as they were, with a round-off bound that grows by one
// convolution per entry; rebuilding them from the ledger's entries gives a
// format 2 encoding.

const (
	rigCacheMagic   = "dpRC\x02"
	rigCacheMagicV1 = "dpRC\x01"
)

// extend returns the composition of c with the validated entry m, leaving c
// unchanged.
func (c *rigComposition) extend(m mechanism.Mechanism) (*rigComposition, error) {
	n := &rigComposition{count: c.count, muSq: c.muSq, groups: slices.Clone(c.groups), legacy: c.legacy}
	if n.legacy == nil {
		var prev string
		if len(n.groups) > 0 {
			prev = n.contentKey()
		}
		if err := n.add(m); err != nil {
			return nil, err
		}
		if prev != "" {
			rigSteps.Put(n.contentKey(), rigStep{prev: prev, m: m})
		}
		return n, nil
	}
	// A format 1 composition: extend its PLD as before.
	n.count++
	for _, part := range m.Components() {
		var p *pld.PLD
		var err error
		if part.IsGaussian() {
			p, err = rigGaussianPLD(part.GDPMu())
		} else {
			p, err = rigMechanismPLD(part)
		}
		if err != nil {
			return nil, err
		}
		if n.legacy, err = n.legacy.Compose(p); err != nil {
			return nil, err
		}
	}
	if n.muSq > 0 {
		full, _, err := n.composeGaussian(n.legacy, math.Sqrt(n.muSq)*(1+2*rigULP))
		if err != nil {
			return nil, err
		}
		n.legacy, n.muSq = full, 0
	}
	return n, nil
}

func (c *rigComposition) encode() ([]byte, error) {
	magic := rigCacheMagic
	if c.legacy != nil {
		magic = rigCacheMagicV1
	}
	b := make([]byte, 0, len(magic)+21+40*len(c.groups))
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.count))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.muSq))
	if c.legacy != nil {
		p, err := c.legacy.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = append(b, 1)
		return append(b, p...), nil
	}
	b = append(b, 2)
	return appendGroups(b, c.groups), nil
}

func appendGroups(b []byte, gs []rigGroup) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(gs)))
	for _, g := range gs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(g.key)))
		b = append(b, g.key...)
		b = binary.LittleEndian.AppendUint64(b, uint64(g.steps))
	}
	return b
}

func decodeRigCache(data []byte) (*rigComposition, error) {
	c := &rigComposition{}
	if len(data) == 0 {
		return c, nil
	}
	bad := func(what string) error { return fmt.Errorf("invalid rigorous accounting cache: %s", what) }
	if len(data) < len(rigCacheMagic)+17 {
		return nil, bad("bad header")
	}
	v1 := string(data[:len(rigCacheMagicV1)]) == rigCacheMagicV1
	if !v1 && string(data[:len(rigCacheMagic)]) != rigCacheMagic {
		return nil, bad("bad header")
	}
	r := data[len(rigCacheMagic):]
	c.count = int64(binary.LittleEndian.Uint64(r))
	c.muSq = math.Float64frombits(binary.LittleEndian.Uint64(r[8:]))
	flag := r[16]
	r = r[17:]
	if c.count < 0 || !(c.muSq >= 0) || math.IsInf(c.muSq, 1) {
		return nil, bad("bad counters")
	}
	switch {
	case v1 && flag == 0:
		if len(r) != 0 {
			return nil, bad("trailing bytes")
		}
	case v1 && flag == 1:
		c.legacy = new(pld.PLD)
		if err := c.legacy.UnmarshalBinary(r); err != nil {
			return nil, fmt.Errorf("invalid rigorous accounting cache: %w", err)
		}
	case !v1 && flag == 2:
		if len(r) < 4 {
			return nil, bad("truncated")
		}
		n := binary.LittleEndian.Uint32(r)
		r = r[4:]
		if uint64(n) > uint64(len(r))/12 {
			return nil, bad("group count")
		}
		for range n {
			if len(r) < 4 {
				return nil, bad("truncated")
			}
			kl := uint64(binary.LittleEndian.Uint32(r))
			if uint64(len(r)) < 4+kl+8 {
				return nil, bad("truncated")
			}
			key := r[4 : 4+kl]
			steps := binary.LittleEndian.Uint64(r[4+kl:])
			r = r[4+kl+8:]
			if steps < 1 || steps > rigMaxSteps {
				return nil, bad("steps out of range")
			}
			m, err := mechanism.Parse(key)
			if err != nil || m.IsGaussian() || m.Kind == mechanism.KindComposite || m.Steps != 1 {
				return nil, bad("invalid group " + strconv.Quote(string(key)))
			}
			g := newRigGroup(m)
			if g.key != string(key) {
				return nil, bad("group not in canonical form " + strconv.Quote(string(key)))
			}
			g.steps = int64(steps)
			if k := len(c.groups); k > 0 && !c.groups[k-1].less(g) {
				return nil, bad("groups out of order")
			}
			c.groups = append(c.groups, g)
		}
		if len(r) != 0 {
			return nil, bad("trailing bytes")
		}
	default:
		return nil, bad("bad flag")
	}
	return c, nil
}
