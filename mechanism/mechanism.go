package mechanism

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Mechanism kinds: every kind the accountant prices (see docs/ledger.md,
// "Params records", for each kind's fields).
const (
	KindGaussian           = "gaussian"            // Gaussian noise: Mu, or Sensitivity and Sigma
	KindSubsampledGaussian = "subsampled_gaussian" // Poisson-subsampled Gaussian: Q, Sigma (noise multiplier), Steps
	KindLaplace            = "laplace"             // Laplace noise: Sensitivity and Epsilon (= sensitivity/scale)
	KindExternal           = "external"            // a spend made outside dpsql, given as Mu (gdp_spend)
	KindComposite          = "composite"           // several mechanisms charged as one entry: Parts, composed
	// KindGaussianInf is a mu-GDP Gaussian except on an event of probability
	// at most Delta (mass at +infinity): a protected-mode statement with
	// private partition selection (package protect). Accounted by the PLD
	// accountant (pld.Config.GaussianMuInf); its GDP figure is the Gaussian
	// part's Mu alone.
	KindGaussianInf = "gaussian_inf"
	// KindLaplaceInf is Laplace noise of Sensitivity/scale = Epsilon except
	// on an event of probability at most Delta (mass at +infinity): a
	// protected-mode statement's partition selection by a Laplace threshold,
	// whose noisy person count is released (package protect). Accounted by
	// the PLD accountant (pld.Config.LaplaceInf); it has no finite GDP figure.
	KindLaplaceInf       = "laplace_inf"
	KindTruncatedLaplace = "truncated_laplace" // truncated Laplace: Sensitivity, Sigma (scale), Support (see gridnoise.go)
	KindOptNoise         = "optnoise"          // piecewise-uniform grid noise: Weights, Shifts (see gridnoise.go)
)

// Neighbour relations. An entry states its figures for one relation: add/remove
// (one row added or removed, the default) or replace-one (one row replaced by
// another). Why each release states the relation it does, and how a scope of
// one relation accounts entries of the other, is written once, in
// docs/privacy-model.md, paragraph "One neighbour relation per scope".
const (
	AddRemove  = "add_remove"
	ReplaceOne = "replace_one"
)

// Mechanism describes one release completely enough to re-account it later.
// It is stored, as JSON, in every ledger row; dp_cost takes the same JSON.
// It is the union of the kinds' fields: which fields each kind reads is in
// the field comments and docs/ledger.md, "Params records".
type Mechanism struct {
	Kind        string  `json:"mechanism"`
	Mu          float64 `json:"mu,omitempty"`          // GDP parameter (gaussian, external)
	Sensitivity float64 `json:"sensitivity,omitempty"` // L2 (gaussian) or L1 (laplace) sensitivity
	Sigma       float64 `json:"sigma,omitempty"`       // noise scale; for subsampled_gaussian the noise multiplier
	Q           float64 `json:"q,omitempty"`           // Poisson sampling rate
	Steps       int     `json:"steps,omitempty"`       // number of compositions (default 1)
	Epsilon     float64 `json:"epsilon,omitempty"`     // laplace: sensitivity/scale
	Neighbours  string  `json:"neighbours,omitempty"`  // add_remove (default) or replace_one
	// Parts are the mechanisms of a composite entry (Kind "composite"), one
	// release whose pieces are charged together in one ledger row: they are
	// composed exactly as if each were its own entry. Parts are not nested
	// and share one neighbour relation; the composite's other fields are unset.
	Parts []Mechanism `json:"parts,omitempty"`
	// Delta is gaussian_inf's and laplace_inf's mass at +infinity; for truncated_laplace and
	// optnoise, the certified delta at Epsilon (informational).
	Delta float64 `json:"delta,omitempty"`
	// Non-Gaussian noise families (see gridnoise.go).
	Support       float64 `json:"support,omitempty"`        // truncated_laplace: half-width A of the support
	Weights       string  `json:"weights,omitempty"`        // optnoise: base64 of the little-endian uint64 interval weights, summing to 2^63
	Shifts        int     `json:"shifts,omitempty"`         // optnoise: largest neighbour shift, in intervals
	WeightsSHA256 string  `json:"weights_sha256,omitempty"` // optnoise: hex SHA-256 of the decoded weight bytes
}

// Parse decodes and validates a JSON mechanism description.
func Parse(data []byte) (Mechanism, error) {
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
	if m.Kind != KindComposite && m.Parts != nil {
		return fmt.Errorf("%s: parts belong to composite entries only", m.Kind)
	}
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
	case KindLaplace:
		if !finitePos(m.Epsilon) {
			return fmt.Errorf("laplace: epsilon must be positive and finite, got %v", m.Epsilon)
		}
	case KindComposite:
		return m.validateComposite()
	case KindGaussianInf:
		if !finitePos(m.Mu) {
			return fmt.Errorf("gaussian_inf: mu must be positive and finite, got %v", m.Mu)
		}
		if !(m.Delta > 0 && m.Delta < 1) {
			return fmt.Errorf("gaussian_inf: delta must lie in (0, 1), got %v", m.Delta)
		}
		if m.Neighbours == ReplaceOne {
			return errors.New("gaussian_inf: only add_remove neighbours are supported")
		}
	case KindLaplaceInf:
		if !finitePos(m.Epsilon) {
			return fmt.Errorf("laplace_inf: epsilon must be positive and finite, got %v", m.Epsilon)
		}
		if !(m.Delta > 0 && m.Delta < 1) {
			return fmt.Errorf("laplace_inf: delta must lie in (0, 1), got %v", m.Delta)
		}
		if m.Neighbours == ReplaceOne {
			return errors.New("laplace_inf: only add_remove neighbours are supported")
		}
	case KindTruncatedLaplace, KindOptNoise:
		return m.validateGridKind()
	case "":
		return fmt.Errorf("mechanism kind is missing (want one of gaussian, subsampled_gaussian, laplace, truncated_laplace, optnoise, external, gaussian_inf, laplace_inf, composite)")
	default:
		return fmt.Errorf("unknown mechanism %q (want one of gaussian, subsampled_gaussian, laplace, truncated_laplace, optnoise, external, gaussian_inf, laplace_inf, composite)", m.Kind)
	}
	return nil
}

