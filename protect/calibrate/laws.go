package calibrate

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// step is the PLD accountant's loss grid: its certified epsilon exceeds the
// exact one by about one or two steps (a shift by -log(1-delta_s) is
// rounded up to whole steps, and the curve is discretised).
const step = pld.DefaultInterval

// gaussian plans the statement under the Gaussian.
func (r *Request) gaussian() (*Plan, error) {
	p := &Plan{Law: Gaussian, Mu: r.Mu}
	if r.Mu > 0 {
		if r.hasSelection() {
			p.SelectionDelta = r.SelectionDelta
		}
	} else {
		p.SelectionDelta = r.selectionDelta(GaussianSelectionShare)
		mu, err := certifiedMu(r.Epsilon, r.Delta, p.SelectionDelta)
		if err != nil {
			return nil, err
		}
		p.Mu = mu
	}
	p.Mechanism = mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: p.Mu}
	if p.SelectionDelta > 0 {
		p.Mechanism = mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: p.Mu, Delta: p.SelectionDelta}
	}
	// mu_b^2 proportional to sqrt(W_b).
	var sum float64
	for _, v := range r.Values {
		sum += math.Sqrt(v.Weight)
	}
	rk := math.Sqrt(float64(r.MaxGroups))
	for _, v := range r.Values {
		n := Noisy{Value: v, Law: Gaussian, Mu: p.Mu * math.Sqrt(math.Sqrt(v.Weight)/sum)}
		s0 := rk * float64(v.Rows)
		if v.Fixed {
			// Values are rounded to the quantum q, a power of two no finer
			// than the noise grid, so the noisy sum is exact on the grid and
			// each value moves at most q/2 beyond its bound.
			n.Quantum = release.Grid(s0 * v.Bound / n.Mu)
			for range 8 {
				n.Sensitivity = s0 * (v.Bound + n.Quantum/2)
				n.Sigma = n.Sensitivity / n.Mu
				if q := release.Grid(n.Sigma); q > n.Quantum {
					n.Quantum = q
					continue
				}
				break
			}
		} else {
			// Counts are integers: on the grid while it is at most 1.
			n.Sensitivity = s0 * v.Bound
			n.Sigma = n.Sensitivity / n.Mu
			if release.Grid(n.Sigma) > 1 {
				return nil, fmt.Errorf("mu %.3g is too small for %s (its Gaussian noise would exceed 2^16)", p.Mu, v.Name)
			}
		}
		if !(n.Sigma >= release.MinSigma) || math.IsInf(n.Sigma, 0) {
			return nil, fmt.Errorf("the noise of %s is out of range (sigma %g)", v.Name, n.Sigma)
		}
		p.Objective += v.Weight * n.Variance() / (v.norm() * v.norm())
		p.Values = append(p.Values, n)
	}
	if s := p.Selection(); s != nil {
		// A group of one person (count 1, on the grid g) is kept when its
		// rounded noise K = round(Z sigma/g) reaches ceil((tau - 1)/g), with
		// probability at most P(Z >= (tau - 1 - g/2)/sigma): at most
		// delta_s/max_groups for each of the person's groups.
		z := NormalQuantileUpper(p.SelectionDelta / float64(r.MaxGroups))
		p.Threshold = 1 + s.Grid()/2 + s.Sigma*z
	}
	return p, nil
}

// certifiedMu returns the largest mu (to the accountant's grid) for which
// the accountant certifies gaussian_inf{mu, ds} (gaussian{mu} when ds = 0)
// (epsilon, delta)-DP. The loss of the former is the Gaussian's shifted by
// -log(1-ds), plus ds at +infinity, so the exact answer is the mu of
// (epsilon + log(1-ds), delta - ds); the accountant's figure is a step or
// two of its grid above the exact one, and epsilon is lowered by whole steps
// until it certifies.
func certifiedMu(eps, delta, ds float64) (float64, error) {
	eta := -math.Log1p(-ds)
	mech := func(mu float64) mechanism.Mechanism {
		if ds > 0 {
			return mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: mu, Delta: ds}
		}
		return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu}
	}
	for _, j := range []float64{0, 1, 2, 4, 8, 16, 64} {
		e := eps - eta - j*step
		if !(e > 0) {
			break
		}
		mu, err := accountant.Mu(e, delta-ds)
		if err != nil {
			return 0, fmt.Errorf("epsilon %v and delta %v: %w", eps, delta, err)
		}
		got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{mech(mu)}, delta)
		if err != nil {
			return 0, fmt.Errorf("epsilon %v and delta %v: %w", eps, delta, err)
		}
		if got <= eps {
			return mu, nil
		}
	}
	return 0, fmt.Errorf("epsilon %v and delta %v are too small for a Gaussian statement with selection delta %.3g", eps, delta, ds)
}

