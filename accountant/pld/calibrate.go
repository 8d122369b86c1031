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

// calibrateHook, when set by a test, sees every sigma the calibration
// evaluates.
var calibrateHook func(sigma float64)

// maxSigma is the largest noise multiplier the calibration proposes or
// returns.
const maxSigma = 1e6

// coarseFactor is how much coarser the calibration's first stage grid is.
const coarseFactor = 8

// bandEps is how far below its target (relative) a calibrated sigma's
// epsilon may be. Epsilon falls at least as fast as 1/sigma here (the
// central-limit level q sqrt(T (e^(1/sigma^2) - 1)) does, and epsilon grows
// faster than linearly in mu), so such a sigma is within about bandEps
// (relative) of the smallest one.
const bandEps = 1e-4

// CalibrateSubsampledGaussian is Config{}.CalibrateSubsampledGaussian.
func CalibrateSubsampledGaussian(q float64, steps int, epsilon, delta float64) (float64, error) {
	return Config{}.CalibrateSubsampledGaussian(q, steps, epsilon, delta)
}

// CalibrateSubsampledGaussian returns (to a relative 1e-4) the smallest noise
// multiplier sigma such that steps compositions of the Poisson-subsampled
// Gaussian mechanism with rate q are (epsilon, delta)-DP by this package's
// rigorous accounting: two evaluations on a coarser grid and secant steps
// guided by the central limit theorem, then, if they have not converged, a
// bisection (Illinois) on log sigma. The sigma returned has itself been
// checked: its rigorous epsilon does not exceed the target.
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
		if calibrateHook != nil {
			calibrateHook(sigma)
		}
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
	sigma := sigmaForCLT(mu, q, steps)
	if !(sigma > 1e-3) {
		sigma = 1e-3
	}
	// The bracket: lo has too little noise (flo > 0; lo = 0: none found
	// yet), hi enough (fhi <= 0, its PLD hiP; hi = +Inf: none yet).
	lo, hi := 0.0, math.Inf(1)
	flo, fhi := math.Inf(1), math.Inf(-1)
	var hiP *PLD
	done := func() bool {
		return !math.IsInf(hi, 1) && (fhi >= -bandEps*epsilon || lo > 0 && hi/lo-1 <= 1e-4)
	}
	// Secant steps in the central limit theorem's coordinates, usually done
	// after two or three evaluations (the bisection below took seven at
	// Fashion-MNIST's shape). With u = log mu_CLT(sigma) and v = log of the
	// mu-GDP level of the rigorous epsilon (GaussianMuFor), v is close to
	// u plus a constant: the first step assumes slope 1, the next ones take
	// the secant, each aiming at the middle of the accepted band
	// [(1 - bandEps) epsilon, epsilon]. The steps only propose
	// where to evaluate: every sigma is checked by excess, and a step that
	// leaves the bracket, or a fourth one, hands over to the bisection.
	aim := math.Log(GaussianMuFor(epsilon*(1-bandEps/2), delta))
	// A coarse first stage: the same accounting on a grid coarseFactor
	// times coarser costs a fraction of a fine evaluation and overstates
	// epsilon by a fraction of a percent (Fashion-MNIST's shape: 38 ms and
	// +0.35% against 95 ms). Two coarse evaluations, the guess and a step of
	// slope 1, give the local slope and a start for the fine steps; nothing
	// coarse is ever returned or compared with the target.
	slope0 := 1.0
	if cc, err := c.withDefaults(); err == nil && cc.Interval*coarseFactor <= 1 {
		cc.Interval *= coarseFactor
		level := func(sigma float64) (u, v float64, ok bool) {
			p, err := cc.SubsampledGaussian(q, sigma)
			if err == nil {
				p, err = p.SelfCompose(steps)
			}
			if err != nil {
				return 0, 0, false
			}
			e, err := p.Epsilon(delta)
			if err != nil {
				return 0, 0, false
			}
			u, v = math.Log(muForCLT(sigma, q, steps)), math.Log(GaussianMuFor(e, delta))
			return u, v, !math.IsInf(u, 0) && !math.IsNaN(u) && !math.IsInf(v, 0) && !math.IsNaN(v)
		}
		if u0, v0, ok := level(sigma); ok {
			s1 := sigmaForCLT(math.Exp(u0+aim-v0), q, steps)
			if u1, v1, ok := level(s1); ok && u1 != u0 {
				if s := (v1 - v0) / (u1 - u0); s > 0.5 && s < 2 {
					slope0 = s
				}
				sigma = sigmaForCLT(math.Exp(u1+(aim-v1)/slope0), q, steps)
			}
		}
		if !(sigma > 1e-3) {
			sigma = 1e-3
		}
		sigma = min(sigma, maxSigma)
	}
	var pu, pv float64
	for i := range 4 {
		f, err := excess(sigma)
		if err != nil {
			return 0, nil, err
		}
		if f <= 0 {
			if sigma < hi {
				hi, fhi, hiP = sigma, f, last
			}
		} else if sigma > lo {
			lo, flo = sigma, f
		}
		if done() {
			return hi, hiP, nil
		}
		if math.IsInf(f, 1) {
			break // an epsilon that could not be certified has no level
		}
		u := math.Log(muForCLT(sigma, q, steps))
		v := math.Log(GaussianMuFor(f+epsilon, delta))
		if math.IsInf(u, 0) || math.IsNaN(u) || math.IsInf(v, 0) || math.IsNaN(v) {
			break
		}
		slope := slope0
		if i > 0 && u != pu {
			if s := (v - pv) / (u - pu); s > 0.5 && s < 2 {
				slope = s
			}
		}
		pu, pv = u, v
		next := sigmaForCLT(math.Exp(u+(aim-v)/slope), q, steps)
		if !(next > lo && next < hi) || next > maxSigma || i == 3 {
			break
		}
		sigma = next
	}
	// Bracket from what the steps found: down from hi by factors of 1.25
	// until too little noise, or up from lo until enough.
	switch {
	case lo == 0:
		for {
			next := hi / 1.25
			if next < 1e-4 {
				return hi, hiP, nil // any sigma this small will do; stop here
			}
			f, err := excess(next)
			if err != nil {
				return 0, nil, err
			}
			if f > 0 {
				lo, flo = next, f
				break
			}
			hi, fhi, hiP = next, f, last
		}
	case math.IsInf(hi, 1):
		for {
			next := lo * 1.25
			if next > maxSigma {
				return 0, nil, fmt.Errorf("pld: no sigma up to 1e6 reaches epsilon %g at delta %g", epsilon, delta)
			}
			f, err := excess(next)
			if err != nil {
				return 0, nil, err
			}
			if f <= 0 {
				hi, fhi, hiP = next, f, last
				break
			}
			lo, flo = next, f
		}
	}
	// Illinois (modified regula falsi) on log sigma: superlinear on this
	// smooth monotone function, and the bracket always holds a checked hi.
	// wlo, whi are the interpolation weights (the values, halved on a stall).
	wlo, whi, side := flo, fhi, 0
	for hi/lo-1 > 1e-4 && fhi < -bandEps*epsilon {
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

// muForCLT is the central limit theorem's mu-GDP level of steps
// Poisson-subsampled Gaussian steps at rate q with noise multiplier sigma,
// q sqrt(steps (e^(1/sigma^2) - 1)) (Bu, Dong, Long, Su, "Deep Learning
// with Gaussian Differential Privacy", arXiv 1911.11607). It only guides
// the search.
func muForCLT(sigma, q float64, steps int) float64 {
	return q * math.Sqrt(float64(steps)*math.Expm1(1/(sigma*sigma)))
}

// sigmaForCLT inverts muForCLT: the sigma whose central-limit level is mu
// (1 when mu is out of range).
func sigmaForCLT(mu, q float64, steps int) float64 {
	r := mu * mu / (q * q * float64(steps))
	if !(r > 0) || math.IsInf(r, 0) {
		return 1
	}
	return 1 / math.Sqrt(math.Log1p(r))
}
