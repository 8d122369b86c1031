package sqlfuncs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// parseMechanisms decodes a planned mechanism (a JSON object) or a composition
// (a JSON array of them), rejecting unknown keys.
func parseMechanisms(fn string, v any) ([]mechanism.Mechanism, error) {
	data, err := optionBytes(fn, v)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSpace(data)
	var raws []json.RawMessage
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, fmt.Errorf("%s: mechanism list is not a JSON array: %v", fn, err)
		}
		if len(raws) == 0 {
			return nil, fmt.Errorf("%s: the mechanism list is empty", fn)
		}
	} else {
		raws = []json.RawMessage{data}
	}
	ms := make([]mechanism.Mechanism, len(raws))
	for i, r := range raws {
		where := fn
		if len(raws) > 1 {
			where = fmt.Sprintf("%s: mechanism %d", fn, i+1)
		}
		if err := decodeOptions(where, r, &ms[i]); err != nil {
			return nil, err
		}
		if err := ms[i].Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return ms, nil
}

// cost parses (mechanism_json, delta) and returns the mechanisms, delta and
// their rigorous epsilon.
func cost(fn string, a *args) ([]mechanism.Mechanism, float64, float64, error) {
	ms, err := parseMechanisms(fn, a.raw("mechanism_json"))
	if err != nil {
		return nil, 0, 0, err
	}
	d := a.num("delta", 0)
	eps, err := accountant.RigorousEpsilon(ms, d)
	if err != nil {
		return nil, 0, 0, err
	}
	return ms, d, eps, nil
}

// dpCost implements dp_cost(mechanism_json, delta): the rigorous epsilon of a
// planned release, charging nothing.
func dpCost(a *args) (any, error) {
	_, _, eps, err := cost("dp_cost", a)
	if err != nil {
		return nil, err
	}
	return eps, nil
}

// dpCostReport implements dp_cost_report(mechanism_json, delta): a JSON object
// with the rigorous epsilon, the GDP (central-limit for subsampled entries) mu
// and its epsilon, for comparison.
func dpCostReport(a *args) (any, error) {
	ms, d, eps, err := cost("dp_cost_report", a)
	if err != nil {
		return nil, err
	}
	var sq float64
	exact := true
	for _, m := range ms {
		mu := m.GDPMu()
		sq += mu * mu
		exact = exact && m.IsGaussian()
	}
	rep := map[string]any{"epsilon": eps, "delta": d, "gdp_exact": exact}
	if mu := math.Sqrt(sq); !math.IsInf(mu, 1) {
		epsGDP, _ := accountant.Epsilon(mu, d)
		rep["mu_gdp"], rep["epsilon_gdp"] = mu, epsGDP
	}
	b, _ := json.Marshal(rep)
	return string(b), nil
}

// dpEpsilon implements dp_epsilon([scope,] delta): the rigorous epsilon of
// everything the scope (default: the connection's) has spent.
func (c *Conn) dpEpsilon(a *args) (any, error) {
	scope := c.Scope()
	if a.has("scope") {
		scope = a.str("scope", "")
		if err := c.otherScope("dp_epsilon", scope); err != nil {
			return nil, err
		}
	}
	l, err := c.ledger()
	if err != nil {
		return nil, err
	}
	return l.ScopeEpsilon(context.Background(), scope, a.num("delta", 0))
}
