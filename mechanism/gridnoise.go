package mechanism

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Noise families beyond Gaussian and Laplace, accounted by their exact
// privacy loss distributions (never as Gaussians):
//
//   - truncated_laplace: Laplace noise of scale Sigma truncated to
//     [-Support, Support] on a scalar of sensitivity Sensitivity (the grid
//     step already added by the sampler). Epsilon and Delta record the
//     (epsilon, delta) it was calibrated for.
//   - optnoise: a mixture of uniform laws on consecutive intervals of equal
//     width with the quantised Weights (uint64, summing to 2^63, exactly the
//     law the sampler uses) and neighbours at most Shifts intervals apart
//     (grid step included). WeightsSHA256 names the weights; audit
//     verification recomputes it.

// MaxGridShifts bounds an optnoise entry's Shifts; it equals the PLD
// accountant's pld.MaxGridShifts (a test in package accountant checks).
const MaxGridShifts = 4096

// MaxGridWeights bounds the number of intervals of an optnoise entry.
const MaxGridWeights = 1 << 14

// EncodeGridWeights returns the Weights and WeightsSHA256 fields for w.
func EncodeGridWeights(w []uint64) (weights, sha string) {
	b := make([]byte, 8*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	h := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(b), hex.EncodeToString(h[:])
}

// GridWeights decodes an optnoise entry's weights, checking their form, their
// sum (2^63) and their SHA-256.
func (m Mechanism) GridWeights() ([]uint64, error) {
	b, err := base64.StdEncoding.DecodeString(m.Weights)
	if err != nil {
		return nil, fmt.Errorf("optnoise: weights are not valid base64: %w", err)
	}
	if len(b) == 0 || len(b)%8 != 0 || len(b)/8 > MaxGridWeights {
		return nil, fmt.Errorf("optnoise: weights must hold 1 to %d little-endian uint64 values, got %d bytes", MaxGridWeights, len(b))
	}
	h := sha256.Sum256(b)
	if hex.EncodeToString(h[:]) != m.WeightsSHA256 {
		return nil, errors.New("optnoise: the weights do not match weights_sha256")
	}
	w := make([]uint64, len(b)/8)
	var sum uint64
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
		if w[i] > 1<<63 || sum+w[i] > 1<<63 {
			return nil, errors.New("optnoise: weights must sum to 2^63, they exceed it")
		}
		sum += w[i]
	}
	if sum != 1<<63 {
		return nil, fmt.Errorf("optnoise: weights must sum to 2^63, got %d", sum)
	}
	return w, nil
}

func (m Mechanism) validateGridKind() error {
	switch m.Kind {
	case KindTruncatedLaplace:
		if !finitePos(m.Sensitivity) || !finitePos(m.Sigma) || !finitePos(m.Support) {
			return fmt.Errorf("truncated_laplace: sensitivity, sigma (scale) and support must be positive and finite, got %v, %v, %v", m.Sensitivity, m.Sigma, m.Support)
		}
		if m.Sensitivity > m.Support {
			return fmt.Errorf("truncated_laplace: sensitivity %v exceeds the support %v", m.Sensitivity, m.Support)
		}
	case KindOptNoise:
		if m.Shifts < 1 || m.Shifts > MaxGridShifts {
			return fmt.Errorf("optnoise: shifts must lie in [1, %d], got %d", MaxGridShifts, m.Shifts)
		}
		if _, err := m.GridWeights(); err != nil {
			return err
		}
	}
	if m.Neighbours == ReplaceOne {
		return fmt.Errorf("%s: describe the release under add_remove neighbours (its sensitivity is an add/remove sensitivity)", m.Kind)
	}
	return nil
}
