package accountant

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Mechanism kinds understood by the accountant.
const (
	KindGaussian           = "gaussian"            // Gaussian noise: Mu, or Sensitivity and Sigma
	KindSubsampledGaussian = "subsampled_gaussian" // Poisson-subsampled Gaussian: Q, Sigma (noise multiplier), Steps
	KindLaplace            = "laplace"             // Laplace noise: Sensitivity and Epsilon (= sensitivity/scale)
	KindExternal           = "external"            // a spend made outside dpsql, given as Mu (gdp_spend)
	KindTruncatedLaplace   = "truncated_laplace"   // truncated Laplace: Sensitivity, Sigma (scale), Support (see noise_kinds.go)
	KindOptNoise           = "optnoise"            // piecewise-uniform grid noise: Weights, Shifts (see noise_kinds.go)
)

// Neighbour notions. Budgets are stated for add/remove neighbours. A
// replace_one entry (a per-row release, which reveals n and is DP only when one
// row is replaced by another) states its figures for replace-one neighbours:
// its sensitivity already covers both add/remove steps of a replacement (2C for
// rows clipped to C), and it is charged as stated. A scope holding such entries
// guarantees, for replace-one neighbours, at most twice its mu_spent (an
// add/remove entry of mu is 2 mu-GDP under replacement: Dong, Roth, Su 2019,
// Theorem 2.14) and no add/remove guarantee; keep per-row releases in their
// own scope when the rest needs the add/remove guarantee.
const (
	AddRemove  = "add_remove"
	ReplaceOne = "replace_one"
)

// Mechanism describes one release completely enough to re-account it later.
// It is stored, as JSON, in every ledger row; dp_cost takes the same JSON.
type Mechanism struct {
	Kind        string  `json:"mechanism"`
	Mu          float64 `json:"mu,omitempty"`          // GDP parameter (gaussian, external)
	Sensitivity float64 `json:"sensitivity,omitempty"` // L2 (gaussian) or L1 (laplace) sensitivity
	Sigma       float64 `json:"sigma,omitempty"`       // noise scale; for subsampled_gaussian the noise multiplier
	Q           float64 `json:"q,omitempty"`           // Poisson sampling rate
	Steps       int     `json:"steps,omitempty"`       // number of compositions (default 1)
	Epsilon     float64 `json:"epsilon,omitempty"`     // laplace: sensitivity/scale
	Neighbours  string  `json:"neighbours,omitempty"`  // add_remove (default) or replace_one
	// Non-Gaussian noise families (see noise_kinds.go).
	Support       float64 `json:"support,omitempty"`        // truncated_laplace: half-width A of the support
	Delta         float64 `json:"delta,omitempty"`          // truncated_laplace, optnoise: certified delta at Epsilon (informational)
	Weights       string  `json:"weights,omitempty"`        // optnoise: base64 of the little-endian uint64 interval weights, summing to 2^63
	Shifts        int     `json:"shifts,omitempty"`         // optnoise: largest neighbour shift, in intervals
	WeightsSHA256 string  `json:"weights_sha256,omitempty"` // optnoise: hex SHA-256 of the decoded weight bytes
}

// ParseMechanism decodes and validates a JSON mechanism description.
func ParseMechanism(data []byte) (Mechanism, error) {
	var m Mechanism
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("mechanism description is not valid JSON: %w", err)
	}
	return m, m.Validate()
}

// Fields returns the description as a JSON object's fields, as recorded in a
// ledger row's params.
func (m Mechanism) Fields() map[string]any {
	b, _ := json.Marshal(m)
	var f map[string]any
	_ = json.Unmarshal(b, &f)
	return f
}

func finitePos(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// Validate reports whether the description is complete and in range.
func (m Mechanism) Validate() error {
	if m.Steps < 0 {
		return fmt.Errorf("%s: steps must be >= 1, got %d", m.Kind, m.Steps)
	}
	switch m.Neighbours {
	case "", AddRemove, ReplaceOne:
	default:
		return fmt.Errorf("%s: unknown neighbours %q (want %q or %q)", m.Kind, m.Neighbours, AddRemove, ReplaceOne)
	}
	switch m.Kind {
	case KindGaussian:
		if m.Mu != 0 {
			if !finitePos(m.Mu) {
				return fmt.Errorf("gaussian: mu must be positive and finite, got %v", m.Mu)
			}
			return nil
		}
		if !finitePos(m.Sensitivity) || !finitePos(m.Sigma) {
			return fmt.Errorf("gaussian: give mu, or a positive sensitivity and sigma (got sensitivity %v, sigma %v)", m.Sensitivity, m.Sigma)
		}
	case KindExternal:
		if !finitePos(m.Mu) {
			return fmt.Errorf("external: mu must be positive and finite, got %v", m.Mu)
		}
	case KindSubsampledGaussian:
		if !(m.Q > 0 && m.Q <= 1) {
			return fmt.Errorf("subsampled_gaussian: q must lie in (0, 1], got %v", m.Q)
		}
		if !finitePos(m.Sigma) {
			return fmt.Errorf("subsampled_gaussian: sigma must be positive and finite, got %v", m.Sigma)
		}
		if m.Steps < 1 {
			return fmt.Errorf("subsampled_gaussian: steps must be >= 1, got %d", m.Steps)
		}
		if m.Neighbours == ReplaceOne {
			return errors.New("subsampled_gaussian: replace_one neighbours cannot be accounted (group privacy under Poisson sampling is not two composed add/remove steps); describe the release under add_remove")
		}
	case KindLaplace:
		if !finitePos(m.Epsilon) {
			return fmt.Errorf("laplace: epsilon must be positive and finite, got %v", m.Epsilon)
		}
	case KindTruncatedLaplace, KindOptNoise:
		return m.validateNoiseKind()
	case "":
		return fmt.Errorf("mechanism kind is missing (want one of gaussian, subsampled_gaussian, laplace, truncated_laplace, optnoise, external)")
	default:
		return fmt.Errorf("unknown mechanism %q (want one of gaussian, subsampled_gaussian, laplace, truncated_laplace, optnoise, external)", m.Kind)
	}
	return nil
}

func (m Mechanism) steps() float64 {
	if m.Steps < 1 {
		return 1
	}
	return float64(m.Steps)
}

// IsGaussian reports whether m is exactly GDP (a Gaussian or an external mu
// spend), so that GDP composition is exact for it.
func (m Mechanism) IsGaussian() bool {
	return m.Kind == KindGaussian || m.Kind == KindExternal
}

// GDPMu returns the mu-GDP figure of m under add/remove neighbours. It is exact
// for Gaussian and external entries; for a subsampled Gaussian it is the
// central-limit value q sqrt(T) sqrt(e^(1/sigma^2) - 1) (Bu, Dong, Long, Su 2020;
// seed 003 Theorem E.2), which is asymptotic only and never used alone for a
// budget decision; for Laplace no finite mu dominates in general, so +Inf is
// returned and the rigorous accountant decides. Replace-one entries are charged
// as stated (see ReplaceOne).
func (m Mechanism) GDPMu() float64 {
	var mu float64
	switch m.Kind {
	case KindGaussian:
		if m.Mu != 0 {
			mu = m.Mu
		} else {
			mu = m.Sensitivity / m.Sigma
		}
		mu *= math.Sqrt(m.steps())
	case KindExternal:
		mu = m.Mu * math.Sqrt(m.steps())
	case KindSubsampledGaussian:
		mu = m.Q * math.Sqrt(m.steps()) * math.Sqrt(math.Expm1(1/(m.Sigma*m.Sigma)))
	default:
		return math.Inf(1)
	}
	return mu
}
