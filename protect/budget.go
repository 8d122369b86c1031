package protect

import (
	"errors"
	"math"

	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/release"
)

// calibrateNoise plans the statement's noise once the schema is known: its
// values (values.go), their law and budget split, the selection's delta_s
// and threshold (package calibrate), the aggregates' quanta, the mechanism
// charged and the details recorded with it.
//
// Privacy: the values are the only thing the statement draws from the data
// beside the choice of groups, and the charged mechanism is the composition
// of their noises (gaussian_inf{mu, delta_s}, or a composite of one
// laplace_inf part for the selection and one laplace part per other value),
// each at the sensitivity of its value: a person moves a count by at most
// max_rows in each of at most max_groups groups, a sum by max_rows times its
// bound plus half a quantum per row, the count of persons by 1 per group.
// What the statement releases is a post-processing of those values and of
// the selection: an aggregate that reads a value another one reads (COUNT(*)
// and the selection, AVG and SUM) reads the same draw, so nothing is paid
// twice and nothing more is revealed. Everything here depends on the
// statement, the policy, the schema and the ledger only, never on the rows.
func (pl *plan) calibrateNoise(facts SchemaFacts) error {
	pl.values = buildValues(pl, facts)
	req := calibrate.Request{MaxGroups: pl.maxGroups, Noise: pl.noise}
	for _, v := range pl.values {
		req.Values = append(req.Values, v.Value)
	}
	sel := pl.selection()
	if pl.mu > 0 {
		req.Mu = pl.mu
		if sel {
			req.SelectionDelta = pl.deltaS
			if !pl.deltaSSet && pl.room/2 < pl.deltaS {
				req.SelectionDelta = pl.room / 2 // the scope's share, capped (SelectionDeltaPool)
			}
		}
	} else {
		req.Epsilon, req.Delta = pl.eps, pl.delta
		if sel {
			if pl.deltaSSet {
				req.SelectionDelta = pl.deltaS
			} else if !math.IsInf(pl.room, 1) {
				req.SelectionRoom = pl.room / 2
			}
		}
	}
	cp, err := calibrate.Make(req)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return err
		}
		return refusef("%v", err)
	}
	pl.cal = cp
	for i := range pl.values {
		pl.values[i].Noisy = cp.Values[i]
	}
	pl.deltaS, pl.tau, pl.mech = cp.SelectionDelta, cp.Threshold, cp.Mechanism
	for i := range pl.aggs {
		a := &pl.aggs[i]
		if a.val >= 0 && pl.values[a.val].Fixed {
			a.quant = pl.values[a.val].Quantum
		}
		if a.sq >= 0 {
			a.sqQuant = pl.values[a.sq].Quantum
		}
	}
	pl.details = pl.statementDetails()
	return nil
}

// statementDetails is what the charge records beside the mechanism: one part
// per value.
func (pl *plan) statementDetails() StatementDetails {
	sd := StatementDetails{Table: pl.table, PrivacyUnit: pl.policy.PrivacyUnit, MaxGroups: pl.maxGroups, MaxRows: pl.maxRows,
		NoiseTV: release.NoiseTV, Noise: string(pl.cal.Law)}
	for _, v := range pl.values {
		p := Part{Part: v.part, Column: v.column, Sensitivity: v.Sensitivity, Outputs: v.reads, Centre: v.centre}
		if v.Law == calibrate.Laplace {
			p.Scale, p.Epsilon = v.Lap.Scale, v.Epsilon
		} else {
			p.Mu, p.Sigma = v.Mu, v.Sigma
		}
		if v.Selection {
			p.Delta, p.Threshold = pl.deltaS, pl.tau
		}
		if v.part == "sum" || v.part == "squares" || v.part == "histogram" {
			p.Bounds = []float64{v.lo, v.hi}
		}
		if v.Fixed {
			p.Quantum = v.Quantum
		}
		if v.Dim > 1 {
			p.Buckets = v.Dim
		}
		sd.Parts = append(sd.Parts, p)
	}
	if pl.keySources != nil {
		sd.PublicKeys = pl.policy.PublicKeys
	}
	if pl.mu == 0 {
		sd.EpsilonRequested, sd.DeltaRequested = pl.eps, pl.delta
	}
	// The Gaussian sampler's error: NoiseTV per value it draws (the rounded
	// Laplace sampler is exact). Groups: one without GROUP BY, every key
	// combination with public keys (set again once they are read), else a
	// public bound.
	groups := 1.0
	if pl.selection() {
		groups = rowsBound
	}
	sd.NoiseTVValues = pl.gaussianValues(groups)
	sd.NoiseTVTotal = sd.NoiseTVValues * release.NoiseTV
	return sd
}
