package accountant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
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
// Entries are mapped as follows (replace_one entries as stated, see mechanism.ReplaceOne):
//   - gaussian, external: mu = GDPMu() (sqrt(steps) included). While every
//     entry is of these kinds they merge exactly into one Gaussian of
//     mu = sqrt(sum mu_i^2), converted exactly with Delta/Epsilon.
//   - laplace: Laplace noise with sensitivity/scale = Epsilon, composed Steps
//     times.
//   - composite: its parts, as if each were its own entry (one ledger row,
//     one count); its Gaussian parts first merged into one Gaussian (exact),
//     and into its gaussian_inf part when it has exactly one.
//   - gaussian_inf: a mu-GDP Gaussian plus Delta mass at +infinity.
//   - laplace_inf: Laplace noise with sensitivity/scale = Epsilon plus Delta
//     mass at +infinity.
//   - truncated_laplace, optnoise: their exact PLDs (see noise_kinds.go).
//   - subsampled_gaussian: Poisson rate Q, noise multiplier Sigma, Steps
//     steps, both directions kept. Replace-one entries use the replace-one
//     pair (pld.SubsampledGaussianReplaceOne; why: neighbours.go).
//
// # One rule, entry by entry
//
// A list of entries and a ledger scope are composed by the same rule, one
// entry at a time in their order (rigComposition.extend), so that the
// figure a charge records is exactly RigorousEpsilon of the scope's entries
// and its cost does not depend on how many came before:
//
//   - while every entry is exactly Gaussian, the composition is their merged
//     mu (no PLD);
//   - the first entry that is not turns the composition into a PLD: that of
//     the merged Gaussian so far (at most ledgerMaxBins bins) composed with
//     the entry's, or the entry's own PLD alone (as priced on its own);
//   - every later entry's PLD is built on the composition's grid (the
//     connect-the-dots construction, whose error is second order in the
//     spacing, rather than rounding a finer PLD up) and composed in by
//     pld.PLD.Accumulate, which keeps at most ledgerMaxBins bins per
//     direction and charges its round-off relative to each bin.
//
// Why each approximation keeps the figure an upper bound (the package
// documentation of pld states the invariant: the stored measure's
// hockey-stick curve lies above the mechanism's at every epsilon):
//
//   - tails: each composition moves at most Tail = 1e-15 of mass per
//     direction and side: the upper tail to +infinity, where it counts in
//     full in every delta (so n charges cost at most n 1e-15 of delta: 1e-11
//     after ten thousand, a millionth of delta = 1e-5), the lower tail up
//     into the lowest kept bin (a move to larger losses, never dropped);
//   - grid: when the composition needs more than ledgerMaxBins bins, every
//     loss is rounded up to a grid twice as coarse (again a move to larger
//     losses). The epsilon read afterwards exceeds the fine-grid one by at
//     most the new spacing, about 16 standard deviations of the composed
//     loss over 2^14 bins: some 1e-3 standard deviations, a few 1e-4 of
//     epsilon;
//   - round-off: narrow entries are convolved directly, whose error is
//     relative to each bin and charged by scaling the measure up (ten
//     thousand charges raise delta by a factor 1 + 2e-10 at most); wider
//     ones by FFT, whose absolute bound is charged at +infinity;
//   - Gaussian entries after the first non-Gaussian one are composed as
//     their own PLDs rather than merged: exact composition of dominating
//     pairs, looser than the merge by the discretisation only.

// rigorousConfig is the discretisation of single entries' PLDs (grid 2^-13,
// coarser only for entries wider than pld.DefaultMaxBins bins).
var rigorousConfig = pld.Config{}

// ledgerMaxBins caps the bins per direction of a composition of more than
// one entry: what bounds a charge's cost (one convolution of at most this
// many bins with the new entry, and the root search's sweeps over them).
const ledgerMaxBins = 1 << 14

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
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: sigma, Steps: steps}
	rigMemo.Put(rigEntryKey(m, pld.DefaultInterval), p)
	return sigma, nil
}

