package accountant

// The noise families truncated_laplace and optnoise (see package
// mechanism) are accounted by their exact PLDs: pld.Config.TruncatedLaplace
// in closed form, and pld.Config.GridNoise, the pointwise maximum of the
// privacy curves over every shift.

import (
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
)

// noisePLD returns the PLD of one noise-family entry.
func noisePLD(m mechanism.Mechanism, c pld.Config) (*pld.PLD, error) {
	switch m.Kind {
	case mechanism.KindTruncatedLaplace:
		return c.TruncatedLaplace(m.Sensitivity, m.Sigma, m.Support)
	case mechanism.KindOptNoise:
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
func VerifyNoisePayload(m mechanism.Mechanism) error {
	if m.Kind != mechanism.KindOptNoise {
		return nil
	}
	_, err := m.GridWeights()
	return err
}
