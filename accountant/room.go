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
// to a relative 1e-9 while every entry is Gaussian, otherwise to a lattice
// point of roomMixed's search, below Decide's limit by the coarse grid's
// discretisation and at most one lattice step: about 3e-4 while much of the
// budget is left, but the discretisation is not relative to a small
// remainder, so on a nearly full scope the room can lie several percent
// below the limit, or be 0 while some 1.5% of the budget's mu still fits
// (TestReview23RoomNearlyFullPrecision). It is 0
// when nothing fits (or less than 2e-6 of the budget's mu, which the
// decision's allowance for round-off in sums of squares still lets
// through), +Inf for a budget without a cap (the file's total when the
// owner set none). The samplers' error limits it where that decides: no
// scope can certify an epsilon at which (1 + e^epsilon) times the samplers'
// total-variation bound reaches its delta (SamplerCap).
//
// It stops when ctx is done, returning a mu that fits (below the answer) and
// ctx's error; on any other error it returns a mu that fits too (0, or the
// last one its search confirmed) with that error, so a caller that must
// record a figure can record that safe one (the ledger does).
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
// mu is then checked with the composition Decide makes (roomConfirm), and,
// if refused (the decision's own coarsening can differ), stepped down.
//
// The candidates are the merged mu of the Gaussian the charge would add
// (the scope's waiting Gaussian part with the new one, as
// rigComposition.extend merges them), taken on a fixed lattice: the floats
// whose mantissa ends in roomLatticeDrop zero bits (steps of 6e-5 to 1.2e-4,
// relative). The answer is the largest lattice point the coarse figure
// accepts, found from a bracket that is a function of the state alone (the
// figure must be what Verify recomputes), then the largest room whose
// merged mu is that point. Why a lattice: the Gaussian PLDs of a lattice
// point (on the coarse grid for the search, on the scope's grid for the
// confirmation) are memoised by their mu, and the room moves by less than
// a lattice step from one charge to the next, so most charges build none
// of them (building them was half of a charge's cost).
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
	// The figure of the coarse composition with a Gaussian of merged mu
	// at lattice point k.
	memo := map[int64]roomEval{}
	fig := func(k int64) (roomEval, error) {
		if v, ok := memo[k]; ok {
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return roomEval{}, err
		}
		g, err := rigGaussianPLD(roomLatticeMu(k), coarse.Interval(), roomBins)
		if err != nil {
			return roomEval{}, err
		}
		f, err := coarse.Compose(g) // one FFT: read once, never extended
		if err != nil {
			return roomEval{}, err
		}
		e, gap, err := roomBestEpsilon(f.Delta, b.Delta, tvTot, top)
		if err != nil {
			return roomEval{}, err
		}
		v := roomEval{ok: gap <= 0, f: gap / b.Delta, eps: e}
		memo[k] = v
		return v, nil
	}
	// The lattice points searched: from kmin, the first whose room is at
	// least roomNegligible of the budget's mu (Room reports 0 below that
	// share, so no lattice point under it can change the answer; searching
	// them reached lattice point 1, a subnormal mu whose Gaussian PLD
	// cannot be built, when no Gaussian waits: review23; and never a
	// subnormal one, for a budget's mu below 1e-302), to kmax, the last at
	// or below the merged mu of hi.
	kmin := max(roomLatticeUp(roomMerged(c.gsq, roomNegligible*b.Mu)), roomLatticeUp(0x1p-1022))
	if r, _ := roomOfMerged(c.gsq, roomLatticeMu(kmin)); !(r > 0) {
		kmin++
	}
	kmax := roomLatticeDown(roomMerged(c.gsq, hi))
	if kmax < kmin {
		return 0, nil
	}
	// A bracket from a first guess, a function of the state alone: the GDP
	// remainder of the budget's mu after the mu whose epsilon is the
	// scope's certified one (some 2% above the answer), then steps of 3%,
	// doubling, either way. lo fits (kmin-1 stands for the room 0, which
	// always does), hiK does not (kmax+1 stands for beyond hi). The
	// certified epsilon is the scope's own (its samplers' error without the
	// new call's, which moves it by far less than the guess's error): the
	// figure the charge that made the state computed, memoised.
	guess := hi
	if e, err := certifiedEpsilon(prior.Comp, b.Delta, prior.NoiseTV); err == nil && e > 0 && !math.IsInf(e, 1) {
		if m, err := Mu(e, b.Delta); err == nil && m < hi {
			guess = math.Sqrt(math.Max(hi*hi-m*m, 0))
		}
	}
	lo, hiK := kmin-1, kmax+1
	flo, fhi := -1.0, math.Inf(1)
	k := min(max(roomLatticeDown(roomMerged(c.gsq, guess)), kmin), kmax)
	step := 0.03
	for range 12 {
		v, err := fig(k)
		if err != nil {
			return 0, err
		}
		if v.ok {
			lo, flo = k, v.f
			if hiK <= kmax || k == kmax {
				break
			}
			k = max(min(roomLatticeDown(roomLatticeMu(k)*(1+step)), kmax), lo+1)
		} else {
			hiK, fhi = k, v.f
			if lo >= kmin || k == kmin {
				break
			}
			k = min(max(roomLatticeDown(roomLatticeMu(k)*(1-step)), kmin), hiK-1)
		}
		step *= 2
	}
	if lo, err = roomLatticeSearch(ctx, lo, hiK, flo, fhi, fig); err != nil {
		return 0, err
	}
	// The scope's own composition has the last word: the room r of the
	// lattice point fits when the figure Decide would read, composed
	// exactly as Decide composes it, leaves room for the samplers at the
	// coarse figure's epsilon. Then its certified epsilon is at most that
	// epsilon, below the budget's: Decide accepts r.
	for range 8 {
		if lo < kmin {
			return 0, nil
		}
		v, err := fig(lo)
		if err != nil {
			return 0, err
		}
		r, _ := roomOfMerged(c.gsq, roomLatticeMu(lo))
		if v.ok && r > 0 {
			ok, err := roomConfirm(b, prior, tv, r, v.eps)
			if err != nil {
				return 0, err
			}
			if ok {
				return r, nil
			}
		}
		lo -= 2
	}
	r, _ := roomOfMerged(c.gsq, roomLatticeMu(max(lo, kmin)))
	return roomExact(ctx, b, prior, tv, 0, math.Max(r, 0), roomPrecision)
}

