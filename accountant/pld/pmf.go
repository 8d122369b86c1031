package pld

import (
	"errors"
	"math"
)

// pmf is one direction of a PLD: a non-negative measure on the loss grid
// {k h}, plus mass at +infinity.
//
// Invariant (the "upper curve" property). Let delta be the hockey-stick curve
// of the pair this pmf's direction stands for (a mechanism or a composition).
// For every real eps, with f_eps(x) = (1 - e^(eps-x))_+ and f_eps(+inf) = 1,
//
//	delta(eps) <= sum_k p[k] f_eps((lo+k) h) + inf + err.
//
// It does not hold for every non-decreasing f: connect-the-dots puts mass on
// both sides of the true loss. It survives convolution (for a non-negative
// measure C, the curve of A*C at eps is the integral of A's curve at eps - y
// against C, so it needs the property at every real eps, which
// connect-the-dots gives by convexity of delta in e^eps), moving mass to a
// larger loss (f_eps is non-decreasing: rounding up, truncating the upper tail
// to +inf, merging the lower tail into the lowest kept bin), adding mass and
// replacing negative round-off values by 0 (f_eps >= 0); err holds a bound on
// the l1 norm of the floating-point error committed so far, charged at
// +infinity (f_eps <= 1). See the package documentation.
type pmf struct {
	lo  int       // grid index of p[0]
	p   []float64 // p[k] is the mass at loss (lo+k) h
	inf float64   // mass at +infinity: infinite losses and truncated tails
	err float64   // bound on accumulated round-off (l1), charged at +infinity
}

func (a *pmf) clone() *pmf {
	b := *a
	b.p = append([]float64(nil), a.p...)
	return &b
}

// mass returns the finite mass sum p (an upper bound, rounded up slightly).
func (a *pmf) mass() float64 {
	var s float64
	for _, v := range a.p {
		s += v
	}
	return s * (1 + float64(len(a.p)+2)*unitRoundoff)
}

// l2 returns the Euclidean norm of p.
func (a *pmf) l2() float64 {
	var s float64
	for _, v := range a.p {
		s += v * v
	}
	return math.Sqrt(s)
}

// errNonFinite reports a NaN or infinity in a computed PLD (a bug or an
// overflow); no figure can be read from it.
var errNonFinite = errors.New("pld: non-finite value in a computed distribution")

// clampTrim replaces negative round-off values by 0 and removes tails of
// total mass at most tau: the upper tail goes to +infinity, the lower tail is
// added to the lowest kept bin. Both move mass upwards.
func (a *pmf) clampTrim(tau float64) error {
	if math.IsNaN(a.inf+a.err) || math.IsInf(a.inf+a.err, 0) {
		return errNonFinite
	}
	for i, v := range a.p {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errNonFinite
		}
		if v < 0 {
			a.p[i] = 0
		}
	}
	// Upper tail (sums rounded up: the moved mass must not shrink).
	hi := len(a.p)
	var s float64
	for hi > 1 && s+a.p[hi-1] <= tau {
		hi--
		s += a.p[hi]
	}
	a.inf += s * (1 + float64(len(a.p)-hi+2)*unitRoundoff)
	// Lower tail.
	lo := 0
	s = 0
	for lo < hi-1 && s+a.p[lo] <= tau {
		s += a.p[lo]
		lo++
	}
	a.p[lo] += s * (1 + float64(lo+2)*unitRoundoff)
	a.p = a.p[lo:hi:hi]
	a.lo += lo
	if len(a.p) > 0 && cap(a.p) > 2*len(a.p)+64 {
		a.p = append([]float64(nil), a.p...)
	}
	return nil
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// ErrRoundoff is returned when the bound on accumulated floating-point error
// is not small against the delta asked for, so that no epsilon could be
// stood behind.
var ErrRoundoff = errors.New("pld: floating-point round-off bound is not small against delta")