// rigComposition is a composition of entries by the rule above. It is
// immutable once built (extend returns a new one).
type rigComposition struct {
	count int64
	// gsq is the sum of mu_i^2 (rounded up) of the exactly Gaussian parts
	// not yet composed into p: all of them while p is nil, else those
	// since p's last non-Gaussian part.
	gsq float64
	p   *pld.PLD // the non-Gaussian parts and the Gaussian ones before them (nil: none yet)
	key [32]byte // identifies the value (a hash chain over the entries)
}

// rigMaxEntries bounds a composition's entry count, far beyond any budget.
const rigMaxEntries = 1 << 40

// rigChainKey returns the key of the composition of the one keyed prev with
// m: SHA-256 over prev and m's canonical JSON. Equal keys mean equal entry
// sequences, hence (the rule being deterministic) equal compositions.
func rigChainKey(prev [32]byte, m mechanism.Mechanism) [32]byte {
	b, _ := json.Marshal(m)
	h := sha256.New()
	h.Write(prev[:])
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(b))))
	h.Write(b)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// extend returns the composition of c with the validated entry m, leaving c
// unchanged. Its parts (a composite's, or m itself) are composed one after
// another, exactly as if each were its own entry:
//   - an exactly Gaussian part adds its mu^2 to gsq: Gaussians compose
//     exactly into the Gaussian of mu = sqrt(sum mu_i^2), and composition
//     commutes, so they wait there;
//   - a gaussian_inf part takes gsq in as a larger mu (exact: the Gaussian
//     only shifts and spreads the loss, and adds no mass at +infinity);
//   - every non-Gaussian part's PLD is composed into p (pld.PLD.Accumulate),
//     or becomes p if it is the first;
//   - after each part, once the Gaussian of gsq would span rigFoldBins bins
//     of p's grid, it is composed into p and gsq restarts from 0: wide
//     enough that its discretisation costs little, narrow enough that the
//     figures' convolution with what remains in gsq stays cheap.
func (c *rigComposition) extend(m mechanism.Mechanism) (*rigComposition, error) {
	if c.count >= rigMaxEntries {
		return nil, fmt.Errorf("more than %d entries in one composition", int64(rigMaxEntries))
	}
	key := rigChainKey(c.key, m)
	if n, ok := rigAdds.Get(key); ok {
		return n, nil
	}
	n := &rigComposition{count: c.count + 1, gsq: c.gsq, p: c.p, key: key}
	for _, part := range m.Components() {
		if part.IsGaussian() {
			mu := part.GDPMu()
			n.gsq = (n.gsq + mu*mu) * (1 + 4*rigULP)
		} else {
			if part.Kind == mechanism.KindGaussianInf && n.gsq > 0 {
				part.Mu = math.Sqrt((part.Mu*part.Mu+n.gsq)*(1+4*rigULP)) * (1 + 2*rigULP)
				n.gsq = 0
			}
			// A single step is discretised on p's grid (connect the
			// dots); several are composed on the fine grid first, then
			// moved to p's grid once (Accumulate aligns them): composing
			// many steps on a coarse grid would add each step's
			// discretisation error.
			h := n.interval()
			if part.StepsOrOne() > 1 {
				h = pld.DefaultInterval
			}
			e, err := rigMechanismPLD(part, h)
			if err != nil {
				return nil, err
			}
			if n.p == nil {
				n.p = e // the first: its own PLD, as priced alone
			} else if n.p, err = n.p.Accumulate(e, ledgerMaxBins); err != nil {
				return nil, err
			}
		}
		if n.p != nil && n.gsq > 0 && rigGaussBins(n.gaussMu(), n.p.Interval()) >= rigFoldBins {
			f, err := n.withGaussian(ledgerMaxBins)
			if err != nil {
				return nil, err
			}
			n.p, n.gsq = f, 0
		}
	}
	rigAdds.Put(key, n)
	return n, nil
}

// rigFoldBins is the width (bins per direction) at which the waiting
// Gaussian is composed into p.
const rigFoldBins = 512

// rigGaussBins estimates the bins per direction of a mu-GDP Gaussian's PLD
// on the grid h: its loss N(mu^2/2, mu^2) kept to 8.3 standard deviations
// on either side (tails of 1e-15).
func rigGaussBins(mu, h float64) float64 { return 16.6 * mu / h }

