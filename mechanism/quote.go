package mechanism

import (
	"errors"
	"fmt"
	"math"
)

// Pricer certifies a mechanism: it returns an upper bound on the smallest
// epsilon at which m alone is (epsilon, delta)-DP. The accountant's
// rigorous (PLD) accountant is one (accountant.Price); a release never
// prices anything itself.
type Pricer func(m Mechanism, delta float64) (float64, error)

// Quote is a planned release's price: what the accountant charges, what the
// ledger row records and what the release's summary reports, all built from
// this one value, so that nothing is priced twice and nothing drifts.
type Quote struct {
	// Mechanism is what is charged.
	Mechanism Mechanism
	// Delta is the charged scope's delta; Epsilon the certified epsilon of
	// Mechanism alone at Delta (by the Pricer the quote was made with).
	// They are informational: the budget decision composes Mechanism with
	// the scope's entries itself and never trusts a quoted figure.
	Delta, Epsilon float64
	// NoiseTV bounds the total-variation distance of the release's samplers
	// from their ideal laws; the accountant pays it from delta.
	NoiseTV float64
	// Params is the release's params record (a struct of this package, such
	// as Avgmix), recorded in the ledger row beside the mechanism.
	Params any
}

// NewQuote prices m at the scope's delta with price.
func NewQuote(m Mechanism, delta float64, price Pricer, noiseTV float64, params any) (Quote, error) {
	if err := m.Validate(); err != nil {
		return Quote{}, err
	}
	if !(delta > 0 && delta < 1) {
		return Quote{}, fmt.Errorf("quote: delta must lie strictly between 0 and 1, got %v", delta)
	}
	if !(noiseTV >= 0) || math.IsInf(noiseTV, 1) {
		return Quote{}, fmt.Errorf("quote: noise_tv must be a finite number >= 0, got %v", noiseTV)
	}
	if price == nil {
		return Quote{}, errors.New("quote: no pricer")
	}
	eps, err := price(m, delta)
	if err != nil {
		return Quote{}, err
	}
	return Quote{Mechanism: m, Delta: delta, Epsilon: eps, NoiseTV: noiseTV, Params: params}, nil
}

// Record keys a quote adds to its params record.
const (
	KeyNoiseTV      = "noise_tv"      // Quote.NoiseTV
	KeyQuoteEpsilon = "quote_epsilon" // Quote.Epsilon (absent when not finite)
	KeyQuoteDelta   = "quote_delta"   // Quote.Delta
)

// Record returns what the ledger row records beside the mechanism's own
// fields: the params record's fields, noise_tv (when positive), and the
// quoted epsilon and delta.
func (q Quote) Record() (map[string]any, error) {
	out, err := Fields(q.Params)
	if err != nil {
		return nil, fmt.Errorf("quote: %w", err)
	}
	if q.NoiseTV > 0 {
		out[KeyNoiseTV] = q.NoiseTV
	}
	if q.Delta > 0 {
		out[KeyQuoteDelta] = q.Delta
		if !math.IsInf(q.Epsilon, 0) && !math.IsNaN(q.Epsilon) {
			out[KeyQuoteEpsilon] = q.Epsilon
		}
	}
	return out, nil
}
