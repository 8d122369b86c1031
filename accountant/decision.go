package accountant

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
)

// The budget decision: whether one more entry fits a scope's budget. It is a
// pure function of the scope's budget, what its entries so far add up to and
// the new entry; reading those from the ledger is the caller's business.

// scopeSpend is what a scope's entries so far add up to.
type scopeSpend struct {
	sumSq       float64     // sum of GDPMu()^2 (CLT figure for subsampled entries, +Inf after a Laplace one)
	noiseTV     float64     // sum of the entries' sampler total-variation bounds (noise_tv)
	nonGaussian int         // entries that are not exactly GDP (neither gaussian nor external)
	comp        Composition // the rigorous composition of the entries
}

// checked is an accepted entry's figures, as recorded in the ledger row,
// dp_scope_state and the receipt.
type checked struct {
	budget              Budget
	mechanism           Mechanism
	newMu, muAfter      float64
	muRemaining, epsGDP float64
	epsilon             float64
	rigorous            bool
	comp                Composition // the scope's composition including this entry
	noiseTV             float64     // this entry's sampler total-variation bound
}

// epsilonBudget returns the epsilon a capped budget allows at its delta: the
// budget's own epsilon, or that of its mu.
func (b Budget) epsilonBudget() float64 {
	if b.Epsilon > 0 {
		return b.Epsilon
	}
	e, _ := Epsilon(b.Mu, b.Delta)
	return e
}

// certifiedEpsilon returns the smallest epsilon at which comp, released by
// samplers within tv in total variation of their ideal laws, is
// (epsilon, delta)-DP: a release within tv of an (epsilon, delta')-DP one is
// (epsilon, delta' + (1 + e^epsilon) tv)-DP, so epsilon is the smallest root
// of h(eps) = comp.Delta(eps) + (1 + e^eps) tv - delta. h is convex in e^eps
// (a hockey-stick curve is), so its roots lie on either side of its minimum;
// none exists (+Inf) when the samplers' error alone takes all of delta. With
// tv = 0 it is comp.Epsilon(delta).
func certifiedEpsilon(comp Composition, delta, tv float64) (float64, error) {
	if tv == 0 {
		return comp.Epsilon(delta)
	}
	// The root search sweeps the PLD some hundred times; a charge runs it
	// for its scope and for the file's total, which often hold the same
	// entries (one scope): remember the result by the composition's content.
	var key string
	if comp.c.legacy == nil {
		key = comp.c.contentKey() + "|" + strconv.FormatUint(math.Float64bits(delta), 16) + "|" + strconv.FormatUint(math.Float64bits(tv), 16)
		if e, ok := certified.get(key); ok {
			return e, nil
		}
	}
	certifiedSearches.Add(1)
	e, err := certifiedEpsilonBracket(comp, delta, tv)
	if err == nil && key != "" {
		certified.put(key, e)
	}
	return e, err
}

// certifiedSearches counts the root searches certifiedEpsilon ran (tests).
var certifiedSearches atomic.Int64

// certifiedMemo remembers recent certified epsilons by content.
type certifiedMemo struct {
	mu sync.Mutex
	m  map[string]float64
}

var certified = &certifiedMemo{m: map[string]float64{}}

func (c *certifiedMemo) get(k string) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e, ok
}

func (c *certifiedMemo) put(k string, e float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 256 {
		clear(c.m)
	}
	c.m[k] = e
}