// delta returns sum_k p[k] (1 - e^(eps - x_k))_+ + inf + err, an upper bound
// on this direction's hockey-stick divergence at eps.
func (a *pmf) delta(h, eps float64) float64 {
	// The lowest bin above eps is j; above it the sweep of epsilon keeps
	// D = sum_{i>j} p_i (1 - e^(x_j - x_i)) and G = sum_{i>j} p_i e^(x_j - x_i)
	// with recurrences of non-negative terms (no exp per bin), and
	//   delta(eps) = D + (G + p_j) (1 - e^(eps - x_j)),
	// a sum of non-negative terms too.
	n := len(a.p)
	j := int(math.Floor(eps/h)) + 1 - a.lo // first index with (lo+j) h > eps
	for j-1 >= 0 && j-1 < n && float64(a.lo+j-1)*h > eps {
		j-- // eps/h rounded: make sure of the cell
	}
	for j >= 0 && j < n && float64(a.lo+j)*h <= eps {
		j++
	}
	if j < 0 {
		j = 0
	}
	var d, g float64
	if j < n {
		em := -math.Expm1(-h)
		eh := math.Exp(-h)
		for k := n - 1; k > j; k-- {
			d += em * (g + a.p[k])
			g = eh * (g + a.p[k])
		}
		x := float64(a.lo+j) * h
		d += (g + a.p[j]) * -math.Expm1(eps-x)
	}
	// Each step multiplies and adds non-negative terms (a few u each), and
	// em, eh and the last expm1 err by a few u relative to themselves (the
	// argument eps - x by u (|eps| + |x|)): round up, as epsilon does.
	xmax := math.Max(math.Abs(float64(a.lo)*h), math.Abs(float64(a.lo+n)*h))
	d *= 1 + (float64(2*(n-j)+16)+8*(xmax+math.Abs(eps)))*unitRoundoff
	return d + a.inf + a.err
}

// epsilon returns the smallest eps >= 0 with delta(eps) <= target, or +Inf if
// the mass at +infinity alone reaches target. On each grid cell the curve is
// c + S_P - e^eps S_Q; the sweep keeps D_k = sum_{j>k} p_j (1 - e^(x_k-x_j))
// and G_k = sum_{j>k} p_j e^(x_k-x_j) with recurrences of non-negative terms,
// so there is no cancellation.
func (a *pmf) epsilon(h, target float64) float64 {
	c := a.inf + a.err
	n := len(a.p)
	xmax := math.Max(math.Abs(float64(a.lo)*h), math.Abs(float64(a.lo+n)*h))
	slack := 1 + (float64(2*n+16)+8*xmax)*unitRoundoff
	budget := (target - c) / slack // need D(eps) <= budget
	if !(budget > 0) {
		return math.Inf(1)
	}
	em := -math.Expm1(-h)
	eh := math.Exp(-h)
	var d, g float64 // D and G at grid point k (masses strictly above k)
	for k := n - 1; k >= 0; k-- {
		// Here d, g describe the point x_k (masses at j > k).
		if d > budget {
			// eps lies in (x_k, x_{k+1}]: c + D_k + G_k - e^(eps-x_k) G_k = ...
			x := float64(a.lo+k) * h
			e := x + math.Log1p((d-budget)/g)
			return math.Max(e, 0)
		}
		if float64(a.lo+k)*h <= 0 {
			return 0
		}
		d += em * (g + a.p[k])
		g = eh * (g + a.p[k])
	}
	// Below the lowest bin every mass lies above eps, and the same cell
	// formula holds for all eps <= x_0: D(eps) = d + g - e^(eps-x_{-1}) g.
	r := (d - budget) / g
	if g == 0 || r <= -1 {
		return 0
	}
	return math.Max(float64(a.lo-1)*h+math.Log1p(r), 0)
}

