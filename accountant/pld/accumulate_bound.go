package pld

import (
	"math"
)

// AccumulateDeltaBound returns an upper bound on
// p.Accumulate(o, maxBins).Delta(eps), computed without the convolution, in
// time linear in the operands' bins (ok false when it cannot say: then
// compute the composition).
//
// Why it bounds what Accumulate computes. Per direction, with A and B the
// operands on their common grid (align, as Accumulate moves them) and
// f_eps(x) = (1 - e^(eps-x))_+:
//
//   - the exact convolution's finite part has the curve
//     S(x) = sum_i A_i delta_B(x - x_i), delta_B(t) = sum_j B_j f_t(y_j)
//     (the curve of B's finite part), an identity of product measures; each
//     delta_B(t) is read from one sweep of B (the recurrences of
//     pmf.delta, sums of non-negative terms);
//   - the direct convolution's outputs lie within gamma_m of the exact
//     ones and are then scaled by s = 1 + 4 (m + 2) u: at most s^2 times
//     exact. The FFT's outputs err by at most its round-off bound in l1,
//     which conv's normwise bound (recomputed here from the operands'
//     norms) caps; setting negative outputs to 0 adds at most that again.
//     Both are charged, whichever Accumulate picks, and the larger tail;
//   - combine's mass at +infinity and round-off terms, recomputed with that
//     bound; trimming moves at most tau of each tail upward (at most tau
//     each to any delta);
//   - fitCTD's connect the dots to a grid H at most hmax times the spacing
//     (the factor the untrimmed width would need: a coarser one's curve lies
//     above a finer one's, both interpolating a curve convex in e^eps):
//     the curve at eps is the interpolation, linear in e^eps, of its
//     values at the grid points either side, each within a relative 1e-6
//     of the fine curve's there (recoarsen's margins, some 1e-7 at most);
//   - pmf.delta's own rounding up, below a relative 1e-9.
//
// The result is then raised by a relative 1e-4 and an absolute slack for
// the sums' round-off, far above all of these: it is meant as a fast, sound
// test that a composition is certified (the ledger's room search), not as a
// tight figure.
func (p *PLD) AccumulateDeltaBound(o *PLD, maxBins int, eps float64) (float64, bool) {
	if !p.ok() || !o.ok() || maxBins < 16 || !(eps >= 0) || math.IsInf(eps, 1) {
		return 0, false
	}
	a, b, err := align(p, o)
	if err != nil {
		return 0, false
	}
	if a.width() < b.width() {
		a, b = b, a
	}
	// Whichever convolution Accumulate picks (the direct one's scale and
	// tail, or the FFT's round-off and the PLDs' own tail), both are
	// charged: the bound does not depend on the choice.
	tau := math.Max(AccumulateTail, math.Max(a.tail, b.tail))
	type pair struct{ x, y *pmf }
	pairs := []pair{{a.rem, b.rem}}
	if a.add != nil || b.add != nil {
		pairs = append(pairs, pair{a.addOrRem(), b.addOrRem()})
	}
	// The factor fitCTD would coarsen by for the widest untrimmed result.
	n := 0
	for _, q := range pairs {
		n = max(n, len(q.x.p)+len(q.y.p)-1)
	}
	f := 1
	if n > maxBins {
		f = 2
		for n/f+4 > maxBins {
			f *= 2
		}
	}
	H := a.h * float64(f)
	if H > 0.5 {
		return 0, false
	}
	round := convNormBound(pairs[0].x, pairs[0].y, len(pairs) > 1, pairs[len(pairs)-1].x, pairs[len(pairs)-1].y) * 1.02
	var worst float64
	for _, q := range pairs {
		m := max(len(q.x.p), len(q.y.p)) // convDirect's scale uses the narrower: this is larger
		s := 1 + 4*float64(m+2)*unitRoundoff
		scale := s * s
		c := &pmf{}
		combine(c, q.x, q.y, round)
		extra := c.inf + c.err + 2*round + 2*tau*(1+1e-9)
		// Absolute slack for the sums below: each of at most n terms of
		// the sweep and of the sum over A is within a relative (n + 16) u,
		// against totals bounded by the masses.
		mx, my := q.x.mass(), q.y.mass()
		slack := 8 * float64(len(q.x.p)+len(q.y.p)+16) * unitRoundoff * (mx + 1) * (my + 1)
		curve := func(x float64) float64 {
			return convCurve(q.x, q.y, a.h, x)*scale*(1+1e-9) + extra + slack
		}
		var d float64
		if f == 1 {
			d = curve(eps)
		} else {
			k := math.Floor(eps / H)
			x0, x1 := k*H, (k+1)*H
			u0, u1 := curve(x0)*(1+1e-6), curve(x1)*(1+1e-6)
			lam := -math.Expm1(eps-x0) / -math.Expm1(x1-x0) // (e^eps - e^x0)/(e^x1 - e^x0), negated both
			lam = math.Min(math.Max(lam, 0), 1)
			d = ((1-lam)*u0 + lam*u1) * (1 + 1e-12)
		}
		worst = math.Max(worst, d)
	}
	if math.IsNaN(worst) || math.IsInf(worst, 0) {
		return 0, false
	}
	return worst*(1+1e-4) + 1e-300, true
}