// certifiedEpsilonBracket is certifiedEpsilon's root search, in some ten to
// twenty sweeps of the PLD instead of the hundred of a blind search
// (certifiedEpsilonSearch, to which it falls back when its bracket fails).
//
// Why the answer is sound: it only ever returns a point hi at which
// h(hi) = comp.Delta(hi) + (1 + e^hi) tv (1 + 4u) - delta <= 0 was evaluated,
// exactly as the blind search evaluates it, so comp released by those
// samplers is (hi, delta)-DP; every such point lies at or above the
// smallest root r1, so hi >= r1 whatever the seeds were (+Inf, or the blind
// search, when no such point turns up). The seeds only decide how close to
// r1 the answer lands.
//
// How it finds hi close to r1: with E(d) the tv = 0 epsilon at d (one
// cheap sweep of the folded PLD) and F(x) = E(delta - (1 + e^x) tv), the
// roots of h are the fixed points of F, F is increasing and tv << delta
// makes it nearly flat, so x0 = E(delta) and x_{k+1} = F(x_k) climb to r1
// from below in a few steps (h(x_k) > 0 there: each is a valid lower end,
// checked). Once a step is below tol, g = x + tol overshoots r1 and
// F(g) <= g, so F(g) lies in {h <= 0}: the upper end (checked). h is
// convex in e^eps (a hockey-stick curve is), so {h <= 0} is an interval and
// bisection keeping h(lo) > 0 >= h(hi) ends within 1e-12 (1 + hi) of its
// left end r1, the blind search's precision.
func certifiedEpsilonBracket(comp Composition, delta, tv float64) (float64, error) {
	comp, err := comp.folded() // many sweeps follow: convolve once
	if err != nil {
		return 0, err
	}
	h := certifiedGap(comp, delta, tv)
	e := func(d float64) (float64, error) { // the tv = 0 epsilon at d
		switch {
		case !(d > 0 && d < 1):
			return math.Inf(1), nil
		case comp.p != nil:
			return comp.p.Epsilon(d)
		case comp.mu == 0:
			return 0, nil
		}
		return Epsilon(comp.mu, d)
	}
	f := func(x float64) (float64, error) { return e(delta - (1+math.Exp(x))*tv*(1+4*rigULP)) }
	top := math.Log(delta/tv - 1) // beyond it the samplers' term alone exceeds delta
	if !(top > 0) {
		return math.Inf(1), nil
	}
	if h0, err := h(0); err != nil {
		return 0, err
	} else if h0 <= 0 {
		return 0, nil
	}
	lo, hi := 0.0, math.NaN() // h(lo) > 0 >= h(hi)
	x, err := e(delta)
	for k := 0; err == nil && k < 12 && x < top; k++ {
		hx, herr := h(x)
		if herr != nil {
			return 0, herr
		}
		if hx <= 0 {
			hi = x
			break
		}
		lo = math.Max(lo, x)
		tol := 1e-9 * (1 + x)
		var next float64
		if next, err = f(x); err != nil || !(next < top) {
			break
		}
		if next-x > tol {
			x = next
			continue
		}
		// Converged from below: overshoot by tol.
		g := x + tol
		if x, err = f(g); err != nil || x > g {
			break
		}
	}
	if math.IsNaN(hi) {
		return certifiedEpsilonSearch(comp, delta, tv)
	}
	return bisectRoot(h, lo, hi)
}

// certifiedGap returns h(eps) = comp.Delta(eps) + (1 + e^eps) tv (1 + 4u) -
// delta: comp released by samplers within tv of their laws is (eps,
// delta)-DP where h(eps) <= 0.
func certifiedGap(comp Composition, delta, tv float64) func(float64) (float64, error) {
	return func(eps float64) (float64, error) {
		d, err := comp.Delta(eps)
		return d + (1+math.Exp(eps))*tv*(1+4*rigULP) - delta, err
	}
}