// conv returns the linear convolutions of (aR, bR) and, when aA/bA are
// non-nil, of (aA, bA), by FFT with packed real transforms (two real inputs
// per complex transform), with the round-off bound of each result charged by
// combine.
//
// Round-off. Two bounds are computed and the smaller is used. With eta =
// fftRelErr(N):
//   - componentwise: a transform of x errs by at most eta ||x||_1 in every
//     output (each output is reached from each input along a single path of
//     unit-modulus butterflies), so the separated spectra err by eta s_a,
//     eta s_b (s = l1 norm of the packed input), the products by
//     eta (s_a |B_k| + s_b |A_k|) + 2u |C_k|, and the n kept outputs of the
//     inverse by (n/N) (||dC||_1 + eta ||C||_1) in l1;
//   - normwise (Higham Thm 24.2): ||dZ||_2 <= eta sqrt(N) ||z||_2, giving an
//     l2 error of the result of eta (||a||_2 s_b + s_a ||b||_2) and l1 by
//     sqrt(n) times that.
func conv(aR, bR, aA, bA *pmf) (cR, cA *pmf) {
	asym := aA != nil
	nR := len(aR.p) + len(bR.p) - 1
	n := nR
	nA := 0
	if asym {
		nA = len(aA.p) + len(bA.p) - 1
		n = max(n, nA)
	}
	N := goodSize(n)
	plan := planFor(N)
	work := make([]complex128, N)
	eta := fftRelErr(N)
	const u = unitRoundoff
	z1 := make([]complex128, N)
	for i, v := range aR.p {
		z1[i] = complex(v, 0)
	}
	var z2 []complex128
	if asym {
		for i, v := range aA.p {
			z1[i] += complex(0, v)
		}
		z2 = make([]complex128, N)
		for i, v := range bR.p {
			z2[i] = complex(v, 0)
		}
		for i, v := range bA.p {
			z2[i] += complex(0, v)
		}
	} else {
		for i, v := range bR.p {
			z1[i] += complex(0, v)
		}
	}
	plan.transform(z1, work, false)
	if asym {
		plan.transform(z2, work, false)
	}
	// Spectral l1 norms for the componentwise bound.
	var nA1, nB1, nC1 float64 // sums over k of |A_k|, |B_k| (both directions), |C_k|
	half := func(z []complex128, k, j int) (complex128, complex128) {
		zk, zj := z[k], cmplxConj(z[j])
		return (zk + zj) * 0.5, (zk - zj) * complex(0, -0.5)
	}
	for k := 0; k <= N/2; k++ {
		j := (N - k) % N
		w := 2.0 // the pair (k, N-k) counts twice
		if j == k {
			w = 1
		}
		if !asym {
			x, y := half(z1, k, j)
			c := x * y
			z1[k] = c
			z1[j] = cmplxConj(c)
			nA1 += w * cAbs(x)
			nB1 += w * cAbs(y)
			nC1 += w * cAbs(c)
			continue
		}
		ar, aa := half(z1, k, j)
		br, ba := half(z2, k, j)
		wr, wa := ar*br, aa*ba
		z1[k] = wr + complex(0, 1)*wa
		z1[j] = cmplxConj(wr) + complex(0, 1)*cmplxConj(wa)
		nA1 += w * (cAbs(ar) + cAbs(aa))
		nB1 += w * (cAbs(br) + cAbs(ba))
		nC1 += w * (cAbs(wr) + cAbs(wa))
	}
	plan.transform(z1, work, true)
	inv := 1 / float64(N)
	cR = &pmf{lo: aR.lo + bR.lo, p: make([]float64, nR)}
	for i := range cR.p {
		cR.p[i] = real(z1[i]) * inv
	}
	// Norms of the inputs.
	var sa, sb, a2, b2, ma, mb float64
	if asym {
		cA = &pmf{lo: aA.lo + bA.lo, p: make([]float64, nA)}
		for i := range cA.p {
			cA.p[i] = imag(z1[i]) * inv
		}
		sa, sb = aR.mass()+aA.mass(), bR.mass()+bA.mass()
		a2, b2 = math.Hypot(aR.l2(), aA.l2()), math.Hypot(bR.l2(), bA.l2())
		ma, mb = math.Max(aR.mass(), aA.mass()), math.Max(bR.mass(), bA.mass())
	} else {
		ma, mb = aR.mass(), bR.mass()
		sa, sb = ma+mb, ma+mb // one packed transform holds both
		a2, b2 = aR.l2(), bR.l2()
	}
	nf, Nf := float64(n), float64(N)
	dC := eta*sa*(nB1+Nf*eta*sb) + eta*sb*nA1 + 2*u*nC1
	comp := nf/Nf*(dC+eta*nC1) + u*ma*mb
	za, zb := a2, b2
	if !asym {
		za = math.Hypot(a2, b2)
		zb = za
	}
	norm := math.Sqrt(nf) * (2*eta*(za*mb+ma*zb)*1.001 + 2*(eta+3*u)*math.Min(ma*b2, a2*mb))
	round := math.Min(comp, norm) * 1.01
	combine(cR, aR, bR, round)
	if asym {
		combine(cA, aA, bA, round)
	}
	return cR, cA
}

