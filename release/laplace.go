package release

import (
	"fmt"
	"math"
	mrand "math/rand/v2"
)

// Laplace and truncated Laplace noise on a power-of-two grid.
//
// Both mechanisms release y = (r + k) g for r = round(x/g) and an integer k
// drawn from the *rounded* law k = round(Z/g) of the continuous noise Z. As r is
// an integer, r + k = round(r + Z/g): the release is a post-processing of the
// continuous mechanism r g + Z, whose input r g moves by at most S + g between
// neighbours (S the sensitivity, g the grid). So each rounded law is charged
// as its continuous law at sensitivity S + g, and the grid sampler itself is
// exact: k is drawn with integer arithmetic only (Bernoulli(exp(-n/d)) and
// geometric draws of Canonne, Kamath and Steinke, "The Discrete Gaussian for
// Differential Privacy", arXiv:2004.00010), from the Noise's word stream.
// No floating-point inverse CDF is involved and y is a fixed function of the
// integer r + k.
//
// The grid g is a power of two at most 2^-15 times both the scale b and the
// sensitivity S, and the scale in grid units s = b/g is an integer (at least
// 2^15, below 2^40), so that the rounded law is sampled exactly:
//
//	P(k = 0) = 1 - e^(-1/(2s)),  P(k = ±j) = e^(-(j - 1/2)/s) (1 - e^(-1/s)) / 2,  j >= 1.
//
// The truncated Laplace law of scale b on [-A, A] (Geng, Ding, Guo, Kumar,
// "Tight Analysis of Privacy and Utility Tradeoff in Approximate Differential
// Privacy", arXiv:1810.00877) is used with A = (K + 1/2) g, so that its
// rounded law is the rounded Laplace law conditioned on |k| <= K: it is
// sampled by rejection and |k g| <= K g < A always.

// LaplaceGrid is a calibrated rounded Laplace (or truncated Laplace) law.
type LaplaceGrid struct {
	Grid        float64 // g, a power of two
	Steps       int64   // s = Scale/Grid, an integer
	Scale       float64 // b = s*g
	Sensitivity float64 // S + g (rounded up): the sensitivity the continuous law is charged at
	Epsilon     float64 // the epsilon asked for; Sensitivity/Scale <= Epsilon
	// Truncated Laplace only (MaxSteps > 0): |k| <= MaxSteps, support
	// A = (MaxSteps + 1/2) g, and delta(Epsilon) <= Delta for the continuous
	// law at Sensitivity.
	MaxSteps int64
	Support  float64
	Delta    float64
}

// LaplaceFor calibrates rounded Laplace noise for an epsilon-DP release of a
// scalar of sensitivity S: scale b >= (S + g)/epsilon.
func LaplaceFor(sensitivity, epsilon float64) (LaplaceGrid, error) {
	if !(sensitivity > 0) || math.IsInf(sensitivity, 0) {
		return LaplaceGrid{}, fmt.Errorf("sensitivity must be a positive finite number, got %v", sensitivity)
	}
	if !(epsilon > 0) || math.IsInf(epsilon, 0) {
		return LaplaceGrid{}, fmt.Errorf("epsilon must be a positive finite number, got %v", epsilon)
	}
	base := sensitivity / epsilon
	if !(base >= MinSigma) || math.IsInf(base, 0) || base > 0x1p1000 {
		return LaplaceGrid{}, fmt.Errorf("noise scale sensitivity/epsilon = %g is outside [%g, 2^1000]", base, MinSigma)
	}
	// The grid is fine against both the scale and the sensitivity, so the
	// grid's share of the charged sensitivity S + g is below 2^-15.
	g := Grid(min(base, sensitivity))
	sp := math.Nextafter(sensitivity+g, math.Inf(1)) // S + g, rounded up
	if r := sp / (epsilon * g); !(r < 1<<40) {
		return LaplaceGrid{}, fmt.Errorf("epsilon = %g is too small: the noise would span %g grid steps (limit 2^40)", epsilon, r)
	}
	s := int64(math.Ceil(sp / (epsilon * g)))
	for sp/(float64(s)*g) > epsilon*(1-0x1p-50) {
		s++ // the true ratio is then below epsilon despite rounding
	}
	return LaplaceGrid{Grid: g, Steps: s, Scale: float64(s) * g, Sensitivity: sp, Epsilon: epsilon}, nil
}

