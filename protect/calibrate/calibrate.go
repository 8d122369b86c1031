// Package calibrate plans the noise of one protected-mode statement (package
// protect): which law the statement's noisy values get (Laplace or
// Gaussian, each sampled exactly on a power-of-two grid by package release),
// how its privacy budget is split among them, the partition selection's
// delta and threshold, and the mechanism to charge, which is the one the
// accountant certifies. It is pure: no SQL, no data, no randomness.
//
// # What a statement draws
//
// A statement draws, in every group it releases, a few noisy values
// ([Value]): the partition selection's count of persons, counts of rows or of
// values, sums of clamped (and centred) values, sums of squares, histograms.
// Package protect decides which values a statement needs, so that no
// statistic is paid twice (an average is a post-processing of a sum and a
// count it already draws; with one row per person the selection's count of
// persons is COUNT(*)), and how much each matters ([Value.Weight]).
//
// # The split
//
// The split minimises sum_b W_b Var_b / s_b^2, the variance of each value in
// units of its per-group sensitivity s_b, weighted by W_b:
//
//   - Gaussian noise of scale sigma_b = S_b/mu_b on a value of L2 sensitivity
//     S_b is mu_b-GDP, and the statement's values compose to
//     mu = sqrt(sum mu_b^2) (Dong, Roth, Su, "Gaussian Differential Privacy",
//     arXiv:1905.02383). Minimising sum W_b/mu_b^2 under sum mu_b^2 = mu^2
//     gives mu_b^2 proportional to sqrt(W_b) (Lagrange).
//   - Laplace noise of scale b_b = S_b/epsilon_b on a value of L1 sensitivity
//     S_b is epsilon_b-DP, and pure epsilons add. Minimising sum W_b/epsilon_b^2
//     under sum epsilon_b = epsilon gives epsilon_b proportional to W_b^(1/3).
//
// Equal weights give an equal split in units of sensitivity; the weights make
// the split favour the values that more outputs read (protect's weights).
//
// # The law (noise = 'auto')
//
// A statement given (epsilon, delta) is planned under both laws and takes
// the one whose objective is smaller: Laplace composes its values' epsilons
// linearly and its L1 sensitivity grows with max_groups, the Gaussian
// composes in squares and grows with sqrt(max_groups) but pays for delta, so
// Laplace wins for few values and small max_groups, the Gaussian for many. A
// statement given mu is Gaussian (no finite mu bounds Laplace noise).
//
// # Partition selection
//
// Under the Gaussian the selection is the Gaussian threshold of Desfontaines
// et al. (arXiv:2006.03684) inside a gaussian_inf charge; under Laplace it is
// Laplace thresholding (Korolova et al., WWW 2009) inside a laplace_inf part:
// a group is released when its noisy count of persons reaches the threshold
// tau, chosen so that the at most max_groups groups held only by one person
// appear with probability at most delta_s together. A Laplace statement
// gives all of its delta to the selection (its Laplace parts are pure; a
// hundredth is left for the accountant's discretisation), a Gaussian one a
// tenth (which costs its mu under 1%), each capped by what the scope's
// selections may still spend.
//
// # What is charged
//
// Gaussian: gaussian_inf{mu, delta_s} with a selection, gaussian{mu}
// without, mu the statement's (for (epsilon, delta), the largest mu whose
// charge the accountant certifies (epsilon, delta)-DP). Laplace: a composite
// of one laplace_inf part (the selection) and one laplace part per other
// value, each at its charged epsilon = (S_b + grid)/b_b, scaled so that the
// accountant certifies the composite (epsilon, delta)-DP.
package calibrate

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Law is a noise law.
type Law string

// The laws. Auto is a request only: a plan is Laplace or Gaussian.
const (
	Auto     Law = "auto"
	Laplace  Law = "laplace"
	Gaussian Law = "gaussian"
)

// Shares of the reference delta given to the partition selection by default.
const (
	// LaplaceSelectionShare: a Laplace statement's aggregates are pure, so
	// its delta goes to the selection, less a hundredth for the PLD
	// accountant's discretisation.
	LaplaceSelectionShare = 0.99
	// GaussianSelectionShare: a tenth of a Gaussian statement's delta costs
	// its mu under 1% at the deltas of the accuracy table and lowers the
	// threshold by about 15% against a thousandth.
	GaussianSelectionShare = 0.1
)