// roomEval is the coarse figure at one lattice point: whether the coarse
// composition's delta at its best epsilon, once the samplers are paid,
// fits the budget's delta, how far it lies from it (relative: <= 0 when it
// fits), and that epsilon.
type roomEval struct {
	ok     bool
	f, eps float64
}

// roomLatticeSearch narrows lo (a lattice point that fits, figure flo <= 0)
// and hi (one that does not, figure fhi > 0, +Inf when not evaluated) to
// adjacent points and returns lo. It interpolates log(1 + figure), the log
// of the figure's delta over the budget's, which is close to linear in the
// lattice index where delta itself rises steeply (the false position
// method with the Illinois step), and bisects when one end has no figure
// or the same end moved three times in a row.
func roomLatticeSearch(ctx context.Context, lo, hi int64, flo, fhi float64, fig func(int64) (roomEval, error)) (int64, error) {
	y := func(f float64) float64 { return math.Log1p(f) }
	ylo, yhi := y(flo), y(fhi)
	side, run := 0, 0
	for hi-lo > 1 {
		if err := ctx.Err(); err != nil {
			return lo, err
		}
		mid := lo + (hi-lo)/2
		if ylo < 0 && !math.IsInf(ylo, -1) && yhi > 0 && !math.IsInf(yhi, 1) && run < 3 {
			x := float64(lo) + float64(hi-lo)*(-ylo)/(yhi-ylo)
			mid = min(max(int64(math.Round(x)), lo+1), hi-1)
		}
		v, err := fig(mid)
		if err != nil {
			return lo, err
		}
		s := 1
		if v.ok {
			s = -1
		}
		if s == side {
			run++
		} else {
			run = 0
		}
		if v.ok {
			lo, ylo = mid, y(v.f)
			if side == -1 {
				yhi /= 2
			}
		} else {
			hi, yhi = mid, y(v.f)
			if side == 1 {
				ylo /= 2
			}
		}
		side = s
	}
	return lo, nil
}

