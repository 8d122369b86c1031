package pld

import (
	"math"

	"github.com/dpsql/dpsql/internal/normal"
)

// LogPhi returns log Phi(x), the log of the standard normal CDF, with full
// relative precision far into the lower tail ([normal.LogPhi]).
func LogPhi(x float64) float64 { return normal.LogPhi(x) }

func logPhi(x float64) float64 { return normal.LogPhi(x) }

// logPhiErr bounds the absolute error of logPhi(x) when x itself carries a
// relative error of about a few ulps: the evaluation error (a few ulps of
// |log Phi|, plus erfc's own error) and the propagated argument error
// |x| * 4u * d/dx log Phi(x), with d/dx log Phi(x) <= |x| + 1 for x < 0.
func logPhiErr(x, logPhiX float64) float64 {
	lp := math.Abs(logPhiX)
	d := 1.0
	if x < 0 {
		d = -x + 1
	}
	return 8*unitRoundoff*(1+lp) + 4*unitRoundoff*math.Abs(x)*d
}

// gaussDelta returns the hockey-stick divergence delta(eps) of the pair
// (N(mu,1), N(0,1)), Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), for any
// real eps, with a bound on its absolute evaluation error. It is computed as
// Phi(a) (1 - exp(eps + log Phi(b) - log Phi(a))) to avoid cancellation.
func gaussDelta(mu, eps float64) (float64, float64) {
	a := -eps/mu + mu/2
	b := -eps/mu - mu/2
	la, lb := logPhi(a), logPhi(b)
	ea, eb := logPhiErr(a, la), logPhiErr(b, lb)
	return hockey(la, eps+lb, ea, eb+4*unitRoundoff*math.Abs(eps))
}

// hockey returns exp(la) - exp(lb) (0 if lb >= la) and a bound on its
// absolute error, given absolute error bounds ea, eb on la and lb. With
// d = lb - la < 0 the value is exp(la) * (-expm1(d)); its relative error is
// at most ea + e^d/(1 - e^d) (ea + eb), plus a few ulps.
func hockey(la, lb, ea, eb float64) (float64, float64) {
	if math.IsInf(la, -1) {
		return 0, 0
	}
	d := lb - la
	if !(d < 0) { // only by round-off (or both -Inf)
		return 0, math.Exp(la) * (ea + eb)
	}
	g := -math.Expm1(d)
	v := math.Exp(la) * g
	rel := ea + math.Exp(d)/g*(ea+eb) + 8*unitRoundoff
	return v, v*rel + math.SmallestNonzeroFloat64
}