// validateComposite checks a composite entry: at least one part, each valid
// and not itself composite, all under one neighbour relation (the
// composite's, if it states one), and no other field set.
func (m Mechanism) validateComposite() error {
	if len(m.Parts) == 0 {
		return errors.New("composite: parts must hold at least one mechanism")
	}
	if m.Mu != 0 || m.Sensitivity != 0 || m.Sigma != 0 || m.Q != 0 || m.Steps != 0 || m.Epsilon != 0 {
		return errors.New("composite: only parts (and neighbours) may be set; the parts carry the parameters")
	}
	rel := NeighboursOf(m.Neighbours)
	for i, p := range m.Parts {
		if p.Kind == KindComposite {
			return fmt.Errorf("composite: part %d is itself composite; list its parts instead", i+1)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("composite: part %d: %w", i+1, err)
		}
		if i == 0 && m.Neighbours == "" {
			rel = NeighboursOf(p.Neighbours)
		}
		if NeighboursOf(p.Neighbours) != rel {
			return fmt.Errorf("composite: part %d is stated for %s neighbours, the entry for %s; parts share one neighbour relation", i+1, NeighboursOf(p.Neighbours), rel)
		}
	}
	return nil
}

// NeighboursOf names a neighbour relation, "" meaning add_remove.
func NeighboursOf(s string) string {
	if s == "" {
		return AddRemove
	}
	return s
}

// StepsOrOne returns the number of compositions m states, 1 when unset.
func (m Mechanism) StepsOrOne() float64 {
	if m.Steps < 1 {
		return 1
	}
	return float64(m.Steps)
}

// IsGaussian reports whether m is exactly GDP (a Gaussian or an external mu
// spend), so that GDP composition is exact for it. A composite entry is not:
// the rigorous accountant composes its parts one by one.
func (m Mechanism) IsGaussian() bool {
	return m.Kind == KindGaussian || m.Kind == KindExternal
}

// GDPMu returns the mu-GDP figure of m under add/remove neighbours. It is exact
// for Gaussian and external entries; for a subsampled Gaussian it is the
// central-limit value q sqrt(T) sqrt(e^(1/sigma^2) - 1) (Bu, Dong, Long, Su 2020, as
// stated in Li, Cao, Yao, "NeuroMixGDP: A Neural Collapse-Inspired Random
// Mixup for Private Data Release", arXiv:2202.06467, Theorem E.2), which is asymptotic only and never used alone for a
// budget decision; for gaussian_inf it is the Gaussian part's mu, without
// its mass at +infinity, likewise never used alone; for Laplace no finite mu
// dominates in general, so +Inf is returned and the rigorous accountant
// decides. A composite entry has sqrt(sum of its parts' mu^2) (+Inf if any
// part's is). Replace-one entries are charged
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
		mu *= math.Sqrt(m.StepsOrOne())
	case KindExternal:
		mu = m.Mu * math.Sqrt(m.StepsOrOne())
	case KindSubsampledGaussian:
		mu = m.Q * math.Sqrt(m.StepsOrOne()) * math.Sqrt(math.Expm1(1/(m.Sigma*m.Sigma)))
		if m.Neighbours == ReplaceOne {
			mu *= 2 // the add/remove figure by group privacy; shown only, never decides
		}
	case KindComposite:
		// GDP composes by the sum of squares; +Inf if any part has no finite mu.
		var sq float64
		for _, p := range m.Parts {
			pm := p.GDPMu()
			if math.IsInf(pm, 1) {
				return math.Inf(1)
			}
			sq += pm * pm
		}
		mu = math.Sqrt(sq)
	case KindGaussianInf:
		mu = m.Mu * math.Sqrt(m.StepsOrOne()) // the Gaussian part only: its Delta is left to the rigorous accountant
	default:
		return math.Inf(1)
	}
	return mu
}

// Components returns the mechanisms an entry composes: a composite's parts,
// or the entry itself.
func (m Mechanism) Components() []Mechanism {
	if m.Kind == KindComposite {
		return m.Parts
	}
	return []Mechanism{m}
}

// Composite returns the composite entry of parts: one ledger row that is
// accounted exactly as the parts charged one after another.
func Composite(parts ...Mechanism) (Mechanism, error) {
	m := Mechanism{Kind: KindComposite, Parts: parts}
	return m, m.Validate()
}

// ComposeMu returns the mu of the composition of mu_i-GDP mechanisms,
// sqrt(sum mu_i^2) (Dong, Roth, Su, "Gaussian Differential Privacy",
// arXiv:1905.02383, Corollary 3.3).
func ComposeMu(mus ...float64) float64 {
	var s float64
	for _, m := range mus {
		s += m * m
	}
	return math.Sqrt(s)
}