// convCurve returns sum_i A_i delta_B(x - x_i), the curve at x of the exact
// convolution of A's and B's finite parts (both on the grid h), with
// delta_B read from one sweep of B: with D_j = sum_{k>j} B_k (1 -
// e^(y_j - y_k)) and G_j = sum_{k>j} B_k e^(y_j - y_k), delta_B(t) =
// D_j + (G_j + B_j)(1 - e^(t - y_j)) for the first j with y_j > t (all
// terms non-negative), 0 above B's support, and the j = 0 formula below it.
func convCurve(A, B *pmf, h, x float64) float64 {
	nb := len(B.p)
	D := make([]float64, nb)
	G := make([]float64, nb)
	em := -math.Expm1(-h)
	eh := math.Exp(-h)
	var d, g float64
	for k := nb - 1; k >= 0; k-- {
		D[k], G[k] = d, g
		d += em * (g + B.p[k])
		g = eh * (g + B.p[k])
	}
	// For A's bin i (loss (A.lo+i) h), t = x - (A.lo+i) h, and the first j
	// with (B.lo+j) h > t is the first with (A.lo+i+B.lo+j) h > x.
	K := int(math.Floor(x/h)) + 1 // first grid index with index*h > x, up to rounding
	for float64(K-1)*h > x {
		K--
	}
	for float64(K)*h <= x {
		K++
	}
	w := -math.Expm1(x - float64(K)*h) // 1 - e^(t - y_j) where j is interior
	var sum float64
	for i, ai := range A.p {
		if ai == 0 {
			continue
		}
		j := K - (A.lo + i) - B.lo
		switch {
		case j >= nb:
			// t at or above B's largest loss: no finite contribution.
		case j >= 0:
			sum += ai * (D[j] + (G[j]+B.p[j])*w)
		default:
			// Below B's lowest loss: every mass of B lies above t.
			t := x - float64(A.lo+i)*h
			sum += ai * (D[0] + (G[0]+B.p[0])*-math.Expm1(t-float64(B.lo)*h))
		}
	}
	return sum
}

// convNormBound returns conv's normwise round-off bound for the operands
// (aR, bR) and, when asym, (aA, bA): what conv charges is at most it.
func convNormBound(aR, bR *pmf, asym bool, aA, bA *pmf) float64 {
	const u = unitRoundoff
	nR := len(aR.p) + len(bR.p) - 1
	n := nR
	if asym {
		n = max(n, len(aA.p)+len(bA.p)-1)
	}
	N := goodSize(n)
	eta := fftRelErr(N)
	var a2, b2, ma, mb float64
	if asym {
		a2, b2 = math.Hypot(aR.l2(), aA.l2()), math.Hypot(bR.l2(), bA.l2())
		ma, mb = math.Max(aR.mass(), aA.mass()), math.Max(bR.mass(), bA.mass())
	} else {
		ma, mb = aR.mass(), bR.mass()
		a2, b2 = aR.l2(), bR.l2()
	}
	za, zb := a2, b2
	if !asym {
		za = math.Hypot(a2, b2)
		zb = za
	}
	return math.Sqrt(float64(n)) * (2*eta*(za*mb+ma*zb)*1.001 + 2*(eta+3*u)*math.Min(ma*b2, a2*mb)) * 1.01
}
