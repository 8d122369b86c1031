package pld

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// A running composition: a ledger extends its scope's PLD by one entry per
// charge, thousands of times, and each extension must cost the same however
// many came before. Compose alone does not bound that cost: the composed loss
// range of bounded-loss mechanisms (Laplace, truncated Laplace, grid noise)
// grows with every entry, and every FFT convolution charges an absolute
// round-off bound at +infinity that adds up over the entries. Accumulate
// bounds both:
//
//   - the result holds at most maxBins bins per direction: tails of mass at
//     most Tail are trimmed (upper to +infinity, lower merged into the lowest
//     kept bin, as every composition does), then, if still too wide, the
//     measure is moved to a grid coarser by a power of two by connect the
//     dots (recoarsen): the coarse measure's hockey-stick curve interpolates
//     the fine one's, linearly in e^eps, between the coarse grid points, and
//     lies above it everywhere because every hockey-stick curve is convex in
//     e^eps. The discretisation error is thus charged, and it is second order
//     in the new spacing, where rounding every loss up to the coarse grid
//     would cost up to a whole spacing of epsilon;
//   - when the direct convolution is affordable (the product of the two
//     widths at most directMaxOps), it is computed directly. All its terms are non-negative, so
//     the floating-point error of each output is at most gamma_m (Higham,
//     Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5, m the
//     number of terms) times the output itself: the result is multiplied by
//     1 + 4 (m + 2) u, which makes every output at least its exact value. The
//     round-off is thus charged relative to each bin, as a scale of the whole
//     measure (which raises every delta by the same tiny factor), and nothing
//     is added at +infinity: ten thousand extensions raise delta by a factor
//     1 + 2e-10 at most, where FFT bounds would have added some 1e-10 in
//     absolute terms and made a delta of 1e-9 uncertifiable. Wider operands go
//     through Compose's FFT with its absolute bound (some 3e-13 each): that
//     happens when the new entry is wide against the composition's grid, a
//     sizable share of all that was composed. Hundreds of such entries in a
//     scope of delta 1e-9 reach the refusal of ErrRoundoff (bound above
//     delta/10), as distinct such entries did before.
//
// Both steps move mass only upwards or scale it up, so the result dominates
// the composition in the sense of the package documentation.

// directMaxOps is the largest product of the operands' widths that
// Accumulate and SelfCompose convolve directly (some 5 ms of multiply-adds).
const directMaxOps = 1 << 24

// Accumulate returns the PLD of running both mechanisms, like Compose, with
// at most maxBins bins per direction (see above). The narrower operand
// should be the new entry: its width decides between the direct and the FFT
// convolution.
func (p *PLD) Accumulate(o *PLD, maxBins int) (*PLD, error) {
	if !p.ok() || !o.ok() {
		return nil, errZero
	}
	if maxBins < 16 {
		return nil, fmt.Errorf("pld: max bins must be at least 16, got %d", maxBins)
	}
	a, b, err := align(p, o)
	if err != nil {
		return nil, err
	}
	if a.width() < b.width() {
		a, b = b, a
	}
	out := &PLD{h: a.h, tail: math.Max(a.tail, b.tail), maxBins: maxBins}
	tau := AccumulateTail
	if a.width()*b.width() > directMaxOps {
		// The FFT leaves an absolute error floor in every bin, which
		// trimming at AccumulateTail would keep as far tails that never
		// shrink: trim at the PLD's own tail.
		tau = out.tail
		if a.add == nil && b.add == nil {
			out.rem, _ = conv(a.rem, b.rem, nil, nil)
		} else {
			out.rem, out.add = conv(a.rem, b.rem, a.addOrRem(), b.addOrRem())
		}
	} else {
		out.rem = convDirect(a.rem, b.rem)
		if a.add != nil || b.add != nil {
			out.add = convDirect(a.addOrRem(), b.addOrRem())
		}
	}
	if err := out.trimAt(tau); err != nil {
		return nil, err
	}
	out.fitCTD(maxBins)
	return out, nil
}

// AccumulateTail is the mass a direct convolution of Accumulate (and
// SelfCompose's direct powering) may trim from each tail of each direction:
// far below a Config's Tail, because a ledger's scope repeats it once per
// charge: ten thousand charges move at most 2e-13 to +infinity this way.
// After an FFT convolution (a wide entry, a sizable share of the budget,
// which a budget allows only a few times) the PLD's own Tail applies.
const AccumulateTail = 1e-17

// trimAt is trim with the tail mass tau.
func (p *PLD) trimAt(tau float64) error {
	for _, d := range p.dirs() {
		if err := d.clampTrim(tau); err != nil {
			return err
		}
	}
	return nil
}

// selfComposeDirect returns the k-fold self-composition of p by binary
// powering with direct convolutions (round-off relative to each bin, nothing
// charged at +infinity; see above), or nil when that would take more than
// directMaxOps*4 multiply-adds: then the FFT's powering is cheaper.
func (p *PLD) selfComposeDirect(k int) *PLD {
	// The cost without trimming, an upper bound.
	ops, n := 0, p.width()
	acc := 0
	for kk := k; kk > 0; kk >>= 1 {
		if kk&1 == 1 {
			if acc > 0 {
				ops += acc * n
			}
			acc += n
		}
		if kk > 1 {
			ops += n * n
			n *= 2
		}
		if ops > directMaxOps*4 {
			return nil
		}
	}
	step := func(a, b *PLD) *PLD {
		out := &PLD{h: a.h, tail: a.tail, maxBins: a.maxBins}
		if a.width() < b.width() {
			a, b = b, a
		}
		out.rem = convDirect(a.rem, b.rem)
		if a.add != nil || b.add != nil {
			out.add = convDirect(a.addOrRem(), b.addOrRem())
		}
		if out.trimAt(AccumulateTail) != nil {
			return nil
		}
		return out
	}
	var r *PLD
	s := p
	for kk := k; kk > 0; kk >>= 1 {
		if kk&1 == 1 {
			if r == nil {
				r = s
			} else if r = step(r, s); r == nil {
				return nil
			}
		}
		if kk > 1 {
			if s = step(s, s); s == nil {
				return nil
			}
		}
	}
	return r
}

