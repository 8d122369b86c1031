package pld

import (
	"errors"
	"fmt"
	"math"
)

// GaussianDelta returns delta(epsilon) of a mu-GDP mechanism (exact, Dong,
// Roth, Su 2019, Cor. 2.13), Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
// computed in log space; accountant.Delta is this function.
func GaussianDelta(mu, epsilon float64) (float64, error) {
	if !finitePos(mu) {
		return 0, fmt.Errorf("pld: mu must be positive and finite, got %v", mu)
	}
	if !(epsilon >= 0) || math.IsInf(epsilon, 1) {
		return 0, fmt.Errorf("pld: epsilon must be a finite number >= 0, got %v", epsilon)
	}
	d, _ := gaussDelta(mu, epsilon)
	return d, nil
}

// GaussianEpsilon returns the smallest epsilon >= 0 such that a mu-GDP
// mechanism is (epsilon, delta)-DP. A calibration target stated as mu
// converts to an epsilon target with it.
func GaussianEpsilon(mu, delta float64) (float64, error) {
	if !finitePos(mu) {
		return 0, fmt.Errorf("pld: mu must be positive and finite, got %v", mu)
	}
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("pld: delta must lie strictly between 0 and 1, got %v", delta)
	}
	f := func(e float64) float64 { d, _ := gaussDelta(mu, e); return d }
	if f(0) <= delta {
		return 0, nil
	}
	lo, hi := 0.0, math.Max(1, mu*mu)
	for f(hi) > delta {
		lo, hi = hi, 2*hi
		if hi > 1e6 {
			return math.Inf(1), nil
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-15*hi; i++ {
		mid := lo + (hi-lo)/2
		if f(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// GaussianMuFor returns the largest mu (to double precision) with
// GaussianDelta(mu, eps) <= delta: the mu-GDP level that guarantees
// (eps, delta). It returns a value >= 1e6 when no mu below that reaches delta.
func GaussianMuFor(eps, delta float64) float64 {
	f := func(m float64) float64 { d, _ := gaussDelta(m, eps); return d }
	lo, hi := 0.0, 1.0
	for f(hi) < delta && hi < 1e6 {
		lo, hi = hi, 2*hi
	}
	for i := 0; i < 100; i++ {
		mid := lo + (hi-lo)/2
		if mid == 0 || f(mid) < delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// CalibrateSubsampledGaussian is Config{}.CalibrateSubsampledGaussian.
func CalibrateSubsampledGaussian(q float64, steps int, epsilon, delta float64) (float64, error) {
	return Config{}.CalibrateSubsampledGaussian(q, steps, epsilon, delta)
}

// CalibrateSubsampledGaussian returns (to a relative 1e-4) the smallest noise
// multiplier sigma such that steps compositions of the Poisson-subsampled
// Gaussian mechanism with rate q are (epsilon, delta)-DP by this package's
// rigorous accounting: a bisection on log sigma started from the central
// limit theorem's guess. The sigma returned has itself been checked:
// its rigorous epsilon does not exceed the target.
func (c Config) CalibrateSubsampledGaussian(q float64, steps int, epsilon, delta float64) (float64, error) {
	sigma, _, err := c.CalibrateSubsampledGaussianPLD(q, steps, epsilon, delta)
	return sigma, err
}

// CalibrateSubsampledGaussianPLD is [Config.CalibrateSubsampledGaussian]
// that also returns the PLD of the sigma it returns, composed over steps
// steps, exactly as c.SubsampledGaussian(q, sigma) self-composed steps times
// gives it (the search computed it already), or nil when the search returned
// without computing it (a sigma below 1e-4).
func (c Config) CalibrateSubsampledGaussianPLD(q float64, steps int, epsilon, delta float64) (float64, *PLD, error) {
	if !(q > 0 && q <= 1) {
		return 0, nil, fmt.Errorf("pld: sampling rate q must lie in (0, 1], got %v", q)
	}
	if steps < 1 {
		return 0, nil, fmt.Errorf("pld: steps must be >= 1, got %d", steps)
	}
	if !(epsilon > 0) || math.IsInf(epsilon, 1) {
		return 0, nil, fmt.Errorf("pld: target epsilon must be positive and finite, got %v", epsilon)
	}
	if !(delta > 0 && delta < 1) {
		return 0, nil, fmt.Errorf("pld: delta must lie strictly between 0 and 1, got %v", delta)
	}
	// excess(sigma) = epsilon(sigma) - target; it decreases with sigma. A
	// sigma whose epsilon cannot be certified counts as too little noise.
	// last is the PLD of the last sigma excess computed.
	var last *PLD
	excess := func(sigma float64) (float64, error) {
		p, err := c.SubsampledGaussian(q, sigma)
		if err != nil {
			return 0, err
		}
		if p, err = p.SelfCompose(steps); err != nil {
			return 0, err
		}
		last = p
		e, err := p.Epsilon(delta)
		if errors.Is(err, ErrRoundoff) {
			return math.Inf(1), nil
		}
		if err != nil {
			return 0, err
		}
		return e - epsilon, nil
	}
	// Central-limit guess: mu = q sqrt(T (e^(1/sigma^2) - 1)).
	mu := GaussianMuFor(epsilon, delta)
	r := mu * mu / (q * q * float64(steps))
	sigma := 1.0
	if r > 0 && !math.IsInf(r, 0) {
		sigma = 1 / math.Sqrt(math.Log1p(r))
	}
	if !(sigma > 1e-3) {
		sigma = 1e-3
	}
	// Bracket: flo > 0 at lo (too little noise), fhi <= 0 at hi (enough).
	f, err := excess(sigma)
	if err != nil {
		return 0, nil, err
	}
	lo, hi, flo, fhi := sigma, sigma, f, f
	hiP := last // the PLD of hi
	if f <= 0 {
		for fhi, hi = f, sigma; ; {
			lo = hi / 1.25
			if lo < 1e-4 {
				return hi, hiP, nil // any sigma this small will do; stop here
			}
			if flo, err = excess(lo); err != nil {
				return 0, nil, err
			}
			if flo > 0 {
				break
			}
			hi, fhi, hiP = lo, flo, last
		}
	} else {
		for flo, lo = f, sigma; ; {
			hi = lo * 1.25
			if hi > 1e6 {
				return 0, nil, fmt.Errorf("pld: no sigma up to 1e6 reaches epsilon %g at delta %g", epsilon, delta)
			}
			if fhi, err = excess(hi); err != nil {
				return 0, nil, err
			}
			if fhi <= 0 {
				hiP = last
				break
			}
			lo, flo = hi, fhi
		}
	}
	// Illinois (modified regula falsi) on log sigma: superlinear on this
	// smooth monotone function, and the bracket always holds a checked hi.
	// wlo, whi are the interpolation weights (the values, halved on a stall).
	wlo, whi, side := flo, fhi, 0
	for hi/lo-1 > 1e-4 && fhi < -1e-5*epsilon {
		x := math.Sqrt(lo * hi)
		if !math.IsInf(wlo, 1) && side > -3 && side < 3 {
			l, h := math.Log(lo), math.Log(hi)
			if y := math.Exp(h - whi*(h-l)/(whi-wlo)); y > lo && y < hi {
				x = y
			}
		} else {
			side = 0
		}
		fx, err := excess(x)
		if err != nil {
			return 0, nil, err
		}
		if fx <= 0 {
			hi, fhi, whi, hiP = x, fx, fx, last
			if side < 0 {
				wlo /= 2
			}
			side = min(side, 0) - 1
		} else {
			lo, flo, wlo = x, fx, fx
			if side > 0 {
				whi /= 2
			}
			side = max(side, 0) + 1
		}
	}
	return hi, hiP, nil
}