// laplace plans the statement under Laplace noise.
func (r *Request) laplace() (*Plan, error) {
	if r.Mu > 0 {
		return nil, errors.New("noise = 'laplace' is calibrated from an epsilon budget: give epsilon and delta, not mu")
	}
	ds := r.selectionDelta(LaplaceSelectionShare)
	eta := -math.Log1p(-ds)
	// epsilon_b proportional to W_b^(1/3).
	var sum float64
	for _, v := range r.Values {
		sum += math.Cbrt(v.Weight)
	}
	k := float64(r.MaxGroups)
	build := func(t float64) (*Plan, error) {
		p := &Plan{Law: Laplace, SelectionDelta: ds}
		var parts []mechanism.Mechanism
		for _, v := range r.Values {
			e := t * math.Cbrt(v.Weight) / sum
			n := Noisy{Value: v, Law: Laplace}
			s0 := k * float64(v.Rows)
			sens := s0 * v.Bound
			if v.Fixed {
				// As for the Gaussian: a quantum no finer than the grid.
				n.Quantum = release.Grid(sens / e)
				for range 8 {
					sens = s0 * (v.Bound + n.Quantum/2)
					if g := release.Grid(sens / e); g > n.Quantum {
						n.Quantum = g
						continue
					}
					break
				}
			}
			l, err := release.LaplaceFor(sens, e)
			if err != nil {
				return nil, fmt.Errorf("epsilon %v is too small or too large for %s: %w", r.Epsilon, v.Name, err)
			}
			n.Lap, n.Sensitivity, n.Epsilon = l, l.Sensitivity, l.Sensitivity/l.Scale
			part := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: n.Sensitivity, Epsilon: n.Epsilon}
			if v.Selection {
				part.Kind, part.Delta = mechanism.KindLaplaceInf, ds
				parts = append([]mechanism.Mechanism{part}, parts...)
			} else {
				parts = append(parts, part)
			}
			p.Objective += v.Weight * n.Variance() / (v.norm() * v.norm())
			p.Values = append(p.Values, n)
		}
		p.Mechanism = mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: parts}
		return p, nil
	}
	fits := func(t float64) (*Plan, bool, error) {
		p, err := build(t)
		if err != nil {
			return nil, false, err
		}
		e, err := accountant.RigorousEpsilon([]mechanism.Mechanism{p.Mechanism}, r.Delta)
		if err != nil {
			return nil, false, fmt.Errorf("epsilon %v and delta %v: %w", r.Epsilon, r.Delta, err)
		}
		return p, e <= r.Epsilon, nil
	}
	// Pure composition: the epsilons add, and the selection's part shifts
	// the loss by eta; the accountant's grid costs a step or two.
	t := r.Epsilon - eta - 2*step
	if !(t > 0) {
		return nil, fmt.Errorf("epsilon %v is too small for a Laplace statement", r.Epsilon)
	}
	best, ok, err := fits(t)
	if err != nil {
		return nil, err
	}
	lo, hi := t, t
	if ok {
		// With a delta to spare (no selection, an explicit small
		// selection_delta, many values) the accountant may certify more
		// than pure composition: a single Laplace value at delta certifies
		// epsilon - 2 log(1 - delta). Bracket upwards: 1 + 2^-6, then
		// doublings.
		hi = t * (1 + 0x1p-6)
		for range 40 {
			p, ok, err := fits(hi)
			if err != nil || !ok {
				break
			}
			best, lo, hi = p, hi, 2*hi
		}
	} else {
		for range 16 {
			hi, lo = lo, lo/2
			if best, ok, err = fits(lo); err != nil {
				return nil, err
			} else if ok {
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("epsilon %v and delta %v cannot be met with noise = 'laplace'", r.Epsilon, r.Delta)
		}
	}
	for hi-lo > lo*0x1p-10 {
		m := (lo + hi) / 2
		p, ok, err := fits(m)
		if err != nil {
			return nil, err
		}
		if ok {
			best, lo = p, m
		} else {
			hi = m
		}
	}
	if s := best.Selection(); s != nil {
		best.Threshold = laplaceThreshold(s.Lap, ds, r.MaxGroups)
	}
	return best, nil
}

// laplaceThreshold returns tau for the rounded Laplace law l: a group of one
// person has count 1, rounded to r1 = round(1/g) grid steps, and is kept when
// r1 + K >= T = tau/g, K the rounded noise, with P(K >= j) =
// e^(-(j - 1/2)/s)/2 for j >= 1 (s = scale/g, see release.LaplaceGrid). T is
// the least integer with max_groups such groups kept with probability at
// most delta_s together.
func laplaceThreshold(l release.LaplaceGrid, ds float64, maxGroups int) float64 {
	r1 := math.RoundToEven(1 / l.Grid)
	s := float64(l.Steps)
	j := math.Max(1, math.Ceil(0.5+s*math.Log(float64(maxGroups)/(2*ds))*(1+1e-12)))
	for float64(maxGroups)*0.5*math.Exp(-(j-0.5)/s) > ds {
		j++
	}
	return (r1 + j) * l.Grid
}

// NormalQuantileUpper returns z with P(N(0,1) > z) <= p, the smallest such up
// to rounding: erfcinv gives it, and z is nudged up until erfc confirms, by
// steps that double from 10^-12 of z (so a few steps, not hundreds).
func NormalQuantileUpper(p float64) float64 {
	z := math.Sqrt2 * math.Erfcinv(2*p)
	step := 1e-12 * math.Abs(z)
	for 0.5*math.Erfc(z/math.Sqrt2) > p {
		z = math.Nextafter(z, math.Inf(1)) + step
		step *= 2
	}
	return z
}
