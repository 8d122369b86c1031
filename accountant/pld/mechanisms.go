package pld

import (
	"fmt"
	"math"
	"sort"
)

// curve is one direction of a mechanism: a pair (P, Q) given by its
// hockey-stick divergence delta(eps) = sup_S P(S) - e^eps Q(S), for every real
// eps, together with a bound on the absolute error of the evaluation.
type curve interface {
	delta(eps float64) (val, err float64)
}

// gridCurve is a curve that can evaluate a whole grid faster than point by
// point.
type gridCurve interface {
	curve
	grid(lo, n int, h float64) (vals, errs []float64)
}

// mechanism is a pair of curves: rem = (M(D), M(D')) for D' = D minus one
// row, add = (M(D'), M(D)). add == nil means the mechanism is symmetric.
type mechanism struct {
	rem, add curve
}

// ---- Gaussian ----

type gaussCurve struct{ mu float64 }

func (g gaussCurve) delta(eps float64) (float64, float64) { return gaussDelta(g.mu, eps) }

// ---- Laplace ----

// laplaceCurve is the pair (Lap(s, b), Lap(0, b)) with e0 = s/b:
// delta(eps) = 1 - e^((eps - e0)/2) on [-e0, e0], 0 above, 1 - e^eps below.
type laplaceCurve struct{ e0 float64 }

func (l laplaceCurve) delta(eps float64) (float64, float64) {
	switch {
	case eps >= l.e0:
		return 0, 0
	case eps <= -l.e0:
		v := -math.Expm1(eps)
		return v, 4*unitRoundoff*v + 2*unitRoundoff*math.Abs(eps)
	}
	v := -math.Expm1((eps - l.e0) / 2)
	return v, 4*unitRoundoff*v + 2*unitRoundoff*(math.Abs(eps)+l.e0)
}

// ---- Poisson-subsampled Gaussian ----

// subRemove is the pair ((1-q) N(0, s^2) + q N(1, s^2), N(0, s^2)). Its loss
// log((1-q) + q e^((2o-1)/(2 s^2))) increases in o and exceeds eps iff
// o > o* = s^2 log((e^eps - 1 + q)/q) + 1/2, so for eps > log(1-q)
// delta(eps) = q Phi(-(o*-1)/s) - (e^eps - 1 + q) Phi(-o*/s); below, 1 - e^eps.
type subRemove struct{ q, sigma float64 }

func (c subRemove) delta(eps float64) (float64, float64) {
	lq := math.Log1p(-c.q)
	if eps <= lq {
		v := -math.Expm1(eps)
		return v, 4*unitRoundoff*v + 2*unitRoundoff*math.Abs(eps)
	}
	em := math.Expm1(eps) + c.q // e^eps - 1 + q > 0
	// Relative error of em: cancellation when expm1(eps) ~ -q.
	emRel := 4 * unitRoundoff * (math.Abs(math.Expm1(eps)) + c.q) / em
	y := math.Log(em) - math.Log(c.q)
	s2 := c.sigma * c.sigma
	o := s2*y + 0.5
	a1 := -(o - 1) / c.sigma
	a0 := -o / c.sigma
	l1, l0 := logPhi(a1), logPhi(a0)
	la := math.Log(c.q) + l1
	lb := math.Log(em) + l0
	// Errors: o carries s^2 (|y| 4u + emRel); propagate through logPhi.
	oErr := s2*(4*unitRoundoff*math.Abs(y)+emRel+4*unitRoundoff) + 4*unitRoundoff*math.Abs(o)
	ea := logPhiErr(a1, l1) + oErr/c.sigma*(math.Abs(a1)+1) + 4*unitRoundoff*math.Abs(la)
	eb := logPhiErr(a0, l0) + oErr/c.sigma*(math.Abs(a0)+1) + emRel + 4*unitRoundoff*math.Abs(lb)
	return hockey(la, lb, ea, eb)
}

// subAdd is the reversed pair (N(0, s^2), (1-q) N(0, s^2) + q N(1, s^2)). Its
// loss -log((1-q) + q e^((2o-1)/(2 s^2))) exceeds eps iff eps < -log(1-q) and
// o < o' = s^2 log((e^-eps - 1 + q)/q) + 1/2, so
// delta(eps) = (1 - (1-q) e^eps) Phi(o'/s) - q e^eps Phi((o'-1)/s).
type subAdd struct{ q, sigma float64 }

