// Package normal computes the standard normal distribution's log CDF
// accurately far into its lower tail. It imports nothing of dpsql, so that
// both the accountant (package pld) and the mechanisms (package release)
// can use it.
package normal

import "math"

// LogPhi returns log Phi(x), the log of the standard normal CDF, with full
// relative precision far into the lower tail, where math.Erfc underflows
// (past about -38 standard deviations): below -30, Phi(x) = phi(x) M(-x) with
// Mills' ratio M(t) = 1/(t+1/(t+2/(t+3/(t+...)))), 60 terms evaluated bottom-up.
func LogPhi(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case x > -30:
		if x > 5 {
			return math.Log1p(-0.5 * math.Erfc(x/math.Sqrt2))
		}
		return math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
	case math.IsInf(x, -1):
		return math.Inf(-1)
	}
	t := -x
	f := t
	for k := 60; k >= 1; k-- {
		f = t + float64(k)/f
	}
	return -0.5*x*x - 0.5*math.Log(2*math.Pi) - math.Log(f)
}
