package accountant

import (
	"context"
	"errors"
	"math"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/internal/lru"
	"github.com/dpsql/dpsql/mechanism"
)

// What a scope can still charge, in one figure every surface shows: the
// largest mu of one more exactly Gaussian entry that Decide accepts. The
// answer is always checked with Decide itself, so a charge of that mu is
// accepted, whatever decides (the GDP budget, the rigorous epsilon, the
// samplers' error paid from delta).

// Room returns the largest mu of one more exactly Gaussian entry (stated in
// the scope's neighbour relation, its sampler within tv in total variation
// of its law) that Decide accepts for budget b after prior, rounded down:
// to a relative 1e-9 while every entry is Gaussian, 1e-4 otherwise. It is 0
// when nothing fits (or less than 2e-6 of the budget's mu, which the
// decision's allowance for round-off in sums of squares still lets
// through), +Inf for a budget without a cap (the file's total when the
// owner set none). The samplers' error limits it where that decides: no
// scope can certify an epsilon at which (1 + e^epsilon) times the samplers'
// total-variation bound reaches its delta (SamplerCap).
//
// It stops when ctx is done, returning a mu that fits (below the answer) and
// ctx's error.
func Room(ctx context.Context, b Budget, prior Spend, tv float64) (float64, error) {
	if math.IsInf(b.Mu, 1) {
		return math.Inf(1), nil
	}
	hi := roomUpper(b, prior, tv)
	if !(hi > roomNegligible*b.Mu) {
		return 0, nil
	}
	var r float64
	var err error
	if prior.NonGaussian == 0 {
		r, err = roomExact(ctx, b, prior, tv, 0, hi, 1e-9)
	} else {
		r, err = roomMixed(ctx, b, prior, tv, hi)
	}
	if r <= roomNegligible*b.Mu {
		r = 0
	}
	return r, err
}

// roomNegligible is the share of a budget's mu below which Room reports 0:
// twice the room the decision's allowance for round-off (a relative 1e-12
// on mu^2) leaves in a spent budget.
const roomNegligible = 2e-6

// roomEvalHook is called at each evaluation of Decide (tests count them).
var roomEvalHook = func() {}

// roomFits reports whether Decide accepts a Gaussian of mu, and how far its
// figure lies from the limit (relative, <= 0 when accepted), which guides
// the search.
func roomFits(b Budget, prior Spend, tv, mu float64) (bool, float64, error) {
	roomEvalHook()
	c, err := Decide(b, prior, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu}, tv)
	var be *BudgetError
	switch {
	case err == nil:
		f := c.MuAfter/b.Mu - 1
		if c.Rigorous {
			f = c.Epsilon/b.epsilonBudget() - 1
		}
		return true, math.Min(f, 0), nil
	case errors.As(err, &be):
		return false, math.Max(be.AfterWouldBe/be.Budget-1, 1e-300), nil
	}
	return false, 0, err
}

// roomExact searches (lo, hi] with Decide itself: lo fits (or is 0), hi
// does not, to a relative precision.
func roomExact(ctx context.Context, b Budget, prior Spend, tv, lo, hi, precision float64) (float64, error) {
	ok, fhi, err := roomFits(b, prior, tv, hi)
	switch {
	case err != nil:
		return lo, err
	case ok:
		return hi, nil
	}
	flo := -1.0
	if lo == 0 {
		if f0, err := roomFigureNow(b, prior, tv); err == nil && f0 < 0 {
			flo = f0
		}
	}
	return falsePosition(ctx, lo, hi, flo, fhi, precision, func(mu float64) (bool, float64, error) {
		return roomFits(b, prior, tv, mu)
	})
}

// falsePosition narrows lo (fits, figure flo <= 0) and hi (does not fit,
// fhi > 0) to a relative precision of hi by the false position method with
// the Illinois step, every third step a bisection, and returns the last
// mu that fitted.
func falsePosition(ctx context.Context, lo, hi, flo, fhi, precision float64, fits func(float64) (bool, float64, error)) (float64, error) {
	side := 0
	for i := 0; i < 200 && hi-lo > precision*hi; i++ {
		if err := ctx.Err(); err != nil {
			return lo, err
		}
		mid := lo + (hi-lo)/2
		if fhi > 0 && !math.IsInf(fhi, 1) && flo < 0 && i%3 != 2 {
			x := lo + (hi-lo)*(-flo)/(fhi-flo)
			w := (hi - lo) * 1e-3 // away from the ends by a little
			mid = math.Min(math.Max(x, lo+w), hi-w)
		}
		ok, f, err := fits(mid)
		if err != nil {
			return lo, err
		}
		if ok {
			lo, flo = mid, f
			if side == -1 {
				fhi /= 2
			}
			side = -1
		} else {
			hi, fhi = mid, f
			if side == 1 {
				flo /= 2
			}
			side = 1
		}
	}
	return lo, nil
}