func cAbs(z complex128) float64 { return math.Sqrt(real(z)*real(z) + imag(z)*imag(z)) }

func cmplxConj(z complex128) complex128 { return complex(real(z), -imag(z)) }

// combine sets the +infinity mass and round-off bound of c = a * b. With
// total masses M = m + inf + err, the composed measure puts
// (m_a + inf_a)(m_b + inf_b) - m_a m_b at +infinity, and the round-off terms
// compose the same way, plus the new transform's own error.
func combine(c, a, b *pmf, round float64) {
	ma, mb := a.mass(), b.mass()
	c.inf = a.inf*(mb+b.inf) + b.inf*ma
	c.err = a.err*(mb+b.inf+b.err) + b.err*(ma+a.inf) + round
	c.inf *= 1 + 4*unitRoundoff
	c.err *= 1 + 4*unitRoundoff
}

// power returns the t-fold self-convolutions of r and (if non-nil) a, by one
// FFT at a window length chosen from Chernoff bounds, powering each
// coefficient. Mass outside the window aliases into it: the lower tail moves
// up (allowed), and the upper tail, whose mass is bounded by tau, is also
// charged at +infinity. maxBins caps the window.
func power(r, a *pmf, t int, h, tau float64, maxBins int) (*pmf, *pmf, error) {
	if t == 1 {
		ra := r.clone()
		var aa *pmf
		if a != nil {
			aa = a.clone()
		}
		return ra, aa, nil
	}
	// Window per direction: [kl, ku] holds all but tau of the mass on
	// each side (Chernoff), or the whole support when that is small.
	type win struct{ kl, ku, hi int }
	window := func(x *pmf) (win, error) {
		lo := t * x.lo
		hi := t * (x.lo + len(x.p) - 1)
		w := win{lo, hi, hi}
		if hi-lo+1 > 2*len(x.p) && hi-lo+1 > 4096 {
			cl, cu := chernoffWindow(x, t, h, tau)
			w.kl = max(lo, cl)
			w.ku = min(hi, cu)
		}
		if w.ku-w.kl+1 > maxBins {
			return w, errTooWide{w.ku - w.kl + 1, maxBins, h}
		}
		return w, nil
	}
	wr, err := window(r)
	if err != nil {
		return nil, nil, err
	}
	n := wr.ku - wr.kl + 1
	var wa win
	if a != nil {
		if wa, err = window(a); err != nil {
			return nil, nil, err
		}
		if m := wa.ku - wa.kl + 1; m > n {
			n = m
		}
	}
	N := goodSize(n)
	plan := planFor(N)
	work := make([]complex128, N)
	z := make([]complex128, N)
	for i, v := range r.p {
		z[i%N] += complex(v, 0)
	}
	if a != nil {
		for i, v := range a.p {
			z[i%N] += complex(0, v)
		}
	}
	plan.transform(z, work, false)
	// Round-off, componentwise (see conv): every separated spectrum value
	// errs by at most e0 = eta s, s the l1 norm of the packed input. Then
	// |P^t - Q^t| <= t max(|P|,|Q|)^(t-1) |P - Q|, so with
	// a_k = t (|P_k| + e0)^(t-1) the powered spectrum errs by e0 a_k plus
	// binary-powering round-off cp |P_k|^t; the l1 error of the n outputs
	// kept is at most (n/N)(||dW||_1 + eta ||W||_1), and, normwise, at most
	// sqrt(n/N) ||dW||_2 + sqrt(n) eta ||W||_2 / sqrt(N). Near |P_k| = 1,
	// a_k is about t, so e0 a_k grows linearly with t: there the coefficient
	// is recomputed directly with an error proportional to 1 - P_k instead
	// (spectral), and the smaller of the two bounds is charged.
	s := r.mass()
	if a != nil {
		s += a.mass()
	}
	eta := fftRelErr(N)
	e0 := eta * s
	tf := float64(t)
	cp := (2*math.Ceil(math.Log2(tf)) + 2) * 3 * unitRoundoff
	var dW1, dW2sq, W1, W2sq float64
	acc := func(d, y float64, w float64) {
		dW1 += w * d
		dW2sq += w * d * d
		W1 += w * y
		W2sq += w * y * y
	}
	// Where e0 a_k is not small, the transform's absolute error would be
	// amplified t-fold: recompute such coefficients directly with relative
	// accuracy (see spectral), within a budget of bin evaluations.
	crit := 0x1p-40 / float64(n) // n of these per output: at most 2^-40 in all
	budget := 1 << 21
	specR := newSpectral(r.p)
	var specA *spectral
	if a != nil {
		specA = newSpectral(a.p)
	}
	powered := func(sp *spectral, p complex128, k int) (complex128, float64) {
		x := cpow(p, t)
		ak := tf * math.Pow(cAbs(p)+e0, tf-1)
		d := e0*ak + cp*cAbs(x)
		// Only where powering amplifies the error substantially.
		if d > crit && ak > 8 && budget >= len(sp.p) {
			budget -= len(sp.p)
			if xa, da, ok := sp.power(k, N, t); ok && da < d {
				return xa, da
			}
		}
		return x, d
	}
	for k := 0; k <= N/2; k++ {
		j := (N - k) % N
		w := 2.0
		if j == k {
			w = 1
		}
		zk, zj := z[k], cmplxConj(z[j])
		pr := (zk + zj) * 0.5
		xr, dr := powered(specR, pr, k)
		acc(dr, cAbs(xr), w)
		if a == nil {
			z[k] = xr
			z[j] = cmplxConj(xr)
			continue
		}
		pa := (zk - zj) * complex(0, -0.5)
		xa, da := powered(specA, pa, k)
		acc(da, cAbs(xa), w)
		z[k] = xr + complex(0, 1)*xa
		z[j] = cmplxConj(xr) + complex(0, 1)*cmplxConj(xa)
	}
	plan.transform(z, work, true)
	inv := 1 / float64(N)
	nf, Nf := float64(n), float64(N)
	comp := nf / Nf * (dW1 + eta*W1)
	norm := math.Sqrt(nf/Nf)*math.Sqrt(dW2sq) + math.Sqrt(nf/Nf)*eta*math.Sqrt(W2sq)
	round := math.Min(comp, norm) * 1.01

	// Read out the N positions from kl: circular index (k - t lo) mod N.
	// Mass below kl has aliased upwards into them (allowed); mass above
	// kl+N-1 (at most tau, and only if the window cut the support) has
	// aliased downwards and is therefore also charged at +infinity.
	extract := func(x *pmf, w win, im bool) *pmf {
		out := &pmf{lo: w.kl, p: make([]float64, min(N, w.hi-w.kl+1))}
		base := t * x.lo
		for i := range out.p {
			idx := ((w.kl+i-base)%N + N) % N
			if im {
				out.p[i] = imag(z[idx]) * inv
			} else {
				out.p[i] = real(z[idx]) * inv
			}
		}
		var upper float64
		if w.kl+N-1 < w.hi {
			upper = tau
		}
		// Positions past the window are not read back; whatever mass aliased
		// into them is charged at +infinity rather than dropped.
		var unread float64
		for i := len(out.p); i < N; i++ {
			idx := ((w.kl+i-base)%N + N) % N
			v := real(z[idx])
			if im {
				v = imag(z[idx])
			}
			unread += max(v*inv, 0)
		}
		mx := x.mass()
		out.inf = powDiff(mx, x.inf, t) + upper + unread
		out.err = powDiff(mx+x.inf, x.err, t) + round
		out.inf *= 1 + 8*unitRoundoff
		out.err *= 1 + 8*unitRoundoff
		return out
	}
	outR := extract(r, wr, false)
	var outA *pmf
	if a != nil {
		outA = extract(a, wa, true)
	}
	return outR, outA, nil
}

