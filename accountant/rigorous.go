package accountant

import (
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
//   - subsampled_gaussian: Poisson rate Q, noise multiplier Sigma, Steps
//     steps, both directions kept. Replace-one entries use the replace-one
//     pair (pld.SubsampledGaussianReplaceOne): a replace-one neighbour under
//     Poisson sampling is not two composed add/remove steps (group privacy
//     is not composition).

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
	k := rigMemoKey{kind: m.Kind, q: m.Q, sigma: m.Sigma, eps: m.Epsilon, steps: int(m.steps()), neighbours: m.Neighbours}
	return rigMemo.get(k, func() (*pld.PLD, error) {
		var p *pld.PLD
		var err error
		switch m.Kind {
		case KindLaplace:
			p, err = rigorousConfig.Laplace(k.eps, 1)
		case KindSubsampledGaussian:
			if m.Neighbours == ReplaceOne {
				p, err = rigorousConfig.SubsampledGaussianReplaceOne(m.Q, m.Sigma)
				break
			}
			p, err = rigorousConfig.SubsampledGaussian(m.Q, m.Sigma)
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
	neighbours    string // replace_one subsampled entries have their own PLD
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
		kind       string
		q, sigma   float64
		eps        float64
		neighbours string
	}
	groups := map[key]int{}
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		c.count++
		if m.IsGaussian() {
			c.addGaussian(m.GDPMu())
			continue
		}
		k := key{kind: m.Kind, q: m.Q, sigma: m.Sigma, eps: m.Epsilon, neighbours: m.Neighbours}
		groups[k] += int(m.steps())
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
		return a.neighbours < b.neighbours
	})
	for _, k := range keys {
		m := Mechanism{Kind: k.kind, Q: k.q, Sigma: k.sigma, Epsilon: k.eps, Steps: groups[k], Neighbours: k.neighbours}
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
