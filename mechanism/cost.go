package mechanism

import (
	"encoding/json"
	"fmt"
	"math"
)

// Cost is what one ledger entry spent, in the terms a person reads it: Mu
// for Gaussian noise (+Inf when the entry has no finite mu, as Laplace noise
// has not), and Epsilon and Delta for an entry priced as (epsilon, delta):
// Laplace noise, or a statement whose caller gave epsilon and delta (both 0
// when the entry has no such figure).
type Cost struct {
	Mu, Epsilon, Delta float64
}

// CostOf returns the cost of a ledger entry from its recorded mu and params
// (the mechanism description with its params record). The (epsilon, delta)
// figures are the caller's request when the record has one
// (epsilon_requested, delta_requested: a protected statement, dp_gaussian
// given epsilon), else, for an entry without a finite mu, the sum of its
// components' epsilons and deltas (basic composition: an upper bound, the
// ledger's accountant composes them more tightly); left 0 when a component
// states no epsilon.
func CostOf(mu float64, params string) Cost {
	c := Cost{Mu: mu}
	var req struct {
		Epsilon float64 `json:"epsilon_requested"`
		Delta   float64 `json:"delta_requested"`
	}
	if json.Unmarshal([]byte(params), &req) == nil && req.Epsilon > 0 {
		c.Epsilon, c.Delta = req.Epsilon, req.Delta
		return c
	}
	if !math.IsInf(mu, 1) {
		return c
	}
	var m Mechanism
	if json.Unmarshal([]byte(params), &m) != nil {
		return c
	}
	var eps, delta float64
	for _, p := range m.Components() {
		if !(p.Epsilon > 0) || math.IsInf(p.Epsilon, 0) {
			return c
		}
		eps += p.Epsilon * p.StepsOrOne()
		delta += p.Delta * p.StepsOrOne()
	}
	c.Epsilon, c.Delta = eps, delta
	return c
}

// Finite reports whether the cost has a finite mu.
func (c Cost) Finite() bool { return c.Mu >= 0 && !math.IsInf(c.Mu, 1) }

// String says the cost as the dpsql commands print it: "mu 0.5";
// "epsilon 1, delta 1e-06" for an entry without a finite mu; "epsilon 1,
// delta 1e-06; Gaussian noise, mu 0.3" for a Gaussian entry given as
// (epsilon, delta); "no finite mu" when neither figure is known. +Inf is
// never printed.
func (c Cost) String() string {
	switch {
	case c.Epsilon > 0 && c.Finite() && c.Mu > 0:
		return fmt.Sprintf("epsilon %g, delta %g; Gaussian noise, mu %g", c.Epsilon, c.Delta, c.Mu)
	case c.Epsilon > 0:
		return fmt.Sprintf("epsilon %g, delta %g", c.Epsilon, c.Delta)
	case c.Finite():
		return fmt.Sprintf("mu %g", c.Mu)
	}
	return "no finite mu"
}