// interval returns the grid spacing of p (the default before p exists).
func (c *rigComposition) interval() float64 {
	if c.p == nil {
		return pld.DefaultInterval
	}
	return c.p.Interval()
}

// withGaussian returns p composed with the Gaussian of mu = sqrt(gsq), with
// at most maxBins bins per direction (the Gaussian built on p's grid, or on
// a coarser one if it would not fit in ledgerMaxBins).
func (c *rigComposition) withGaussian(maxBins int) (*pld.PLD, error) {
	g, err := rigGaussianPLD(c.gaussMu(), c.p.Interval(), ledgerMaxBins)
	if err != nil {
		return nil, err
	}
	return c.p.Accumulate(g, maxBins)
}

const rigULP = 1.0 / (1 << 53)

// figure returns the PLD every figure of c is read from (nil while c is
// exactly Gaussian: then its merged mu decides, exactly): p composed with
// the Gaussian still waiting in gsq, memoised by key (a charge reads it for
// its scope and the file's total, and the certified epsilon's search many
// times). It is not capped: it is read, never extended.
func (c *rigComposition) figure() (*pld.PLD, error) {
	if c.p == nil || c.gsq == 0 {
		return c.p, nil
	}
	if f, ok := rigFigures.Get(c.key); ok {
		return f, nil
	}
	f, err := c.withGaussian(pld.DefaultMaxBins)
	if err != nil {
		return nil, err
	}
	rigFigures.Put(c.key, f)
	return f, nil
}

// gaussMu returns the merged mu of an exactly Gaussian composition, rounded up.
func (c *rigComposition) gaussMu() float64 { return math.Sqrt(c.gsq) * (1 + 2*rigULP) }

func (c *rigComposition) delta(eps float64) (float64, error) {
	f, err := c.figure()
	switch {
	case err != nil:
		return 0, err
	case f != nil:
		return f.Delta(eps)
	case c.gsq == 0:
		return 0, nil
	}
	return Delta(c.gaussMu(), eps)
}

func (c *rigComposition) epsilon(delta float64) (float64, error) {
	f, err := c.figure()
	switch {
	case err != nil:
		return 0, err
	case f != nil:
		return f.Epsilon(delta)
	case c.gsq == 0:
		return 0, nil
	}
	return Epsilon(c.gaussMu(), delta)
}

// rigAdds and rigFigures keep the most recent compositions and figures by
// key: a charge extends its scope and the file's total by the same entry,
// which for a file of one scope (in one neighbour relation) is the same
// composition, and a check that fails is made again by the next charge.
var (
	rigAdds    = lru.New[[32]byte, *rigComposition](16, nil)
	rigFigures = lru.New[[32]byte, *pld.PLD](16, nil)
)

