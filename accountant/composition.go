package accountant

import (
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
)

// Composition is the composed privacy loss of a sequence of ledger entries,
// extended one entry at a time instead of re-accounting a whole history:
//
//	var c accountant.Composition // the empty composition: nothing spent
//	c, err := c.Add(m)
//	eps, err := c.Epsilon(delta)
//
// A Composition is a value: Add returns a new one and leaves its receiver
// unchanged.
//
// It keeps the exactly-Gaussian entries as their sum of mu^2 (rounded up) and
// the others as groups of identical entries with their total steps (see
// MarshalBinary for the encoding), so extending it is bookkeeping and the
// round-off bound of its figures grows with the number of distinct
// mechanisms, not with the number of charges. While the entries are all
// Gaussian or external every figure is the exact GDP conversion. The figures
// are upper bounds like those of RigorousDelta/RigorousEpsilon on the same
// entries.
type Composition struct {
	c rigComposition
	// Set by folded: the whole composition's PLD (nil when exactly
	// Gaussian) and merged mu, so that repeated readings sweep one PLD.
	done bool
	p    *pld.PLD
	mu   float64
}

// Add returns the composition of c with m.
func (c Composition) Add(m mechanism.Mechanism) (Composition, error) {
	if err := m.Validate(); err != nil {
		return Composition{}, err
	}
	n, err := c.c.extend(m)
	if err != nil {
		return Composition{}, err
	}
	return Composition{c: *n}, nil
}

// folded returns c with its whole PLD computed once, so that reading delta
// or epsilon many times (a root search) sweeps it instead of recomposing.
func (c Composition) folded() (Composition, error) {
	if c.done {
		return c, nil
	}
	p, mu, err := c.c.full(rigDeltaRoundCap)
	if err != nil {
		return Composition{}, err
	}
	c.done, c.p, c.mu = true, p, mu
	return c, nil
}

// Delta returns the rigorous delta(epsilon) of the composition.
func (c Composition) Delta(epsilon float64) (float64, error) {
	if !(epsilon >= 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("epsilon must be a finite number >= 0, got %v", epsilon)
	}
	if !c.done {
		return c.c.delta(epsilon)
	}
	switch {
	case c.p != nil:
		return c.p.Delta(epsilon)
	case c.mu == 0:
		return 0, nil
	}
	return Delta(c.mu, epsilon)
}

// Epsilon returns the rigorous epsilon at delta of the composition.
func (c Composition) Epsilon(delta float64) (float64, error) {
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	return c.c.epsilon(delta)
}

// Count returns the number of entries composed.
func (c Composition) Count() int64 { return c.c.count }

// MarshalBinary encodes the composition: the magic "dpRC\x02", the entry
// count (uint64), the rounded-up sum of squared mu of the exactly-Gaussian
// entries (float64), the flag byte 2, the number of groups (uint32) and per
// group its single-step mechanism as canonical JSON (a uint32 length and the
// bytes) and its total steps (uint64), groups in ascending order of their
// JSON; little-endian.
func (c Composition) MarshalBinary() ([]byte, error) { return c.c.encode() }

// UnmarshalBinary decodes what MarshalBinary wrote; empty data is the empty
// composition.
func (c *Composition) UnmarshalBinary(data []byte) error {
	d, err := decodeRigCache(data)
	if err != nil {
		return err
	}
	*c = Composition{c: *d}
	return nil
}
