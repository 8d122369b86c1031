package pld

import (
	"errors"
	"fmt"
	"math"
)

// ---- truncated Laplace ----

// tlapCurve is the pair (Z + t, Z) for Z the Laplace law of scale 1
// truncated to [-a, a], 0 < t <= a. With c = 1/(2 (1 - e^-a)) its privacy
// loss takes the value +inf with mass c (e^-(a-t) - e^-a) (outputs above a),
// t with mass c (1 - e^-(a-t)), -t with mass c (e^-t - e^-a) and 2z - t on
// (0, t) with density c e^(z-t), so that
//
//	delta(eps) = w_inf + m_t (1 - e^(eps-t))_+ + m_-t (1 - e^(eps+t))_+ + cont(eps),
//	cont(eps)  = c (1 - e^((eps-t)/2))^2 on [-t, t], c (1 - e^-t)(1 - e^eps) below, 0 above.
//
// At eps = t, delta = (e^t - 1)/(2 (e^a - 1)): the delta of Geng et al.
// The noise is symmetric, so the reversed pair has the same curve.
type tlapCurve struct{ t, a float64 }

func (c tlapCurve) masses() (cc, wInf, mT, mMinus float64) {
	cc = 0.5 / -math.Expm1(-c.a)
	wInf = cc * math.Exp(-c.a) * math.Expm1(c.t)
	mT = cc * -math.Expm1(-(c.a - c.t))
	mMinus = cc * (math.Exp(-c.t) - math.Exp(-c.a))
	return
}

func (c tlapCurve) infMass() float64 { _, w, _, _ := c.masses(); return w }

// minLoss is the smallest finite loss, -t (the build's grid starts there).
func (c tlapCurve) minLoss() float64 { return -c.t * (1 + 4*unitRoundoff) }

func (c tlapCurve) delta(eps float64) (float64, float64) {
	cc, wInf, mT, mMinus := c.masses()
	v := wInf
	if eps < c.t {
		v += mT * -math.Expm1(eps-c.t)
		if eps <= -c.t {
			v += mMinus*-math.Expm1(eps+c.t) + cc*-math.Expm1(-c.t)*-math.Expm1(eps)
		} else {
			h := -math.Expm1((eps - c.t) / 2)
			v += cc * h * h
		}
	}
	// Every term is a product of a few exponentials of arguments of size
	// at most |eps| + t + a, each with relative error below 4u(1 + |arg|).
	return v, 32 * unitRoundoff * (1 + math.Abs(eps) + c.t + c.a) * (v + cc)
}

// TruncatedLaplace returns the PLD of Laplace noise of scale b truncated to
// [-A, A] on a query of sensitivity s, 0 < s <= A (the mechanism of Geng,
// Ding, Guo and Kumar, arXiv:1810.00877), in closed form. With s = b epsilon
// and A = b log(1 + (e^epsilon - 1)/(2 delta)) it is (epsilon, delta)-DP.
func (c Config) TruncatedLaplace(sensitivity, scale, support float64) (*PLD, error) {
	if !finitePos(sensitivity) || !finitePos(scale) || !finitePos(support) {
		return nil, fmt.Errorf("pld: truncated laplace needs positive finite sensitivity, scale and support, got %v, %v, %v", sensitivity, scale, support)
	}
	// Round against privacy: the shift up, the support down.
	t := sensitivity / scale * (1 + 2*unitRoundoff)
	a := support / scale * (1 - 2*unitRoundoff)
	if !finitePos(t) || !finitePos(a) || a > 700 {
		return nil, fmt.Errorf("pld: truncated laplace support/scale = %v must lie in (0, 700]", a)
	}
	if t > a {
		return nil, fmt.Errorf("pld: truncated laplace sensitivity %v exceeds its support %v", sensitivity, support)
	}
	return c.fromMechanism(mechanism{rem: tlapCurve{t, a}})
}

// TruncatedLaplace is Config{}.TruncatedLaplace.
func TruncatedLaplace(sensitivity, scale, support float64) (*PLD, error) {
	return Config{}.TruncatedLaplace(sensitivity, scale, support)
}

// ---- piecewise-uniform noise on a grid ----

// maxCurve is the pointwise maximum of several curves. The maximum of
// hockey-stick curves is itself the curve of a pair: the one whose trade-off
// function is the convex hull of the minimum of theirs (the infimum of
// f(alpha) + e^eps alpha is the same for a function and its convex hull), and
// that pair dominates every one of them.
type maxCurve []curve

