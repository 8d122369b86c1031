package accountant

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/mechanism"
)

// The mechanism descriptions live in package mechanism, which release and
// accountant both import. The names below are aliases kept so that code
// written against accountant keeps compiling; new code uses package
// mechanism.

// Mechanism is an alias of [mechanism.Mechanism].
type Mechanism = mechanism.Mechanism

// Mechanism kinds and neighbour relations: aliases of package mechanism's.
const (
	KindGaussian           = mechanism.KindGaussian
	KindSubsampledGaussian = mechanism.KindSubsampledGaussian
	KindLaplace            = mechanism.KindLaplace
	KindExternal           = mechanism.KindExternal
	KindComposite          = mechanism.KindComposite
	KindGaussianInf        = mechanism.KindGaussianInf
	KindTruncatedLaplace   = mechanism.KindTruncatedLaplace
	KindOptNoise           = mechanism.KindOptNoise

	AddRemove  = mechanism.AddRemove
	ReplaceOne = mechanism.ReplaceOne

	// MaxGridWeights is an alias of [mechanism.MaxGridWeights].
	MaxGridWeights = mechanism.MaxGridWeights
)

// ParseMechanism is [mechanism.Parse].
func ParseMechanism(data []byte) (Mechanism, error) { return mechanism.Parse(data) }

// Composite is [mechanism.Composite].
func Composite(parts ...Mechanism) (Mechanism, error) { return mechanism.Composite(parts...) }

// EncodeGridWeights is [mechanism.EncodeGridWeights].
func EncodeGridWeights(w []uint64) (weights, sha string) { return mechanism.EncodeGridWeights(w) }

func finitePos(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// accounted returns m with only the fields that its kind's accounting reads
// (so informational fields recorded beside it, such as a scope's delta, do
// not count as a difference).
func accounted(m Mechanism) Mechanism {
	a := Mechanism{Kind: m.Kind, Steps: m.Steps, Neighbours: m.Neighbours}
	if a.Steps == 1 {
		a.Steps = 0
	}
	switch m.Kind {
	case KindGaussian:
		a.Mu, a.Sensitivity, a.Sigma = m.Mu, m.Sensitivity, m.Sigma
	case KindExternal:
		a.Mu = m.Mu
	case KindSubsampledGaussian:
		a.Q, a.Sigma = m.Q, m.Sigma
	case KindLaplace:
		a.Epsilon = m.Epsilon
	case KindGaussianInf:
		a.Mu, a.Delta = m.Mu, m.Delta
	case KindComposite:
		for _, p := range m.Parts {
			a.Parts = append(a.Parts, accounted(p))
		}
	default: // the noise families and anything newer: every field counts
		a = m
		a.Parts = nil
	}
	return a
}

// sameAccounting reports an error unless params, as a later process parses
// them, account exactly as m does.
func sameAccounting(params []byte, m Mechanism) error {
	got, err := ParseMechanism(params)
	if err != nil {
		return fmt.Errorf("recording the charge: its parameters would not re-account (%v); a detail key probably names a mechanism field", err)
	}
	a, _ := json.Marshal(accounted(got))
	b, _ := json.Marshal(accounted(m))
	if string(a) != string(b) {
		return fmt.Errorf("recording the charge: its parameters would re-account as %s, not as the charged %s; a detail key names a mechanism field", a, b)
	}
	return nil
}