// roomMixed is Room for a scope holding other than Gaussian entries, whose
// every Decide composes a PLD of up to 2^14 bins and searches its certified
// epsilon (some milliseconds). The search runs on a coarse copy instead:
// the scope's PLD moved to a grid of at most roomBins bins by connect the
// dots, composed with the Gaussian of the candidate's merged mu on that
// grid, and accepted when its hockey-stick curve at one epsilon leaves room
// for the samplers' error: both PLDs dominate the ones Decide composes (a
// coarser connect-the-dots curve lies above a finer one), and a curve
// within delta at epsilon means a certified epsilon at most epsilon, so the
// mu found is one Decide accepts, to the coarse grid's discretisation. That
// mu is then checked with Decide, and, if refused (the decision's own
// coarsening can differ), narrowed down with Decide.
func roomMixed(ctx context.Context, b Budget, prior Spend, tv, hi float64) (float64, error) {
	c := &prior.Comp.c
	if c.p == nil {
		return roomExact(ctx, b, prior, tv, 0, hi, roomPrecision)
	}
	coarse, err := roomCoarse(c)
	if err != nil {
		return 0, err
	}
	tvTot := (prior.NoiseTV + tv) * (1 + 4*rigULP)
	top := b.epsilonBudget()*(1-1e-9) - 1e-11
	if !(top > 0) || !(SamplerCap(b.Delta, tvTot) > 0) {
		return 0, nil
	}
	// The figure of the coarse composition with a Gaussian of mu: how far
	// its best epsilon's delta, once the samplers are paid, lies from the
	// budget's delta (relative).
	var eps float64 // where the last evaluation found it
	fig := func(mu float64) (bool, float64, error) {
		if err := ctx.Err(); err != nil {
			return false, 0, err
		}
		f := coarse // nothing Gaussian to add
		if m := math.Sqrt((c.gsq+mu*mu)*(1+4*rigULP)) * (1 + 2*rigULP); m > 0 {
			g, err := rigGaussianPLD(m, coarse.Interval(), roomBins)
			if err != nil {
				return false, 0, err
			}
			if f, err = coarse.Compose(g); err != nil { // one FFT: read once, never extended
				return false, 0, err
			}
		}
		e, gap, err := roomBestEpsilon(f.Delta, b.Delta, tvTot, top)
		if err != nil {
			return false, 0, err
		}
		eps = e
		x := gap / b.Delta
		return x <= 0, x, nil
	}
	// A bracket from a first guess, a function of the state alone (the
	// figure must be what Verify recomputes): the GDP remainder of the
	// budget's mu after the mu whose epsilon is the scope's certified one,
	// then steps of 10% either way.
	lo, flo, fhi := 0.0, -1.0, 0.0
	guess := hi
	if e, err := certifiedEpsilon(prior.Comp, b.Delta, prior.NoiseTV+tv); err == nil && e > 0 && !math.IsInf(e, 1) {
		if m, err := Mu(e, b.Delta); err == nil && m < hi {
			guess = math.Sqrt(math.Max(hi*hi-m*m, 0))
		}
	}
	for range 12 {
		if !(guess > 0 && guess <= hi) {
			break
		}
		ok, f, err := fig(guess)
		if err != nil {
			return 0, err
		}
		if ok {
			lo, flo = guess, f
			if guess == hi {
				break
			}
			guess = math.Min(guess*1.1, hi)
			continue
		}
		hi, fhi = guess, f
		if lo > 0 {
			break
		}
		guess *= 0.9
	}
	r := lo
	if lo < hi {
		if fhi <= 0 {
			if _, fhi, err = fig(hi); err != nil {
				return 0, err
			}
		}
		if r, err = falsePosition(ctx, lo, hi, flo, fhi, roomPrecision/2, fig); err != nil {
			return r, err
		}
		if r > 0 {
			if _, _, err := fig(r); err != nil { // the epsilon of r
				return 0, err
			}
		}
	}
	// The scope's own composition has the last word: r fits when the
	// figure Decide would read, composed exactly as Decide composes it,
	// leaves room for the samplers at eps. Then its certified epsilon is
	// at most eps, below the budget's: Decide accepts r.
	for range 8 {
		if !(r > 0) {
			return 0, nil
		}
		ok, err := roomConfirm(b, prior, tv, r, eps)
		if err != nil {
			return 0, err
		}
		if ok {
			return r, nil
		}
		r *= 1 - roomPrecision
	}
	return roomExact(ctx, b, prior, tv, 0, r, roomPrecision)
}

// roomConfirm reports whether a Gaussian of mu added to prior leaves the
// composition's curve at eps (below the budget's epsilon) within delta once
// the samplers' error is paid: then the smallest epsilon Decide certifies
// lies below eps (its search ends within 1e-12 (1 + epsilon) of that
// smallest root, and eps keeps 1e-9 of room below the budget's).
func roomConfirm(b Budget, prior Spend, tv, mu, eps float64) (bool, error) {
	roomEvalHook()
	comp, err := prior.Comp.Add(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu})
	if err != nil {
		return false, err
	}
	d, err := comp.Delta(eps)
	if err != nil {
		return false, err
	}
	tvTot := prior.NoiseTV + tv
	return d+(1+math.Exp(eps))*tvTot*(1+4*rigULP) <= b.Delta, nil
}