func (c subAdd) delta(eps float64) (float64, float64) {
	lq := math.Log1p(-c.q)
	if eps >= -lq {
		return 0, 0
	}
	em := math.Expm1(-eps) + c.q // e^-eps - 1 + q > 0
	emRel := 4 * unitRoundoff * (math.Abs(math.Expm1(-eps)) + c.q) / em
	y := math.Log(em) - math.Log(c.q)
	s2 := c.sigma * c.sigma
	o := s2*y + 0.5
	a0 := o / c.sigma
	a1 := (o - 1) / c.sigma
	w := -math.Expm1(eps + lq) // 1 - (1-q) e^eps > 0
	wRel := 4 * unitRoundoff * (1 + math.Abs(eps+lq)) / w
	l0, l1 := logPhi(a0), logPhi(a1)
	la := math.Log(w) + l0
	lb := math.Log(c.q) + eps + l1
	oErr := s2*(4*unitRoundoff*math.Abs(y)+emRel+4*unitRoundoff) + 4*unitRoundoff*math.Abs(o)
	ea := logPhiErr(a0, l0) + oErr/c.sigma*(math.Abs(a0)+1) + wRel + 4*unitRoundoff*math.Abs(la)
	eb := logPhiErr(a1, l1) + oErr/c.sigma*(math.Abs(a1)+1) + 4*unitRoundoff*(math.Abs(lb)+math.Abs(eps))
	return hockey(la, lb, ea, eb)
}

// ---- Discrete (atoms) ----

// atomCurve is a pair of discrete distributions given by its atoms: loss
// values (sorted ascending, finite), the first distribution's mass at each,
// and the first distribution's mass where the second is zero (infinite loss).
type atomCurve struct {
	loss []float64
	p    []float64
	pInf float64
}

func newAtomCurve(pm, qm []float64) *atomCurve {
	type atom struct{ l, p float64 }
	var atoms []atom
	c := &atomCurve{}
	for i := range pm {
		switch {
		case pm[i] <= 0:
			// loss -inf: contributes nothing to delta for any eps
		case qm[i] <= 0:
			c.pInf += pm[i]
		default:
			atoms = append(atoms, atom{math.Log(pm[i]) - math.Log(qm[i]), pm[i]})
		}
	}
	sort.Slice(atoms, func(i, j int) bool { return atoms[i].l < atoms[j].l })
	for _, a := range atoms {
		c.loss = append(c.loss, a.l)
		c.p = append(c.p, a.p)
	}
	return c
}

func (c *atomCurve) infMass() float64 { return c.pInf }

func (c *atomCurve) delta(eps float64) (float64, float64) {
	var s float64
	n := 0
	for i := len(c.loss) - 1; i >= 0 && c.loss[i] > eps; i-- {
		s += c.p[i] * -math.Expm1(eps-c.loss[i])
		n++
	}
	v := s + c.pInf
	return v, v*float64(2*n+8)*unitRoundoff + 8*unitRoundoff*math.Abs(eps)*s
}

// grid evaluates delta on (lo+i) h, i < n, from the top down:
// D(x - h) = D(x) + (1 - e^-h) G(x) + new atoms, G(x - h) = e^-h G(x) + new
// atoms, with G(x) = sum_{l > x} p e^(x - l): sums of non-negative terms.
func (c *atomCurve) grid(lo, n int, h float64) ([]float64, []float64) {
	vals := make([]float64, n)
	errs := make([]float64, n)
	em := -math.Expm1(-h)
	eh := math.Exp(-h)
	top := float64(lo+n-1) * h
	j := len(c.loss) - 1
	var d, g float64
	for ; j >= 0 && c.loss[j] > top; j-- {
		d += c.p[j] * -math.Expm1(top-c.loss[j])
		g += c.p[j] * math.Exp(top-c.loss[j])
	}
	ops := len(c.loss) - 1 - j
	for i := n - 1; i >= 0; i-- {
		x := float64(lo+i) * h
		if i < n-1 {
			d += em * g
			g *= eh
			for ; j >= 0 && c.loss[j] > x; j-- {
				d += c.p[j] * -math.Expm1(x-c.loss[j])
				g += c.p[j] * math.Exp(x-c.loss[j])
				ops++
			}
			ops += 2
		}
		vals[i] = d + c.pInf
		errs[i] = vals[i]*float64(4*ops+16)*unitRoundoff + 8*unitRoundoff*math.Abs(x)*d
	}
	return vals, errs
}

// ---- connect the dots ----