// spectral evaluates single spectral coefficients of a measure p (on indices
// 0..n-1) and their t-th powers with relative accuracy, for the coefficients
// near |P_k| = 1 where the FFT's absolute error e0 = eta ||p||_1 would be
// amplified t-fold by powering.
//
// With theta = 2 pi k/N, c the rounded mean index and phi_j = theta (j - c),
//
//	P_k = sum_j p_j e^(-i theta j) = e^(-i theta c) (S - D),
//	D = sum_j p_j (2 sin^2(phi_j/2) + i sin phi_j),  S = sum_j p_j,
//
// and P_k^t = exp(t log S + t log(1 + z) - i theta c t) with z = -D/S. Every
// term of D is computed to a relative 16u of phi_j^2 (real part) and |phi_j|
// (imaginary part): phi_j itself errs by at most 4u |phi_j|, sin and cos by
// an ulp, products and the compensated sums (Neumaier) by a few u. So with
// R1 = sum p_j |phi_j| and R2 = sum p_j phi_j^2, |dRe D| <= 16u R2 and
// |dIm D| <= 16u R1, errors proportional to D itself rather than to ||p||_1.
// For |z| <= 1/2, |d log(1+z)| <= 2 |dz|; S is kept as an unevaluated sum
// hi + lo, so log S errs by 2u |log S| plus O(n u^2). The phase theta c t is
// reduced modulo 2 pi in integer arithmetic. The bound returned adds these up,
// multiplied by t, plus the roundings of the final exp, cos and sin:
// first-order like the package's other bounds, with generous constants.
type spectral struct {
	p      []float64
	c      int     // rounded mean index
	logS   float64 // log of the total mass
	eLogS  float64 // bound on its error
	massHi float64
}

