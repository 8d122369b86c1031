package accountant

import (
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant/pld"
)

// LogPhi returns log Phi(x), the log of the standard normal CDF, with full
// relative precision far into the lower tail (where math.Erfc underflows); see
// [pld.LogPhi].
func LogPhi(x float64) float64 { return pld.LogPhi(x) }

// Delta returns delta(epsilon) of a mu-GDP mechanism,
// Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth, Su 2019,
// Corollary 2.13), computed in log space without cancellation
// ([pld.GaussianDelta]).
func Delta(mu, epsilon float64) (float64, error) {
	if err := checkMu(mu); err != nil {
		return 0, err
	}
	if !(epsilon >= 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("epsilon must be a finite number >= 0, got %v", epsilon)
	}
	return pld.GaussianDelta(mu, epsilon)
}

// Epsilon returns the smallest epsilon >= 0 such that a mu-GDP mechanism is
// (epsilon, delta)-DP ([pld.GaussianEpsilon]).
func Epsilon(mu, delta float64) (float64, error) {
	if err := checkMu(mu); err != nil {
		return 0, err
	}
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	return pld.GaussianEpsilon(mu, delta)
}

// Mu returns the largest mu such that mu-GDP implies (epsilon, delta)-DP; a
// Gaussian mechanism with sigma = sensitivity/Mu(epsilon, delta) is the
// analytic Gaussian mechanism of Balle and Wang (2018).
func Mu(epsilon, delta float64) (float64, error) {
	if !(epsilon > 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("epsilon must be a positive finite number, got %v", epsilon)
	}
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	mu := pld.GaussianMuFor(epsilon, delta)
	if mu >= 1e6 {
		return 0, fmt.Errorf("no mu reaches delta = %g at epsilon = %g", delta, epsilon)
	}
	return mu, nil
}

// Compose returns the mu of the composition of mu_i-GDP mechanisms, sqrt(sum mu_i^2).
func Compose(mus ...float64) float64 {
	var s float64
	for _, m := range mus {
		s += m * m
	}
	return math.Sqrt(s)
}

// GaussianMu returns the GDP parameter of the Gaussian mechanism with L2
// sensitivity S and noise scale sigma: exactly S/sigma.
func GaussianMu(sensitivity, sigma float64) float64 { return sensitivity / sigma }

func checkMu(mu float64) error {
	if !(mu > 0) || math.IsInf(mu, 1) {
		return fmt.Errorf("mu must be a positive finite number, got %v", mu)
	}
	return nil
}

func checkDelta(delta float64) error {
	if !(delta > 0 && delta < 1) {
		return fmt.Errorf("delta must lie strictly between 0 and 1, got %v", delta)
	}
	return nil
}