// convDirect returns the linear convolution of a and b (b the narrower),
// computed term by term and scaled up to cover its round-off (see above),
// with its +infinity mass and round-off bound composed by combine.
func convDirect(a, b *pmf) *pmf {
	c := &pmf{lo: a.lo + b.lo, p: make([]float64, len(a.p)+len(b.p)-1)}
	for j, w := range b.p {
		if w != 0 {
			// out += w a: one rounded product and one rounded sum per
			// term (gonum's SSE2 loop on amd64, as the plain Go loop).
			floats.AddScaled(c.p[j:j+len(a.p)], w, a.p)
		}
	}
	// Each output is a sum of at most m = len(b.p) products of
	// non-negative numbers, accumulated in order: its computed value is at
	// least (1 - gamma_m) times the exact one, gamma_m = m u/(1 - m u), and
	// the scaling below rounds by one more u.
	s := 1 + 4*float64(len(b.p)+2)*unitRoundoff
	for i := range c.p {
		c.p[i] *= s
	}
	combine(c, a, b, 0)
	return c
}

// fitCTD moves p (in place) to the finest grid coarser by a power of two on
// which it fits in maxBins bins per direction, by connect the dots
// (recoarsen).
func (p *PLD) fitCTD(maxBins int) {
	n := len(p.rem.p)
	if p.add != nil {
		n = max(n, len(p.add.p))
	}
	if n <= maxBins {
		return
	}
	f := 2
	for n/f+4 > maxBins {
		f *= 2
	}
	for _, d := range p.dirs() {
		*d = *d.recoarsen(p.h, f)
	}
	p.h *= float64(f)
}

// recoarsen returns a on the grid of spacing H = factor h by connect the
// dots from a's own hockey-stick curve: with delta_K a's curve at K H
// (computed with an error bound, deltaGrid), from one point below a's
// smallest loss to one at or above its largest, the coarse measure has tail
// masses A_K = delta_(K-1) + (delta_(K-1) - delta_K)/(e^H - 1), each raised
// by its error bound (the 1/(e^H - 1) factor amplifies it) and made
// monotone, as build does for a mechanism. Its curve interpolates a's
// linearly in e^eps between the coarse points (and coincides with it below
// the lowest, where both are linear in e^eps with the same total mass and
// the same value there), and a's curve is convex in e^eps (a sum of
// (1 - e^(eps - x))_+ terms), so the coarse curve lies above a's at every
// real eps: it dominates a, and through a whatever a dominates. Mass at
// +infinity and the round-off bound are kept as they are.
func (a *pmf) recoarsen(h float64, factor int) *pmf {
	n := len(a.p)
	klo := floorDiv(a.lo, factor) - 1
	khi := ceilDiv(a.lo+n-1, factor)
	m := khi - klo + 1
	ks := make([]int, m)
	for i := range ks {
		ks[i] = (klo + i) * factor
	}
	c := a.inf + a.err
	up := a.deltaGrid(h, ks) // c + d slack: upper bounds
	// deltaGrid's d is a sum of non-negative terms within a relative
	// slack - 1 of the exact one either way.
	xmax := math.Max(math.Abs(float64(a.lo)*h), math.Abs(float64(a.lo+n)*h))
	rel := 2 * (float64(2*n+16) + 8*xmax) * unitRoundoff
	eh1 := math.Expm1(h * float64(factor))
	vals := make([]float64, m)
	errs := make([]float64, m)
	for i, v := range up {
		vals[i] = v
		errs[i] = (v-c)*rel + 4*unitRoundoff*v
	}
	vals[m-1], errs[m-1] = c, 0 // at or above every finite loss
	A := make([]float64, m+1)
	A[m] = c
	for j := m - 1; j >= 1; j-- {
		v := vals[j-1] + (vals[j-1]-vals[j])/eh1
		e := (errs[j-1]*(1+1/eh1) + errs[j]/eh1) + 8*unitRoundoff*math.Abs(v) + 2*unitRoundoff*vals[j-1]/eh1
		A[j] = math.Max(v+e, A[j+1])
	}
	A[0] = math.Max(a.mass()+c, A[1])
	out := &pmf{lo: klo, p: make([]float64, m), inf: a.inf, err: a.err}
	for i := range out.p {
		// Each difference is within a relative u of exact: scale it up.
		out.p[i] = (A[i] - A[i+1]) * (1 + 4*unitRoundoff)
	}
	return out
}

// Fit returns p on the finest grid, coarser by a power of two, on which it
// holds at most maxBins bins per direction (p itself when it already does),
// moved there by connect the dots: the result dominates p.
func (p *PLD) Fit(maxBins int) (*PLD, error) {
	if !p.ok() {
		return nil, errZero
	}
	if maxBins < 16 {
		return nil, fmt.Errorf("pld: max bins must be at least 16, got %d", maxBins)
	}
	c := *p
	c.rem = p.rem.clone()
	if p.add != nil {
		c.add = p.add.clone()
	}
	c.fitCTD(maxBins)
	return &c, nil
}

// width is the number of bins of p's wider direction.
func (p *PLD) width() int {
	n := len(p.rem.p)
	if p.add != nil {
		n = max(n, len(p.add.p))
	}
	return n
}