func newSpectral(p []float64) *spectral {
	var s, comp, m float64
	for j, v := range p {
		x := s + v
		if math.Abs(s) >= v {
			comp += (s - x) + v
		} else {
			comp += (v - x) + s
		}
		s = x
		m += v * float64(j)
	}
	hi := s + comp
	lo := comp - (hi - s)
	sp := &spectral{p: p, massHi: hi}
	if hi > 0 {
		sp.c = int(math.Round(m / hi))
		sp.logS = math.Log(hi) + lo/hi
		sp.eLogS = 2*unitRoundoff*math.Abs(sp.logS) + 8*float64(len(p)+2)*unitRoundoff*unitRoundoff
	}
	return sp
}

// power returns P_k^t for 0 <= k <= N/2 and a bound on its error, or false
// when |z| > 1/2 (then the FFT's value is used).
func (sp *spectral) power(k, N, t int) (complex128, float64, bool) {
	const u = unitRoundoff
	if !(sp.massHi > 0) || N >= 1<<31 { // N < 2^31 keeps c t k mod N in uint64
		return 0, 0, false
	}
	theta := 2 * math.Pi * float64(k) / float64(N)
	var dre, cre, dim, cim, r1, r2 float64 // Neumaier sums of Re D and Im D
	add := func(s, c *float64, v float64) {
		x := *s + v
		if math.Abs(*s) >= math.Abs(v) {
			*c += (*s - x) + v
		} else {
			*c += (v - x) + *s
		}
		*s = x
	}
	for j, v := range sp.p {
		if v == 0 {
			continue
		}
		phi := theta * float64(j-sp.c)
		sh, ch := math.Sincos(phi / 2)
		add(&dre, &cre, 2*v*sh*sh)
		add(&dim, &cim, 2*v*sh*ch)
		r1 += v * math.Abs(phi)
		r2 += v * phi * phi
	}
	dre += cre
	dim += cim
	r1 *= 1 + float64(len(sp.p)+4)*u
	r2 *= 1 + float64(len(sp.p)+4)*u
	S := sp.massHi
	x, y := -dre/S, -dim/S
	if x*x+y*y > 0.25 {
		return 0, 0, false
	}
	ex := 16*u*r2/S*(1+4*u) + 2*u*math.Abs(x)
	ey := 16*u*r1/S*(1+4*u) + 2*u*math.Abs(y)
	reL := 0.5 * math.Log1p(2*x+x*x+y*y)
	imL := math.Atan2(y, 1+x)
	eReL := 2*(ex+ey) + 6*u*(2*math.Abs(x)+x*x+y*y) + 2*u*math.Abs(reL)
	eImL := 2*(ex+ey) + 4*u*math.Abs(imL) + 2*u*math.Abs(y)
	tf := float64(t)
	E := tf * (sp.logS + reL)
	// The phase theta c t, reduced exactly: m = c t k mod N.
	nn := uint64(N)
	m := (uint64(sp.c) % nn) * (uint64(t) % nn) % nn * uint64(k) % nn
	phi := tf*imL - 2*math.Pi*float64(m)/float64(N)
	eE := tf*(sp.eLogS+eReL) + 2*u*math.Abs(E)
	ePhi := tf*eImL + 2*u*math.Abs(tf*imL) + 32*u + 2*u*math.Abs(phi)
	mod := math.Exp(E)
	s, c := math.Sincos(phi)
	w := complex(mod*c, mod*s)
	bound := mod * (eE + ePhi + 8*u) * (1 + 2*eE)
	if math.IsNaN(bound) || math.IsInf(bound, 0) || sp.c < 0 {
		return 0, 0, false
	}
	return w, bound, true
}

