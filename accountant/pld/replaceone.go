package pld

import (
	"fmt"
	"math"
)

// ---- Poisson-subsampled Gaussian, replace-one neighbours ----

// subReplace is the pair ((1-q) N(0, s^2) + q N(1, s^2), (1-q) N(0, s^2) +
// q N(-1, s^2)): one Poisson-subsampled step at unit sensitivity when one row
// is replaced by another (the replaced row moves the sum by +1 if sampled,
// its replacement by -1, each with probability q, independently under the
// coupling that samples the same position). It is symmetric under o -> -o,
// so one curve serves both directions. Its loss
//
//	L(o) = log(1-q + q e^((2o-1)/(2s^2))) - log(1-q + q e^((-2o-1)/(2s^2)))
//
// increases from -inf to +inf, so delta(eps) = P(o > o*) - e^eps Q(o > o*)
// with L(o*) = eps. o* is bracketed by bisection on L evaluated with an
// error bound, so that the bracket [lo, hi] surely holds o*; the value is
// taken at hi, where P(o > hi) - e^eps Q(o > hi) falls short of delta(eps) by
// the integral of p - e^eps q over [o*, hi], at most
// (hi - lo) e^eps max(q) expm1(L(hi) - eps), which is added to the error.
type subReplace struct{ q, sigma float64 }

// loss returns L(o) and a bound on its absolute evaluation error.
func (c subReplace) loss(o float64) (float64, float64) {
	s2 := c.sigma * c.sigma
	a := (2*o - 1) / (2 * s2)
	b := (-2*o - 1) / (2 * s2)
	l1q, lq := math.Log1p(-c.q), math.Log(c.q)
	la, lb := logAddExp(l1q, lq+a), logAddExp(l1q, lq+b)
	l := la - lb
	return l, 16 * unitRoundoff * (math.Abs(a) + math.Abs(b) + math.Abs(lq) + math.Abs(l1q) + math.Abs(la) + math.Abs(lb) + 2)
}

// logAddExp returns log(e^x + e^y).
func logAddExp(x, y float64) float64 {
	if x < y {
		x, y = y, x
	}
	if math.IsInf(y, -1) {
		return x
	}
	return x + math.Log1p(math.Exp(y-x))
}

// tail returns log((1-q) Phi(-t/s) + q Phi((shift-t)/s)), the log of the
// mass of (1-q) N(0, s^2) + q N(shift, s^2) above t, and its error bound.
func (c subReplace) tail(t, shift float64) (float64, float64) {
	x0, x1 := -t/c.sigma, (shift-t)/c.sigma
	p0, p1 := logPhi(x0), logPhi(x1)
	e := math.Max(logPhiErr(x0, p0), logPhiErr(x1, p1))
	v := logAddExp(math.Log1p(-c.q)+p0, math.Log(c.q)+p1)
	return v, e + 8*unitRoundoff*(math.Abs(v)+math.Abs(math.Log(c.q))+1)
}

func (c subReplace) delta(eps float64) (float64, float64) {
	// Bracket o*: L(lo) < eps < L(hi) surely, L(0) = 0.
	below := func(o float64) bool { l, e := c.loss(o); return l+e < eps }
	above := func(o float64) bool { l, e := c.loss(o); return l-e > eps }
	lo, hi := 0.0, 0.0
	step := 1.0
	if eps >= 0 {
		for !above(hi) {
			lo, hi = hi, hi+step
			step *= 2
			if step > 1e300 {
				return 0, 1 // cannot bracket: claim nothing
			}
		}
		if !below(lo) {
			lo = -1
			for !below(lo) {
				lo *= 2
			}
		}
	} else {
		for !below(lo) {
			hi, lo = lo, lo-step
			step *= 2
			if step > 1e300 {
				return 0, 1
			}
		}
		if !above(hi) {
			hi = 1
			for !above(hi) {
				hi *= 2
			}
		}
	}
	// Narrow both ends: lo to the largest point surely below o*, hi to the
	// smallest surely above (between them L is within its error of eps).
	for l, r := lo, hi; ; {
		m := l + (r-l)/2
		if m <= l || m >= r {
			break
		}
		if below(m) {
			l, lo = m, m
		} else {
			r = m
		}
	}
	for l, r := lo, hi; ; {
		m := l + (r-l)/2
		if m <= l || m >= r {
			break
		}
		if above(m) {
			r, hi = m, m
		} else {
			l = m
		}
	}
	lp, ep := c.tail(hi, 1)
	lq, eq := c.tail(hi, -1)
	v, e := hockey(lp, eps+lq, ep, eq+4*unitRoundoff*math.Abs(eps))
	lh, eh := c.loss(hi)
	gap := math.Max(0, math.Expm1(lh+eh-eps))
	e += (hi - lo) * math.Exp(eps) / (c.sigma * math.Sqrt(2*math.Pi)) * gap * (1 + 8*unitRoundoff)
	return v, e
}

// SubsampledGaussianReplaceOne returns the PLD of one step of the
// Poisson-subsampled Gaussian mechanism (rate q, noise multiplier sigma) for
// replace-one neighbours: the pair (1-q) N(0, sigma^2) + q N(1, sigma^2)
// versus (1-q) N(0, sigma^2) + q N(-1, sigma^2) at unit sensitivity. This is
// not two composed add/remove steps: under Poisson sampling group privacy is
// not composition.
func (c Config) SubsampledGaussianReplaceOne(q, sigma float64) (*PLD, error) {
	if !(q > 0 && q <= 1) {
		return nil, fmt.Errorf("pld: sampling rate q must lie in (0, 1], got %v", q)
	}
	if !finitePos(sigma) {
		return nil, fmt.Errorf("pld: noise multiplier sigma must be positive and finite, got %v", sigma)
	}
	if q == 1 {
		return c.GaussianMu(2 / sigma) // N(1, s^2) vs N(-1, s^2)
	}
	return c.fromMechanism(mechanism{rem: subReplace{q, sigma}})
}