// TruncatedLaplaceFor calibrates rounded truncated Laplace noise for an
// (epsilon, delta)-DP release of a scalar of sensitivity S, delta in (0, 1/2):
// scale b = s g >= (S + g)/epsilon and support
// A >= b log(1 + (e^epsilon - 1)/(2 delta)), as in Geng et al.
func TruncatedLaplaceFor(sensitivity, epsilon, delta float64) (LaplaceGrid, error) {
	if !(delta > 0 && delta < 0.5) {
		return LaplaceGrid{}, fmt.Errorf("delta must lie strictly between 0 and 0.5, got %v", delta)
	}
	l, err := LaplaceFor(sensitivity, epsilon)
	if err != nil {
		return l, err
	}
	// a = A/b; a margin of 1e-12 covers the rounding of expm1, log1p and /.
	a := math.Log1p(math.Expm1(epsilon)/(2*delta)) * (1 + 1e-12)
	k := math.Ceil(a*float64(l.Steps) - 0.5)
	if !(k < 1<<52) {
		return LaplaceGrid{}, fmt.Errorf("the support of the truncated Laplace law is %g grid steps (limit 2^52): delta is too small for this epsilon", k)
	}
	l.MaxSteps = int64(max(k, 1))
	l.Support = (float64(l.MaxSteps) + 0.5) * l.Grid
	// delta(eps) = (e^t - 1)/(2 (e^a' - 1)) for shift t = S'/b <= eps and a' = A/b.
	ap := (float64(l.MaxSteps) + 0.5) / float64(l.Steps)
	l.Delta = math.Expm1(epsilon) / (2 * math.Expm1(ap)) * (1 + 1e-12)
	return l, nil
}

// ExpectedAbs returns E|Z| of the continuous law (Laplace: b; truncated: the
// closed form b (1 - (1 + a) e^-a)/(1 - e^-a), a = A/b).
func (l LaplaceGrid) ExpectedAbs() float64 {
	if l.MaxSteps == 0 {
		return l.Scale
	}
	a := l.Support / l.Scale
	return l.Scale * (1 - (1+a)*math.Exp(-a)) / -math.Expm1(-a)
}

// ExpectedSquare returns E[Z^2] of the continuous law (Laplace: 2 b^2;
// truncated: 2 b^2 (1 - (1 + a + a^2/2) e^-a)/(1 - e^-a)).
func (l LaplaceGrid) ExpectedSquare() float64 {
	b := l.Scale
	if l.MaxSteps == 0 {
		return 2 * b * b
	}
	a := l.Support / b
	return 2 * b * b * (1 - (1+a+a*a/2)*math.Exp(-a)) / -math.Expm1(-a)
}

// AddLaplace rounds x to the grid of l and adds one draw of its rounded law
// (truncated when l.MaxSteps > 0). It panics on an uncalibrated l.
func (n *Noise) AddLaplace(x float64, l LaplaceGrid) float64 {
	if !(l.Steps >= 1 && l.Grid > 0) || l.Scale != float64(l.Steps)*l.Grid {
		panic(fmt.Sprintf("release: uncalibrated Laplace grid %+v", l))
	}
	g := l.Grid
	if math.Abs(x) < 0x1p52*g { // larger |x| (and NaN, Inf) are on the grid already
		x = math.RoundToEven(x/g) * g // g is a power of two: the division is exact
	}
	return x + float64(roundedLaplace(n.r, l.Steps, l.MaxSteps))*g
}

// roundedLaplace draws k = round(L), L ~ Laplace(s) (integer s >= 1), exactly;
// with kmax > 0 it draws k conditioned on |k| <= kmax.
func roundedLaplace(r *mrand.Rand, s, kmax int64) int64 {
	for {
		var m int64
		if bernExpNeg(r, 1, 2*uint64(s)) { // |L| >= 1/2
			m = 1 + geometric(r, uint64(s))
		}
		if kmax > 0 && m > kmax {
			continue // rejection keeps the conditional law exact
		}
		if m != 0 && r.Uint64()&1 == 1 {
			return -m
		}
		return m
	}
}

// bernExpNeg returns true with probability exp(-num/den), num <= den, exactly:
// with K the first k >= 1 at which Bernoulli(num/(den k)) fails, P(K odd) =
// exp(-num/den) (Canonne, Kamath, Steinke, Algorithm 1).
func bernExpNeg(r *mrand.Rand, num, den uint64) bool {
	k := uint64(1)
	for ; k < 1<<20 && r.Uint64N(den*k) < num; k++ {
	}
	return k&1 == 1
}

// geometric returns X >= 0 with P(X = x) = (1 - e^(-1/s)) e^(-x/s), s >= 1, as
// U + s V with U uniform on {0..s-1} accepted with probability e^(-U/s) and V
// counting successes of Bernoulli(e^-1) (Canonne, Kamath, Steinke, Algorithm 2).
func geometric(r *mrand.Rand, s uint64) int64 {
	var u uint64
	for {
		u = r.Uint64N(s)
		if bernExpNeg(r, u, s) {
			break
		}
	}
	var v uint64
	for bernExpNeg(r, 1, 1) {
		v++
	}
	return int64(u + s*v)
}