// Value is one noisy value a statement draws in every group it releases.
type Value struct {
	// Name says what the value is, for messages and EXPLAIN ("persons",
	// "count(*)", "sum(x - 50)", ...).
	Name string
	// Rows is how many rows one person may add to one group (max_rows); 1
	// for the selection's count of persons.
	Rows int
	// Bound is how much one row moves the value: 1 for a count, c for a sum
	// of values each within [-c, c] after clamping and centring.
	Bound float64
	// Fixed marks a sum of real values, each rounded to a power-of-two
	// quantum q no finer than the noise grid: each then moves the sum by at
	// most Bound + q/2.
	Fixed bool
	// Dim is the number of coordinates per group (a histogram's buckets, a
	// person's rows in one group falling anywhere in it); 0 means 1.
	Dim int
	// Weight is the importance of the value's variance in units of
	// (Rows*Bound)^2; it must be positive.
	Weight float64
	// Selection marks the partition selection's count of persons (at most
	// one value).
	Selection bool
}

// Request is a statement to plan.
type Request struct {
	Values []Value
	// MaxGroups is how many groups one person may add to (max_groups): L1
	// sensitivities grow by it, L2 ones by its square root.
	MaxGroups int
	// Mu > 0 asks for a mu-GDP statement; otherwise Epsilon and Delta.
	Mu             float64
	Epsilon, Delta float64
	// Noise is Auto (or ""), Laplace or Gaussian.
	Noise Law
	// SelectionDelta is the selection's delta_s if the statement (or, for a
	// mu statement, the scope's default) fixes it; 0 asks for the default
	// share of Delta capped by SelectionRoom.
	SelectionDelta float64
	// SelectionRoom is the most delta_s the scope's selections may still
	// spend (used with SelectionDelta = 0; 0 means no cap).
	SelectionRoom float64
}

// Noisy is a Value with its calibrated noise.
type Noisy struct {
	Value
	Law Law
	// Sigma is the Gaussian's scale; Lap the rounded Laplace law.
	Sigma float64
	Lap   release.LaplaceGrid
	// Quantum is a Fixed value's rounding quantum.
	Quantum float64
	// Sensitivity is the value's sensitivity over max_groups groups, as
	// charged: L2 (Gaussian) or L1 plus the Laplace grid.
	Sensitivity float64
	// Mu (Gaussian) or Epsilon (Laplace: Sensitivity/scale) is the value's
	// share of the budget.
	Mu, Epsilon float64
}

// Scale returns the noise's scale: sigma, or the Laplace scale b.
func (n Noisy) Scale() float64 {
	if n.Law == Laplace {
		return n.Lap.Scale
	}
	return n.Sigma
}

// Grid returns the grid the noise is drawn on.
func (n Noisy) Grid() float64 {
	if n.Law == Laplace {
		return n.Lap.Grid
	}
	return release.Grid(n.Sigma)
}

// Variance returns the variance of one coordinate's noise (of the continuous
// law; the grid adds at most grid^2/12).
func (n Noisy) Variance() float64 {
	if n.Law == Laplace {
		return 2 * n.Lap.Scale * n.Lap.Scale
	}
	return n.Sigma * n.Sigma
}

// Plan is a calibrated statement.
type Plan struct {
	Law    Law
	Values []Noisy
	// Mu is a Gaussian statement's mu.
	Mu float64
	// SelectionDelta and Threshold: the partition selection's delta_s and
	// tau (0 without a selection). A group is released when its noisy count
	// of persons is at least Threshold.
	SelectionDelta, Threshold float64
	// Mechanism is what the statement is charged.
	Mechanism mechanism.Mechanism
	// Objective is sum_b W_b Var_b / (Rows_b Bound_b)^2, the quantity the
	// split minimises and noise = 'auto' compares.
	Objective float64
	// Other is the objective of the law not taken under noise = 'auto'
	// (+Inf if it could not be planned), for EXPLAIN.
	Other float64
}