// roomLatticeDrop is the number of low mantissa bits every lattice point's
// merged mu has zero: 13 bits are kept after the leading one, steps of
// 2^-13 to 2^-12 relative. Finer steps state the room more closely but
// move the search to a new lattice point, whose Gaussian PLDs must be
// built, at more charges (the room falls by some 1e-5 per charge on the
// benchmark's scope).
const roomLatticeDrop = 52 - 13

// roomLatticeMu returns lattice point k's merged mu.
func roomLatticeMu(k int64) float64 { return math.Float64frombits(uint64(k) << roomLatticeDrop) }

// roomLatticeDown returns the last lattice point at or below m > 0.
func roomLatticeDown(m float64) int64 { return int64(math.Float64bits(m) >> roomLatticeDrop) }

// roomLatticeUp returns the first lattice point at or above m > 0.
func roomLatticeUp(m float64) int64 {
	k := roomLatticeDown(m)
	if roomLatticeMu(k) < m {
		k++
	}
	return k
}

// roomMerged returns the merged mu of the Gaussian a charge of mu r adds to
// a composition whose Gaussian part waiting to be composed has the sum of
// squares gsq, computed exactly as rigComposition.extend computes it.
func roomMerged(gsq, r float64) float64 {
	return math.Sqrt((gsq+r*r)*(1+4*rigULP)) * (1 + 2*rigULP)
}

// roomOfMerged returns the largest r >= 0 whose merged mu (roomMerged) is
// at most m (-1 when even 0's exceeds it), and whether it is m exactly.
func roomOfMerged(gsq, m float64) (float64, bool) {
	if roomMerged(gsq, 0) > m {
		return -1, false
	}
	s := m / (1 + 2*rigULP)
	r := math.Sqrt(math.Max(s*s/(1+4*rigULP)-gsq, 0))
	for i := 0; i < 64 && r > 0 && roomMerged(gsq, r) > m; i++ {
		r = math.Nextafter(r, 0)
	}
	for i := 0; i < 64; i++ {
		n := math.Nextafter(r, math.Inf(1))
		if roomMerged(gsq, n) > m {
			break
		}
		r = n
	}
	return r, roomMerged(gsq, r) == m
}

// roomConfirm reports whether a Gaussian of mu added to prior leaves the
// composition's curve at eps (below the budget's epsilon) within delta once
// the samplers' error is paid: then the smallest epsilon Decide certifies
// lies below eps (its search ends within 1e-12 (1 + epsilon) of that
// smallest root, and eps keeps 1e-9 of room below the budget's).
//
// The composition Decide reads is the scope's PLD accumulated with the
// Gaussian of the merged mu (rigComposition.extend folds it in, or figure
// composes it): first an upper bound on its curve at eps, computed without
// the convolution (pld.PLD.AccumulateDeltaBound), which settles it in most
// cases; the composition itself only when the bound does not.
func roomConfirm(b Budget, prior Spend, tv, mu, eps float64) (bool, error) {
	roomEvalHook()
	tvTot := prior.NoiseTV + tv
	samplers := (1 + math.Exp(eps)) * tvTot * (1 + 4*rigULP)
	if c := &prior.Comp.c; c.p != nil {
		m := roomMerged(c.gsq, mu)
		g, err := rigGaussianPLD(m, c.p.Interval(), ledgerMaxBins)
		if err != nil {
			return false, err
		}
		maxBins := pld.DefaultMaxBins // figure's
		if rigGaussBins(m, c.p.Interval()) >= rigFoldBins {
			maxBins = ledgerMaxBins // extend's fold
		}
		if d, ok := c.p.AccumulateDeltaBound(g, maxBins, eps); ok && d+samplers <= b.Delta {
			return true, nil
		}
	}
	comp, err := prior.Comp.Add(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu})
	if err != nil {
		return false, err
	}
	d, err := comp.Delta(eps)
	if err != nil {
		return false, err
	}
	return d+samplers <= b.Delta, nil
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

// roomPrecision is the relative precision of roomExact on a mixed scope
// (roomMixed's own is its lattice's step).
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