// powDiff returns (m + d)^t - m^t for m, d >= 0.
func powDiff(m, d float64, t int) float64 {
	if d == 0 {
		return 0
	}
	if m == 0 {
		return math.Pow(d, float64(t))
	}
	return math.Pow(m, float64(t)) * math.Expm1(float64(t)*math.Log1p(d/m))
}

// cpow returns z^t by binary powering.
func cpow(z complex128, t int) complex128 {
	r := complex(1, 0)
	for t > 0 {
		if t&1 == 1 {
			r *= z
		}
		t >>= 1
		if t > 0 {
			z *= z
		}
	}
	return r
}

// chernoffWindow returns grid indices kl <= ku such that the t-fold
// convolution of x puts mass at most tau on indices < kl and at most tau on
// indices > ku: mass{S >= v} <= e^(-lambda v) M(lambda)^t and
// mass{S <= v} <= e^(lambda v) M(-lambda)^t for every lambda > 0, with M the
// (unnormalised) moment generating function of x. M is evaluated exactly, in
// blocks of 64 bins (powers of e^(lambda h) within a block, log-sum-exp
// across blocks), and rounded up by a relative 1e-12.
func chernoffWindow(x *pmf, t int, h, tau float64) (kl, ku int) {
	logM := func(lambda float64) float64 {
		// Within a block the factors e^(lambda h j) stay below e^200.
		block := int(math.Min(1024, math.Max(1, 200/(math.Abs(lambda)*h))))
		r := math.Exp(lambda * h)
		nb := (len(x.p) + block - 1) / block
		logs := make([]float64, 0, nb)
		mx := math.Inf(-1)
		for b := 0; b < nb; b++ {
			j0 := b * block
			var s, f float64 = 0, 1
			for j := j0; j < min(j0+block, len(x.p)); j++ {
				s += x.p[j] * f
				f *= r
			}
			if s <= 0 {
				continue
			}
			l := math.Log(s) + lambda*float64(x.lo+j0)*h
			logs = append(logs, l)
			mx = math.Max(mx, l)
		}
		var s float64
		for _, l := range logs {
			s += math.Exp(l - mx)
		}
		return mx + math.Log(s) + 1e-12*(1+math.Abs(mx))
	}
	tf := float64(t)
	logTau := math.Log(tau)
	// Upper: v = min over lambda of (t logM(lambda) - log tau)/lambda;
	// lower: v = max over lambda of (log tau - t logM(-lambda))/lambda.
	u := minimizeLog(func(l float64) float64 { return (tf*logM(l) - logTau) / l })
	l := -minimizeLog(func(l float64) float64 { return -(logTau - tf*logM(-l)) / l })
	ku = int(math.Ceil(u/h)) + 1
	kl = int(math.Floor(l/h)) - 1
	return kl, ku
}

// minimizeLog minimises f over lambda in [1e-4, 1e4] on a log grid, then by
// golden-section search around the best grid point. Any lambda gives a valid
// bound; the search only tightens it.
func minimizeLog(f func(float64) float64) float64 {
	best, bestL := math.Inf(1), 1.0
	for e := -4.0; e <= 4.0; e += 0.5 {
		l := math.Pow(10, e)
		if v := f(l); v < best {
			best, bestL = v, l
		}
	}
	a, b := math.Log(bestL)-1.2, math.Log(bestL)+1.2
	g := (math.Sqrt(5) - 1) / 2
	c, d := b-g*(b-a), a+g*(b-a)
	fc, fd := f(math.Exp(c)), f(math.Exp(d))
	for i := 0; i < 20; i++ {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - g*(b-a)
			fc = f(math.Exp(c))
		} else {
			a, c, fc = c, d, fd
			d = a + g*(b-a)
			fd = f(math.Exp(d))
		}
	}
	return math.Min(best, math.Min(fc, fd))
}