func (m maxCurve) delta(eps float64) (float64, float64) {
	var v, e float64
	for _, c := range m {
		if cv, ce := c.delta(eps); cv+ce > v+e {
			v, e = cv, ce
		}
	}
	return v, e
}

func (m maxCurve) infMass() float64 {
	var w float64
	for _, c := range m {
		if ic, ok := c.(interface{ infMass() float64 }); ok {
			w = math.Max(w, ic.infMass())
		}
	}
	return w
}

func (m maxCurve) minLoss() float64 {
	v := math.Inf(1)
	for _, c := range m {
		v = math.Min(v, c.(interface{ minLoss() float64 }).minLoss())
	}
	return v
}

func (m maxCurve) grid(lo, n int, h float64) ([]float64, []float64) {
	vals := make([]float64, n)
	errs := make([]float64, n)
	for _, c := range m {
		gc := c.(gridCurve)
		v, e := gc.grid(lo, n, h)
		for i := range vals {
			if v[i]+e[i] > vals[i]+errs[i] {
				vals[i], errs[i] = v[i], e[i]
			}
		}
	}
	return vals, errs
}

// MaxGridShifts bounds maxShift in [Config.GridNoise].
const MaxGridShifts = 4096

// GridNoise returns the PLD of additive noise whose law is a mixture of
// uniform laws on consecutive intervals of equal width beta: weights[j] is
// (proportional to) the probability of interval j, and the query moves by at
// most maxShift*beta. For a shift of k beta the pair is, interval by interval,
// the pair of weight vectors shifted by k (the density ratio is constant on
// each piece). For a shift between k beta and (k+1) beta, every delta(eps) is
// the linear interpolation of the two (each piece splits into parts of
// lengths proportional to the offset, on which the ratio is fixed). So the
// pointwise maximum over every shift k in [-maxShift, maxShift] is the curve
// of a pair dominating the mechanism for both neighbour directions, and the
// PLD is built from it. Weights must be finite and non-negative; their sum is
// normalised to 1 (the rounding of w/sum is charged, see roundedAtoms).
func (c Config) GridNoise(weights []float64, maxShift int) (*PLD, error) {
	if len(weights) == 0 {
		return nil, errors.New("pld: grid noise needs at least one weight")
	}
	if maxShift < 1 || maxShift > MaxGridShifts {
		return nil, fmt.Errorf("pld: grid noise shift must lie in [1, %d] intervals, got %d", MaxGridShifts, maxShift)
	}
	var sum float64
	for i, v := range weights {
		if !(v >= 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("pld: grid noise weight %d is %v", i, v)
		}
		sum += v
	}
	if !(sum > 0) {
		return nil, errors.New("pld: grid noise weights sum to 0")
	}
	n := len(weights)
	var m maxCurve
	for k := -maxShift; k <= maxShift; k++ {
		if k == 0 {
			continue
		}
		lo := min(0, k)
		size := n + max(k, -k)
		pm := make([]float64, size) // P(o) = p(o - k)
		qm := make([]float64, size) // Q(o) = p(o)
		for i, v := range weights {
			pm[i+k-lo] = v / sum
			qm[i-lo] = v / sum
		}
		m = append(m, roundedAtoms{newAtomCurve(pm, qm)})
	}
	return c.fromMechanism(mechanism{rem: m})
}

// GridNoise is Config{}.GridNoise.
func GridNoise(weights []float64, maxShift int) (*PLD, error) {
	return Config{}.GridNoise(weights, maxShift)
}

// roundedAtoms charges the rounding of normalised probabilities: each atom of
// P and Q is within a relative eta = 4u of the exact law. Where the perturbed
// p(1+eta) exceeds e^eps q(1-eta), e^eps q eta < p eta (1 + 3 eta), so each
// term (p - e^eps q)_+ moves by at most 3 eta p, and delta by at most 12u.
type roundedAtoms struct{ *atomCurve }

func (r roundedAtoms) delta(eps float64) (float64, float64) {
	v, e := r.atomCurve.delta(eps)
	return v, e + 12*unitRoundoff
}

// minLoss is the smallest finite loss (an atom's computed loss, less a margin).
func (r roundedAtoms) minLoss() float64 {
	if len(r.loss) == 0 {
		return 0
	}
	return r.loss[0] - 8*unitRoundoff*(1+math.Abs(r.loss[0]))
}

func (r roundedAtoms) grid(lo, n int, h float64) ([]float64, []float64) {
	v, e := r.atomCurve.grid(lo, n, h)
	for i := range e {
		e[i] += 12 * unitRoundoff
	}
	return v, e
}