// roomBestEpsilon returns the epsilon in (0, top] where a composition of
// hockey-stick curve delta, released by samplers within tv of their laws,
// leaves the most of the budget's delta, and what it leaves there
// (gap = delta(eps) + (1 + e^eps) tv - budget, <= 0 when the composition is
// certified at eps or below). While the samplers' term is negligible at top
// (its cap lies beyond), that is top itself: the curve decreases. Near the
// cap the two terms trade off: h(eps) is convex in e^eps, so its minimum is
// found by golden-section search.
func roomBestEpsilon(delta func(float64) (float64, error), budget, tv, top float64) (float64, float64, error) {
	h := func(e float64) (float64, error) {
		d, err := delta(e)
		return d + (1+math.Exp(e))*tv - budget, err
	}
	if cp := SamplerCap(budget, tv); top < cp-1 {
		g, err := h(top)
		return top, g, err
	} else if cp < top {
		top = cp
	}
	const phi = 0.6180339887498949
	lo, hi := 0.0, top
	for hi-lo > 1e-6*(1+hi) {
		a, b := hi-phi*(hi-lo), lo+phi*(hi-lo)
		ha, err := h(a)
		if err != nil {
			return 0, 0, err
		}
		hb, err := h(b)
		if err != nil {
			return 0, 0, err
		}
		if ha <= hb {
			hi = b
		} else {
			lo = a
		}
	}
	g, err := h(hi)
	return hi, g, err
}

// roomPrecision is the relative precision of Room on a mixed scope.
const roomPrecision = 1e-4

// roomBins is the bin cap of the coarse copy roomMixed searches on.
const roomBins = 1 << 10

// roomCoarse returns c's PLD on a grid of at most roomBins bins per
// direction, memoised by c's key.
func roomCoarse(c *rigComposition) (*pld.PLD, error) {
	if p, ok := rigCoarse.Get(c.key); ok {
		return p, nil
	}
	p, err := c.p.Fit(roomBins)
	if err != nil {
		return nil, err
	}
	return rigCoarse.Put(c.key, p), nil
}

var rigCoarse = lru.New[[32]byte, *pld.PLD](16, nil)

// roomFigureNow returns how far the scope's figure lies from its limit
// before anything more is charged (relative; < 0 when there is room).
func roomFigureNow(b Budget, prior Spend, tv float64) (float64, error) {
	if prior.NonGaussian == 0 {
		return math.Sqrt(prior.SumSq)/b.Mu - 1, nil
	}
	e, err := certifiedEpsilon(prior.Comp, b.Delta, prior.NoiseTV+tv)
	if err != nil {
		return 0, err
	}
	return e/b.epsilonBudget() - 1, nil
}

// roomUpper returns a mu no accepted Gaussian entry can exceed: the GDP
// room while every entry is Gaussian, and in any case the mu whose own
// epsilon reaches the budget's epsilon or the samplers' cap (adding entries
// never lowers an epsilon).
func roomUpper(b Budget, prior Spend, tv float64) float64 {
	e := b.epsilonBudget()
	if c := SamplerCap(b.Delta, prior.NoiseTV+tv); c < e {
		e = c
	}
	u := 1e6
	if e > 0 && !math.IsInf(e, 1) {
		if m, err := Mu(e*(1+1e-9), b.Delta); err == nil {
			u = m
		}
	} else if e <= 0 {
		return 0
	}
	if prior.NonGaussian == 0 {
		// Without the decision's allowance for round-off: a scope spent
		// exactly (100 charges of 0.1 of a budget of 1) has nothing left,
		// and a fresh one has its budget, not a little more.
		sq := math.Min(b.Mu*b.Mu, u*u) - prior.SumSq
		return math.Sqrt(math.Max(sq, 0))
	}
	return u
}

// SamplerCap returns the largest epsilon any composition can be certified
// at, at delta, when its samplers are within tv in total variation of their
// ideal laws: a release within tv of an (epsilon, delta')-DP one is only
// (epsilon, delta' + (1 + e^epsilon) tv)-DP, so no epsilon at which
// (1 + e^epsilon) tv reaches delta can be certified (+Inf when tv is 0).
// dpsql's samplers are within 2^-125 per value drawn: at delta 1e-5 the cap
// is epsilon 75 after one value, about 68 after a thousand.
func SamplerCap(delta, tv float64) float64 {
	if !(tv > 0) {
		return math.Inf(1)
	}
	r := delta/tv - 1
	if !(r > 1) {
		return 0
	}
	return math.Log(r)
}