// build returns the connect-the-dots discretisation (Doroshenko, Ghazi,
// Kamath, Kumar, Manurangsi 2022) of one direction of a mechanism on the grid
// of spacing h. For grid points x_0 < ... < x_n with delta_i = delta(x_i), the
// pmf with mass at +infinity delta_n and tail masses
//
//	A_j = sum_{i >= j} w_i + w_inf = delta_{j-1} + (delta_{j-1} - delta_j)/(e^h - 1)
//
// is the loss distribution of a pair whose hockey-stick curve interpolates
// delta linearly in e^eps between grid points (and by the chord to (0, 1)
// below x_0). delta is convex in e^eps, so the interpolant lies above it:
// that pair dominates the mechanism's, and domination survives composition
// (Zhu, Dong, Wang 2022). To absorb the evaluation errors, each A_j is raised
// by its error bound (the 1/(e^h - 1) factor amplifies them) and the tails
// are made monotone, which only moves mass upwards.
//
// The grid runs from the largest x_0 below which the first distribution has
// mass at most tau (bounded by e^(x+h) delta_conj(-x-h)/(e^h-1), delta_conj the
// reversed pair's curve) up to the smallest x_n with delta(x_n) <= tau.
func build(c, conj curve, h, tau float64, maxBins int) (*pmf, error) {
	if ac, ok := c.(*atomCurve); ok && len(ac.loss) == 0 {
		// Every outcome of the first distribution is impossible under the
		// second: all its mass has infinite loss.
		return &pmf{p: []float64{0}, inf: 1}, nil
	}
	dv := func(k int) float64 { v, _ := c.delta(float64(k) * h); return v }
	var floor float64 // delta(+inf): mass of infinite loss
	if ic, ok := c.(interface{ infMass() float64 }); ok {
		floor = ic.infMass()
	}
	// Top: smallest k with delta(k h) <= floor + tau. delta is non-increasing.
	top, err := searchInt(func(k int) bool { return dv(k) <= floor+tau })
	if err != nil {
		return nil, err
	}
	eh1 := math.Expm1(h)
	lowOK := func(k int) bool { // lower tail below k h is at most tau
		x := float64(k+1) * h
		v, e := conj.delta(-x)
		return math.Exp(x)*(v+e) <= tau*eh1
	}
	bottom, err := searchInt(func(k int) bool { return !lowOK(k) })
	if err != nil {
		return nil, err
	}
	bottom-- // largest k with lowOK(k)
	if lf, ok := c.(interface{ minLoss() float64 }); ok {
		bottom = max(bottom, int(math.Floor(lf.minLoss()/h))-2) // no mass below the smallest finite loss
	}
	if bottom >= top {
		bottom = top - 1
	}
	n := top - bottom + 1
	if n > maxBins {
		return nil, errTooWide{n, maxBins, h}
	}
	var vals, errs []float64
	if gc, ok := c.(gridCurve); ok {
		vals, errs = gc.grid(bottom, n, h)
	} else {
		vals = make([]float64, n)
		errs = make([]float64, n)
		for i := range vals {
			vals[i], errs[i] = c.delta(float64(bottom+i) * h)
		}
	}
	// Tail masses with error margins; A[n] is the mass at +infinity.
	A := make([]float64, n+1)
	A[n] = (vals[n-1] + errs[n-1]) * (1 + 2*unitRoundoff)
	for j := n - 1; j >= 1; j-- {
		v := vals[j-1] + (vals[j-1]-vals[j])/eh1
		e := (errs[j-1]*(1+1/eh1) + errs[j]/eh1) + 8*unitRoundoff*math.Abs(v) + 2*unitRoundoff*vals[j-1]/eh1
		A[j] = math.Max(v+e, A[j+1])
	}
	total := 1.0 // a probability measure's, or more
	if tm, ok := c.(interface{ totalMass() float64 }); ok {
		total = tm.totalMass()
	}
	A[0] = math.Max(total, A[1])
	out := &pmf{lo: bottom, p: make([]float64, n), inf: A[n]}
	for i := range out.p {
		out.p[i] = A[i] - A[i+1]
	}
	return out, nil
}

type errTooWide struct {
	n, max int
	h      float64
}

func (e errTooWide) Error() string {
	return fmt.Sprintf("pld: the loss range needs %d bins of width %g (limit %d)", e.n, e.h, e.max)
}

// searchInt returns the smallest integer k with pred(k) true, for a predicate
// that is false below some point and true from it on.
func searchInt(pred func(int) bool) (int, error) {
	const limit = 1 << 40
	lo, hi := 0, 0
	if pred(0) {
		step := 1
		for {
			lo = -step
			if !pred(lo) {
				break
			}
			hi = lo
			step *= 2
			if step > limit {
				return 0, fmt.Errorf("pld: loss range search did not terminate")
			}
		}
	} else {
		step := 1
		for {
			hi = step
			if pred(hi) {
				break
			}
			lo = hi
			step *= 2
			if step > limit {
				return 0, fmt.Errorf("pld: loss range search did not terminate")
			}
		}
	}
	// pred(lo) false, pred(hi) true
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if pred(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
