package accountant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant/pld"
)

// Composition is the composed privacy loss of a sequence of ledger entries,
// extended one entry at a time instead of re-accounting a whole history:
//
//	var c accountant.Composition // the empty composition: nothing spent
//	c, err := c.Add(m)
//	eps, err := c.Epsilon(delta)
//
// A Composition is a value: Add returns a new one and leaves its receiver
// unchanged (the PLDs it holds are immutable and may be shared).
//
// While the entries are all Gaussian or external, a Composition keeps their
// sum of mu^2 (rounded up) and every figure is the exact GDP conversion. The
// first other entry starts a PLD; the merged Gaussian is then convolved into
// it, and so is every later Gaussian entry as it comes, so that reading epsilon
// or delta is one sweep over the PLD, never a convolution. Each extension is
// one convolution (PLDs of repeated entries are memoised). The figures are
// upper bounds like those of RigorousDelta/RigorousEpsilon on the same
// entries, and agree with them to the discretisation error (composition order
// and the Gaussian merge differ).
//
// MarshalBinary encodes it as: the magic "dpRC\x01", the entry count
// (uint64), the rounded-up sum of squared mu of exactly-Gaussian entries not
// yet folded into the PLD (float64), a flag byte, and, if the flag is 1, a PLD
// (pld.PLD.MarshalBinary). Everything is little-endian.
type Composition struct {
	c rigComposition
}

const rigCacheMagic = "dpRC\x01"

// Add returns the composition of c with m.
func (c Composition) Add(m Mechanism) (Composition, error) {
	if err := m.Validate(); err != nil {
		return Composition{}, err
	}
	n := c.c
	n.count++
	var p *pld.PLD
	var err error
	switch {
	case m.IsGaussian() && n.pld == nil:
		n.addGaussian(m.GDPMu()) // still exactly Gaussian: stay exact
		return Composition{n}, nil
	case m.IsGaussian():
		p, err = rigGaussianPLD(m.GDPMu())
	default:
		p, err = rigMechanismPLD(m)
	}
	if err != nil {
		return Composition{}, err
	}
	if n.pld == nil {
		n.pld = p
	} else if n.pld, err = n.pld.Compose(p); err != nil {
		return Composition{}, err
	}
	// Fold the Gaussian part into the PLD, so that a query needs no
	// convolution.
	if n.muSq > 0 {
		full, _, err := n.full()
		if err != nil {
			return Composition{}, err
		}
		n.pld, n.muSq = full, 0
	}
	return Composition{n}, nil
}

// folded returns c with its exactly-Gaussian part convolved into its PLD (if
// it has one), so that reading delta or epsilon is one sweep, never a
// convolution.
func (c Composition) folded() (Composition, error) {
	if c.c.pld == nil || c.c.muSq == 0 {
		return c, nil
	}
	n := c.c
	full, _, err := n.full()
	if err != nil {
		return Composition{}, err
	}
	n.pld, n.muSq = full, 0
	return Composition{n}, nil
}

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

// MarshalBinary encodes the composition (see [Composition]).
func (c Composition) MarshalBinary() ([]byte, error) { return c.c.encode() }

// UnmarshalBinary decodes what MarshalBinary wrote; empty data is the empty
// composition.
func (c *Composition) UnmarshalBinary(data []byte) error {
	d, err := decodeRigCache(data)
	if err != nil {
		return err
	}
	c.c = *d
	return nil
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