// rigMechanismPLD returns the PLD of a non-Gaussian entry (all its steps) on
// the grid of spacing h (coarser if the entry is too wide for
// pld.DefaultMaxBins bins), from the memo when the same entry was seen
// recently; the single-step PLD is memoised too, so a group that grows by a
// few steps costs one FFT.
func rigMechanismPLD(m mechanism.Mechanism, h float64) (*pld.PLD, error) {
	k := rigEntryKey(m, h)
	return rigMemo.GetOr(k, func() (*pld.PLD, error) {
		one := k
		one.steps = 1
		cfg := rigorousConfig
		cfg.Interval = h
		p, err := rigMemo.GetOr(one, func() (*pld.PLD, error) {
			switch m.Kind {
			case mechanism.KindLaplace:
				return cfg.Laplace(m.Epsilon, 1)
			case mechanism.KindSubsampledGaussian:
				if m.Neighbours == mechanism.ReplaceOne {
					return cfg.SubsampledGaussianReplaceOne(m.Q, m.Sigma)
				}
				return cfg.SubsampledGaussian(m.Q, m.Sigma)
			case mechanism.KindGaussianInf:
				return cfg.GaussianMuInf(m.Mu, m.Delta)
			case mechanism.KindLaplaceInf:
				return cfg.LaplaceInf(m.Epsilon, m.Delta)
			case mechanism.KindTruncatedLaplace, mechanism.KindOptNoise:
				return noisePLD(m, cfg)
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

// rigEntryKey returns the memo key of entry m's PLD on the grid h.
func rigEntryKey(m mechanism.Mechanism, h float64) rigMemoKey {
	one := m
	one.Steps = 1
	b, _ := json.Marshal(one)
	return rigMemoKey{spec: string(b), steps: int(m.StepsOrOne()), h: h}
}

// rigGaussianPLD returns the PLD of a mu-GDP Gaussian on the grid h, with at
// most maxBins bins per direction (0: the default), memoised.
func rigGaussianPLD(mu, h float64, maxBins int) (*pld.PLD, error) {
	k := rigMemoKey{spec: "gaussian mu " + strconv.FormatUint(math.Float64bits(mu), 16), h: h, bins: maxBins}
	return rigMemo.GetOr(k, func() (*pld.PLD, error) {
		cfg := rigorousConfig
		cfg.Interval, cfg.MaxBins = h, maxBins
		return cfg.GaussianMu(mu)
	})
}

// rigMemoKey identifies a built PLD; PLDs are immutable, so they can be shared.
type rigMemoKey struct {
	spec  string  // an entry's canonical JSON (one step), or a Gaussian's mu
	steps int     // entries: the steps composed
	h     float64 // the grid spacing asked for
	bins  int     // Gaussians: the bin cap (0: the default)
}

// rigMemo keeps the most recently built PLDs (a ledger repeats its entries:
// the same training step, the same query shape), up to a total bin count
// (64 MiB of float64).
var rigMemo = lru.New[rigMemoKey, *pld.PLD](1<<23, (*pld.PLD).Bins)

// rigComposeAll validates ms and composes them in order.
func rigComposeAll(ms []mechanism.Mechanism) (*rigComposition, error) {
	c := &rigComposition{}
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		n, err := c.extend(m)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		c = n
	}
	return c, nil
}

// ---- the encoded composition ----
//
// Composition.MarshalBinary writes: the magic "dpRC\x03", the entry count
// (uint64), gsq (float64: the rounded-up sum of squared mu of the Gaussian
// parts not in the PLD), then the flag byte 0 (exactly Gaussian: nothing
// follows) or 3 followed by the PLD p (pld.PLD.MarshalBinary, to the end). Everything is little-endian. It is the whole state the rule
// extends: decoding and extending gives the same figures as extending the
// original.

const rigCacheMagic = "dpRC\x03"

func (c *rigComposition) encode() ([]byte, error) {
	b := make([]byte, 0, len(rigCacheMagic)+17)
	b = append(b, rigCacheMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.count))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.gsq))
	if c.p == nil {
		return append(b, 0), nil
	}
	p, err := c.p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return append(append(b, 3), p...), nil
}

func decodeRigCache(data []byte) (*rigComposition, error) {
	c := &rigComposition{}
	if len(data) == 0 {
		return c, nil
	}
	bad := func(what string) error { return fmt.Errorf("invalid encoded composition: %s", what) }
	if len(data) < len(rigCacheMagic)+17 || string(data[:len(rigCacheMagic)]) != rigCacheMagic {
		return nil, bad("bad header")
	}
	r := data[len(rigCacheMagic):]
	c.count = int64(binary.LittleEndian.Uint64(r))
	c.gsq = math.Float64frombits(binary.LittleEndian.Uint64(r[8:]))
	flag := r[16]
	r = r[17:]
	if c.count < 0 || c.count > rigMaxEntries || !(c.gsq >= 0) || math.IsInf(c.gsq, 1) {
		return nil, bad("bad counters")
	}
	switch flag {
	case 0:
		if len(r) != 0 {
			return nil, bad("trailing bytes")
		}
	case 3:
		c.p = new(pld.PLD)
		if err := c.p.UnmarshalBinary(r); err != nil {
			return nil, fmt.Errorf("invalid encoded composition: %w", err)
		}
	default:
		return nil, bad("bad flag")
	}
	// A decoded value is identified by its bytes: never by a key it could
	// share with a composition computed here.
	c.key = sha256.Sum256(append([]byte("decoded\x00"), data...))
	return c, nil
}
