package protect

import (
	"math"
	"strings"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// Laplace aggregates (OPTIONS noise = 'laplace').
//
// Each noisy value of the statement (a COUNT; a SUM; AVG's sum and count;
// VAR_POP's and STDDEV_POP's sum, count and sum of squares) gets rounded
// Laplace noise from release.LaplaceFor, calibrated by its L1 sensitivity: a
// person touches up to max_groups groups and moves each by at most
// max_rows*bound, so L1 = max_groups*max_rows*bound (the Gaussian's L2 has
// sqrt(max_groups) instead). Every noisy value gets the same epsilon; the
// partition selection, if any, keeps its Gaussian part with delta_s, as under
// noise = 'gaussian'. The per-value epsilon is the largest (to a relative
// 2^-12) for which the PLD accountant certifies the whole statement
// (selection plus every Laplace part) (epsilon, delta)-DP at the statement's
// delta, and the statement is charged as one composite entry with exactly
// the parts whose noise is drawn.

// planLaplace calibrates the aggregates of pl for noise = 'laplace' within
// (eps, delta), sets pl.mech and returns the aggregates' parts of the details.
// The selection's figures (pl.selMu, pl.deltaS) must be set already.
func (pl *plan) planLaplace(eps, delta float64) ([]Part, error) {
	values := 0
	for _, a := range pl.aggs {
		values++
		if a.needsCount() {
			values++
		}
		if a.needsSq() {
			values++
		}
	}
	var sel []mechanism.Mechanism
	if pl.deltaS > 0 {
		sel = []mechanism.Mechanism{{Kind: mechanism.KindGaussianInf, Mu: pl.selMu, Delta: pl.deltaS}}
	}
	fits := func(parts []mechanism.Mechanism) (bool, error) {
		e, err := accountant.RigorousEpsilon([]mechanism.Mechanism{{Kind: mechanism.KindComposite, Parts: parts}}, delta)
		return e <= eps, err
	}
	trial := func(each float64) []mechanism.Mechanism {
		parts := append([]mechanism.Mechanism(nil), sel...)
		for range values {
			parts = append(parts, mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: each})
		}
		return parts
	}
	// Bracket the per-value epsilon: lo fits, hi does not. Pure composition
	// of the Laplace parts (values*lo <= eps) fits whenever the selection
	// leaves room, which a fraction of the budget always does.
	lo, hi := 0.0, eps/float64(values)
	for range 64 {
		ok, err := fits(trial(hi))
		if err != nil {
			return nil, refusef("epsilon %v and delta %v: %v", eps, delta, err)
		}
		if !ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	if lo == 0 {
		lo = hi / 2
		for range 60 {
			ok, err := fits(trial(lo))
			if err != nil {
				return nil, refusef("epsilon %v and delta %v: %v", eps, delta, err)
			}
			if ok {
				break
			}
			hi, lo = lo, lo/2
		}
	}
	for hi-lo > lo*0x1p-12 {
		m := (lo + hi) / 2
		ok, err := fits(trial(m))
		if err != nil {
			return nil, refusef("epsilon %v and delta %v: %v", eps, delta, err)
		}
		if ok {
			lo = m
		} else {
			hi = m
		}
	}
	each := lo
	rg := float64(pl.maxRows) * float64(pl.maxGroups) // L1 multiplier
	// calibrate returns the quantum, the L1 sensitivity and the law of a sum
	// of values bounded by c each (c = 0: a count, sensitivity rg, no quantum).
	calibrate := func(name string, c float64) (float64, release.LaplaceGrid, error) {
		if c == 0 {
			l, err := release.LaplaceFor(rg, each)
			if err != nil {
				return 0, l, refusef("epsilon %v is too small or too large for %s: %v", eps, name, err)
			}
			return 0, l, nil
		}
		// Values are rounded to q, a power of two no finer than the noise
		// grid; each then moves at most q/2 beyond its bound.
		q := release.Grid(rg * c / each)
		sens := rg * (c + q/2)
		for range 8 {
			sens = rg * (c + q/2)
			if g := release.Grid(sens / each); g > q {
				q = g
				continue
			}
			break
		}
		l, err := release.LaplaceFor(sens, each)
		if err != nil {
			return 0, l, refusef("epsilon %v is too small or too large for %s: %v", eps, name, err)
		}
		return q, l, nil
	}
	parts := append([]mechanism.Mechanism(nil), sel...)
	charge := func(l release.LaplaceGrid) {
		parts = append(parts, mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: l.Sensitivity, Epsilon: l.Sensitivity / l.Scale})
	}
	var details []Part
	for i := range pl.aggs {
		a := &pl.aggs[i]
		name := a.kind
		if a.column != "" {
			name += "(" + a.column + ")"
		}
		var err error
		switch a.kind {
		case dpselect.Count:
			if _, a.lap, err = calibrate(name, 0); err != nil {
				return nil, err
			}
		default:
			c := math.Max(math.Abs(a.lo), math.Abs(a.hi))
			if a.needsCount() {
				a.mid = (a.lo + a.hi) / 2
				c = (a.hi - a.lo) / 2
			}
			if a.quant, a.lap, err = calibrate(name, c); err != nil {
				return nil, err
			}
			if a.needsCount() {
				if _, a.lapCount, err = calibrate(name+"'s count", 0); err != nil {
					return nil, err
				}
			}
			if a.needsSq() {
				a.sqMid = c * c / 2
				if a.sqQuant, a.lapSq, err = calibrate(name+"'s squares", a.sqMid); err != nil {
					return nil, err
				}
			}
		}
		charge(a.lap)
		d := Part{Part: strings.ToLower(a.kind), Column: a.column, Sensitivity: a.lap.Sensitivity, Scale: a.lap.Scale, Epsilon: a.lap.Sensitivity / a.lap.Scale}
		if a.kind != dpselect.Count {
			d.Bounds, d.Quantum = []float64{a.lo, a.hi}, a.quant
		}
		if a.needsCount() {
			charge(a.lapCount)
			d.SensitivityCount, d.ScaleCount, d.EpsilonCount = a.lapCount.Sensitivity, a.lapCount.Scale, a.lapCount.Sensitivity/a.lapCount.Scale
		}
		if a.needsSq() {
			charge(a.lapSq)
			d.SensitivitySquares, d.ScaleSquares, d.EpsilonSquares, d.QuantumSquares = a.lapSq.Sensitivity, a.lapSq.Scale, a.lapSq.Sensitivity/a.lapSq.Scale, a.sqQuant
		}
		details = append(details, d)
	}
	// The charged parts are each at most the trial's epsilon; check the
	// charged entry itself, so no rounding can let it exceed the request.
	if ok, err := fits(parts); err != nil || !ok {
		return nil, refusef("epsilon %v and delta %v cannot be met with noise = 'laplace' (the calibrated statement does not fit; %v)", eps, delta, err)
	}
	pl.mech = mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: parts}
	return details, nil
}