// Selection returns the selection's value, or nil.
func (p *Plan) Selection() *Noisy {
	for i := range p.Values {
		if p.Values[i].Selection {
			return &p.Values[i]
		}
	}
	return nil
}

// GaussianDraws returns how many values the Gaussian sampler draws per
// released group (each pays the sampler's NoiseTV).
func (p *Plan) GaussianDraws() int {
	if p.Law != Gaussian {
		return 0
	}
	n := 0
	for _, v := range p.Values {
		n += v.dim()
	}
	return n
}

func (v Value) dim() int { return max(v.Dim, 1) }

// Make plans a statement.
func Make(r Request) (*Plan, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	switch {
	case r.Mu > 0:
		if r.Noise == Laplace {
			return nil, errors.New("noise = 'laplace' is calibrated from an epsilon budget: give epsilon and delta, not mu")
		}
		return r.gaussian()
	case r.Noise == Laplace:
		return r.laplace()
	case r.Noise == Gaussian:
		return r.gaussian()
	}
	l, lerr := r.laplace()
	g, gerr := r.gaussian()
	switch {
	case lerr != nil && gerr != nil:
		return nil, lerr
	case gerr != nil:
		l.Other = math.Inf(1)
		return l, nil
	case lerr != nil:
		g.Other = math.Inf(1)
		return g, nil
	case l.Objective <= g.Objective:
		l.Other = g.Objective
		return l, nil
	default:
		g.Other = l.Objective
		return g, nil
	}
}

func (r *Request) check() error {
	if len(r.Values) == 0 {
		return errors.New("calibrate: a statement draws at least one value")
	}
	if r.MaxGroups < 1 {
		return fmt.Errorf("calibrate: max_groups must be at least 1, got %d", r.MaxGroups)
	}
	sel := 0
	for _, v := range r.Values {
		if v.Rows < 1 || !(v.Bound > 0) || math.IsInf(v.Bound, 0) || !(v.Weight > 0) || math.IsInf(v.Weight, 0) || v.Dim < 0 {
			return fmt.Errorf("calibrate: value %s needs rows >= 1 and a positive finite bound and weight", v.Name)
		}
		if v.Selection {
			sel++
		}
	}
	if sel > 1 {
		return errors.New("calibrate: at most one selection")
	}
	switch r.Noise {
	case "":
		r.Noise = Auto
	case Auto, Laplace, Gaussian:
	default:
		return fmt.Errorf("unknown noise '%s': OPTIONS noise takes 'auto' (the default), 'laplace' or 'gaussian'", r.Noise)
	}
	if r.Mu > 0 {
		if math.IsInf(r.Mu, 0) {
			return fmt.Errorf("mu must be finite, got %v", r.Mu)
		}
		if sel > 0 && !(r.SelectionDelta > 0 && r.SelectionDelta < 1) {
			return errors.New("calibrate: a mu statement with a selection needs its delta_s")
		}
		return nil
	}
	if !(r.Epsilon > 0) || math.IsInf(r.Epsilon, 0) || !(r.Delta > 0 && r.Delta < 1) {
		return fmt.Errorf("epsilon must be positive and finite and delta in (0, 1), got %v and %v", r.Epsilon, r.Delta)
	}
	if sel > 0 && r.SelectionDelta != 0 && !(r.SelectionDelta > 0 && r.SelectionDelta < r.Delta) {
		return fmt.Errorf("selection_delta %v must lie in (0, delta = %v)", r.SelectionDelta, r.Delta)
	}
	return nil
}

// hasSelection reports whether the statement selects partitions.
func (r *Request) hasSelection() bool {
	for _, v := range r.Values {
		if v.Selection {
			return true
		}
	}
	return false
}

// selectionDelta returns delta_s under a law whose default share is share.
func (r *Request) selectionDelta(share float64) float64 {
	if !r.hasSelection() {
		return 0
	}
	if r.SelectionDelta > 0 {
		return r.SelectionDelta
	}
	d := share * r.Delta
	if r.SelectionRoom > 0 {
		d = math.Min(d, r.SelectionRoom)
	}
	return d
}

// norm returns the value's per-group sensitivity Rows*Bound, the unit of the
// objective.
func (v Value) norm() float64 { return float64(v.Rows) * v.Bound }
