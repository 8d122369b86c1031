package accountant

import (
	"fmt"
	"math"

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
// It follows the rule RigorousEpsilon follows for a list (see rigorous.go,
// "One rule, entry by entry"): while the entries are all Gaussian or
// external it is their merged mu and every figure is the exact GDP
// conversion; after that it is a PLD of at most 2^14 bins per direction,
// which Add extends by one convolution with the new entry. So Add costs the
// same on the ten-thousandth entry as on the tenth, and the figures equal
// RigorousDelta/RigorousEpsilon on the same entries: upper bounds.
type Composition struct {
	c rigComposition
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

// folded returns c: a composition holds its PLD already (kept for the
// callers that once asked for it to be computed).
func (c Composition) folded() (Composition, error) { return c, nil }

// Delta returns the rigorous delta(epsilon) of the composition.
func (c Composition) Delta(epsilon float64) (float64, error) {
	if !(epsilon >= 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("epsilon must be a finite number >= 0, got %v", epsilon)
	}
	return c.c.delta(epsilon)
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

// MarshalBinary encodes the composition: the magic "dpRC\x03", the entry
// count (uint64), the rounded-up sum of squared mu while the composition is
// exactly Gaussian (float64), then the flag byte 0 (nothing follows) or 3 and
// the composition's PLD (pld.PLD.MarshalBinary); little-endian. Decoding and
// extending it gives the figures extending c gives.
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
