package accountant

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/mechanism"
)

// CalibrateSubsampledSigmaAfter returns a noise multiplier sigma such that the
// composition of prior with steps Poisson-subsampled Gaussian steps of rate q
// and multiplier sigma is (epsilon, delta)-DP by the rigorous accountant: the
// release that follows a charged pre-computation (dp_avgmix's noisy count)
// takes what the pre-computation leaves of the budget, and the pair is charged
// as one [KindComposite] entry.
//
// It searches the epsilon target of the subsampled part (starting from the
// GDP split sqrt(mu^2 - mu_prior^2)) with [CalibrateSubsampledSigma] and
// checks every candidate on the composition itself: the sigma returned has a
// certified total of at most epsilon, and within 0.1% of it when the search
// converges.
func CalibrateSubsampledSigmaAfter(prior mechanism.Mechanism, q float64, steps int, epsilon, delta float64) (float64, error) {
	if err := prior.Validate(); err != nil {
		return 0, err
	}
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	if !(epsilon > 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("target epsilon must be positive and finite, got %v", epsilon)
	}
	alone, err := RigorousEpsilon([]mechanism.Mechanism{prior}, delta)
	if err != nil {
		return 0, err
	}
	if !(alone < epsilon) {
		return 0, fmt.Errorf("the first part alone costs epsilon %.6g, leaving nothing of the target %.6g", alone, epsilon)
	}
	// Start from the GDP split when the prior is Gaussian, else from half of
	// what the prior leaves.
	e := (epsilon - alone) / 2
	if prior.IsGaussian() {
		if mu, err := Mu(epsilon, delta); err == nil {
			if rest := mu*mu - prior.GDPMu()*prior.GDPMu(); rest > 0 {
				if g, err := Epsilon(math.Sqrt(rest), delta); err == nil && g > 0 {
					e = g
				}
			}
		}
	}
	total := func(sigma float64) (float64, error) {
		return RigorousEpsilon([]mechanism.Mechanism{prior, {Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: sigma, Steps: steps}}, delta)
	}
	lo, hi := 0.0, math.Inf(1) // part targets known feasible (lo) and infeasible (hi)
	best := 0.0
	for range 16 {
		sigma, err := CalibrateSubsampledSigma(q, steps, e, delta)
		if err != nil {
			return 0, err
		}
		tot, err := total(sigma)
		if err != nil {
			return 0, err
		}
		if tot <= epsilon {
			best, lo = sigma, e
			if tot >= epsilon*(1-1e-3) {
				return sigma, nil
			}
		} else {
			hi = e
		}
		// The total moves with the part's target at a slope near 1.
		next := e + (epsilon-tot)*0.98
		if !(next > lo && next < hi) {
			if math.IsInf(hi, 1) {
				next = 2 * e
			} else {
				next = (lo + hi) / 2
			}
		}
		if !(next > 0) || math.Abs(next-e) <= 1e-9*epsilon {
			break
		}
		e = next
	}
	if best > 0 {
		return best, nil
	}
	return 0, errors.New("no noise multiplier meets the combined target")
}