// bisectRoot narrows h(lo) > 0 >= h(hi) to within 1e-12 (1 + hi) and returns
// the upper end, where h <= 0 was evaluated (the safe side).
func bisectRoot(h func(float64) (float64, error), lo, hi float64) (float64, error) {
	for hi-lo > 1e-12*(1+hi) {
		mid := lo + (hi-lo)/2
		hm, err := h(mid)
		if err != nil {
			return 0, err
		}
		if hm <= 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// certifiedEpsilonSearch is certifiedEpsilon's blind root search: the
// minimum of h by golden section, then the smallest root by bisection.
func certifiedEpsilonSearch(comp Composition, delta, tv float64) (float64, error) {
	comp, err := comp.folded() // many sweeps follow: convolve once
	if err != nil {
		return 0, err
	}
	h := certifiedGap(comp, delta, tv)
	top := math.Log(delta/tv - 1) // beyond it the samplers' term alone exceeds delta
	if !(top > 0) {
		return math.Inf(1), nil
	}
	// The minimum of h on [0, top], by golden-section search.
	lo, hi := 0.0, top
	const g = 0.6180339887498949
	for hi-lo > 1e-9*(1+hi) {
		a, b := hi-g*(hi-lo), lo+g*(hi-lo)
		ha, err := h(a)
		if err != nil {
			return 0, err
		}
		hb, err := h(b)
		if err != nil {
			return 0, err
		}
		if ha <= hb {
			hi = b
		} else {
			lo = a
		}
	}
	m := hi
	if hm, err := h(m); err != nil {
		return 0, err
	} else if hm > 0 {
		return math.Inf(1), nil
	}
	// The smallest root, on [0, m] where h decreases; rounded up.
	if h0, err := h(0); err != nil {
		return 0, err
	} else if h0 <= 0 {
		return 0, nil
	}
	lo, hi = 0, m
	return bisectRoot(h, lo, hi)
}

// decide returns the figures of scope b after m, whose sampler is within tv
// in total variation of its ideal law, is added to prior, or a *BudgetError
// if m does not fit. While the scope and m are all exactly GDP, GDP
// composition decides (with a relative tolerance for round-off in the sum of
// squares); otherwise, and whenever the scope's entries record a sampler
// error, the rigorous (PLD) epsilon at the effective delta decides, against
// the budget's epsilon (or the epsilon its mu gives). The file's total
// without a cap (Mu = +Inf) is computed, never refused.
func decide(b Budget, prior scopeSpend, m Mechanism, tv float64) (checked, error) {
	c := checked{budget: b, mechanism: m, newMu: m.GDPMu(), noiseTV: tv}
	var err error
	if c.comp, err = prior.comp.Add(m); err != nil {
		return checked{}, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", b.Scope, err)
	}
	muBefore := math.Sqrt(prior.sumSq)
	c.muAfter = math.Sqrt(prior.sumSq + c.newMu*c.newMu)
	if math.IsInf(c.newMu, 1) {
		c.muAfter = math.Inf(1)
	}
	c.muRemaining = math.Sqrt(math.Max(b.Mu*b.Mu-c.muAfter*c.muAfter, 0))
	if math.IsInf(b.Mu, 1) {
		c.muRemaining = math.Inf(1)
	}
	if c.epsGDP = math.Inf(1); !math.IsInf(c.muAfter, 1) {
		c.epsGDP, _ = Epsilon(c.muAfter, b.Delta)
	}
	c.epsilon = c.epsGDP
	capped := !math.IsInf(b.Mu, 1) // the file's total without a cap has none
	gaussOnly := prior.nonGaussian == 0 && m.IsGaussian()
	if gaussOnly {
		// Only Gaussian entries: GDP composition is exact.
		if capped && c.muAfter*c.muAfter > b.Mu*b.Mu*(1+tolerance) {
			return c, &BudgetError{Scope: b.Scope, Spent: muBefore, Need: c.newMu, Budget: b.Mu, AfterWouldBe: c.muAfter, Unit: "mu", Mechanism: m.Kind}
		}
	}
	totalTV := prior.noiseTV + tv
	if gaussOnly && (totalTV == 0 || !capped) {
		return c, nil
	}
	// A subsampled or non-Gaussian entry exists, or the samplers' error
	// must be paid from delta: the rigorous epsilon decides. The file's
	// total without a cap decides nothing, but its figure is what the '*'
	// row of dp_budget_status shows and Verify recomputes, so it is kept,
	// and kept cheap rather than made lazy: the bracketed search costs a
	// few sweeps, and when the total holds the same entries as the scope
	// at the same delta (a file of one scope) certifiedEpsilon's memo
	// returns the scope's figure without a sweep.
	epsAfter, err := certifiedEpsilon(c.comp, b.Delta, totalTV)
	if err != nil {
		return c, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", b.Scope, err)
	}
	if !gaussOnly {
		c.epsilon, c.rigorous = epsAfter, true
	}
	if !capped {
		return c, nil
	}
	epsBudget := b.epsilonBudget()
	// The PLD figure already bounds its own round-off; the GDP one (all
	// entries Gaussian) gets the sum-of-squares tolerance.
	limit := epsBudget
	if gaussOnly {
		limit *= 1 + tolerance
	}
	if !(epsAfter <= limit) {
		epsBefore, _ := certifiedEpsilon(prior.comp, b.Delta, prior.noiseTV) // for the message only
		return c, &BudgetError{Scope: b.Scope, Spent: epsBefore, Need: epsAfter - epsBefore, Budget: epsBudget, AfterWouldBe: epsAfter, Unit: "epsilon", Delta: b.Delta, NoiseTV: totalTV, Mechanism: m.Kind}
	}
	return c, nil
}

// maxGaussian returns the largest mu of one more add/remove Gaussian call
// that passes every check fits makes, to a relative precision of upper,
// rounded down (each check of a mixed scope composes a PLD).
func maxGaussian(upper, precision float64, fits func(mu float64) bool) float64 {
	if !(upper > 0) || math.IsInf(upper, 1) {
		return 0
	}
	if fits(upper) {
		return upper
	}
	lo, hi := 0.0, upper
	for hi-lo > precision*upper {
		mid := lo + (hi-lo)/2
		if mid > 0 && fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
