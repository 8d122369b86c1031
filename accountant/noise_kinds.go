package accountant

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/dpsql/dpsql/accountant/pld"
)

// Noise families beyond Gaussian and Laplace, accounted by their exact PLDs
// (never as Gaussians):
//
//   - truncated_laplace: Laplace noise of scale Sigma truncated to
//     [-Support, Support] on a scalar of sensitivity Sensitivity (the grid
//     step already added by the sampler): pld.Config.TruncatedLaplace, in
//     closed form. Epsilon and Delta record the (epsilon, delta) it was
//     calibrated for.
//   - optnoise: a mixture of uniform laws on consecutive intervals of equal
//     width with the quantised Weights (uint64, summing to 2^63, exactly the
//     law the sampler uses) and neighbours at most Shifts intervals apart
//     (grid step included): pld.Config.GridNoise, the pointwise maximum of
//     the privacy curves over every shift. WeightsSHA256 names the weights;
//     audit verification recomputes it (VerifyNoisePayload).

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

func (m Mechanism) validateNoiseKind() error {
	switch m.Kind {
	case KindTruncatedLaplace:
		if !finitePos(m.Sensitivity) || !finitePos(m.Sigma) || !finitePos(m.Support) {
			return fmt.Errorf("truncated_laplace: sensitivity, sigma (scale) and support must be positive and finite, got %v, %v, %v", m.Sensitivity, m.Sigma, m.Support)
		}
		if m.Sensitivity > m.Support {
			return fmt.Errorf("truncated_laplace: sensitivity %v exceeds the support %v", m.Sensitivity, m.Support)
		}
	case KindOptNoise:
		if m.Shifts < 1 || m.Shifts > pld.MaxGridShifts {
			return fmt.Errorf("optnoise: shifts must lie in [1, %d], got %d", pld.MaxGridShifts, m.Shifts)
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

// noiseKey identifies the PLD of a noise-family entry beyond the common key
// fields ("" for other kinds).
func (m Mechanism) noiseKey() string {
	switch m.Kind {
	case KindTruncatedLaplace:
		return strconv.FormatFloat(m.Sensitivity, 'x', -1, 64) + "/" + strconv.FormatFloat(m.Support, 'x', -1, 64)
	case KindOptNoise:
		return strconv.Itoa(m.Shifts) + "/" + m.WeightsSHA256
	}
	return ""
}

// noisePLD returns the PLD of one noise-family entry.
func (m Mechanism) noisePLD(c pld.Config) (*pld.PLD, error) {
	switch m.Kind {
	case KindTruncatedLaplace:
		return c.TruncatedLaplace(m.Sensitivity, m.Sigma, m.Support)
	case KindOptNoise:
		w, err := m.GridWeights()
		if err != nil {
			return nil, err
		}
		f := make([]float64, len(w))
		for i, v := range w {
			f[i] = math.Ldexp(float64(v), -63) // rounded: charged by pld (roundedAtoms)
		}
		return c.GridNoise(f, m.Shifts)
	}
	return nil, fmt.Errorf("%s: not a noise family", m.Kind)
}

// VerifyNoisePayload checks what a ledger row of a noise family carries
// beyond its hash chain: an optnoise row's weights must decode, sum to 2^63
// and match their recorded SHA-256. Audit verification calls it per row.
func VerifyNoisePayload(m Mechanism) error {
	if m.Kind != KindOptNoise {
		return nil
	}
	_, err := m.GridWeights()
	return err
}
