package accountant

import (
	"fmt"
	"math"
	"strconv"

	"github.com/dpsql/dpsql/internal/lru"
	"github.com/dpsql/dpsql/internal/tally"
	"github.com/dpsql/dpsql/mechanism"
)

// The budget decision: whether one more entry fits a scope's budget. It is a
// pure function of the scope's budget, what its entries so far add up to
// (Spend) and the new entry; reading those from the ledger is package
// ledger's business.

// Spend is what a scope's entries so far add up to, as the budget decision
// reads it: the zero Spend is a scope with nothing spent. A caller that
// keeps one per scope (the ledger, keyed by its chain's head) extends it with
// [Spend.With] after each accepted entry.
type Spend struct {
	SumSq       float64     // sum of GDPMu()^2 (CLT figure for subsampled entries, +Inf after a Laplace one)
	NoiseTV     float64     // sum of the entries' sampler total-variation bounds (noise_tv)
	NonGaussian int         // entries that are not exactly GDP (neither gaussian nor external)
	Comp        Composition // the rigorous composition of the entries
}

// Checked is an accepted entry's figures, as recorded in the ledger row,
// dp_scope_state and the receipt.
type Checked struct {
	Budget      Budget
	Mechanism   mechanism.Mechanism // as accounted in the scope's relation
	Mu          float64             // the entry's own GDP figure (CLT value for subsampled mechanisms)
	MuAfter     float64             // sqrt(sum mu_i^2) of the scope with the entry
	MuRemaining float64             // sqrt(budget^2 - MuAfter^2), +Inf without a cap
	EpsilonGDP  float64             // epsilon of MuAfter at the budget's delta
	Epsilon     float64             // the scope's epsilon at its delta: EpsilonGDP, or the rigorous figure
	Rigorous    bool                // Epsilon comes from the PLD accountant
	Comp        Composition         // the scope's composition including this entry
	NoiseTV     float64             // this entry's sampler total-variation bound
}

// With returns s after the entry accepted as c.
func (s Spend) With(c Checked) Spend {
	s.SumSq += c.Mu * c.Mu
	if !c.Mechanism.IsGaussian() {
		s.NonGaussian++
	}
	s.Comp = c.Comp
	s.NoiseTV += c.NoiseTV
	return s
}

// Add returns s after the entry m (in the scope's relation, its sampler
// within tv in total variation of its law), accounted exactly as Decide and
// With account an accepted entry, without deciding: what a ledger replays
// for the rows another process appended.
func (s Spend) Add(m mechanism.Mechanism, tv float64) (Spend, error) {
	comp, err := s.Comp.Add(m)
	if err != nil {
		return Spend{}, err
	}
	return s.With(Checked{Mechanism: m, Mu: m.GDPMu(), Comp: comp, NoiseTV: tv}), nil
}

// Certified returns the smallest epsilon at which the scope's entries,
// released by samplers within s.NoiseTV in total variation of their ideal
// laws, are (epsilon, delta)-DP: the figure the budget decision checks once
// a scope holds other than Gaussian entries.
func (s Spend) Certified(delta float64) (float64, error) {
	return certifiedEpsilon(s.Comp, delta, s.NoiseTV)
}

// SpendOf returns what the entries ms, in order, add up to in scope (of
// neighbour relation rel), each converted to that relation ([InScope]);
// NoiseTV is left 0 for the caller to set.
func SpendOf(scope, rel string, ms []mechanism.Mechanism) (Spend, error) {
	var s Spend
	acc := make([]mechanism.Mechanism, len(ms))
	for i, m := range ms {
		a, err := InScope(scope, rel, m)
		if err != nil {
			return Spend{}, fmt.Errorf("scope %q cannot be accounted: %w", scope, err)
		}
		mu := a.GDPMu()
		s.SumSq += mu * mu
		if !a.IsGaussian() {
			s.NonGaussian++
		}
		acc[i] = a
	}
	c, err := rigComposeAll(acc)
	if err != nil {
		return Spend{}, fmt.Errorf("scope %q cannot be accounted: %w", scope, err)
	}
	if s.Comp, err = (Composition{c: *c}).folded(); err != nil {
		return Spend{}, fmt.Errorf("scope %q cannot be accounted: %w", scope, err)
	}
	return s, nil
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
	// The root search sweeps the PLD some ten times; a charge runs it for
	// its scope and for the file's total, which often hold the same entries
	// (one scope): remember the result by the composition's key.
	key := string(comp.c.key[:]) + "|" + strconv.FormatUint(math.Float64bits(delta), 16) + "|" + strconv.FormatUint(math.Float64bits(tv), 16)
	if e, ok := certified.Get(key); ok {
		return e, nil
	}
	tally.CertifiedSearches.Add(1)
	e, err := certifiedEpsilonBracket(comp, delta, tv)
	if err == nil {
		certified.Put(key, e)
	}
	return e, err
}

// certified remembers recent certified epsilons by content.
var certified = lru.New[string, float64](256, nil)

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
		}
		return comp.c.epsilon(d)
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

// Decide returns the figures of scope b after m, whose sampler is within tv
// in total variation of its ideal law, is added to prior, or a *BudgetError
// if m does not fit. While the scope and m are all exactly GDP, GDP
// composition decides (with a relative tolerance for round-off in the sum of
// squares); otherwise, and whenever the scope's entries record a sampler
// error, the rigorous (PLD) epsilon at the effective delta decides, against
// the budget's epsilon (or the epsilon its mu gives). The file's total
// without a cap (Mu = +Inf) is computed, never refused.
func Decide(b Budget, prior Spend, m mechanism.Mechanism, tv float64) (Checked, error) {
	c := Checked{Budget: b, Mechanism: m, Mu: m.GDPMu(), NoiseTV: tv}
	muBefore := math.Sqrt(prior.SumSq)
	// As the ledger recomputes it from the chain (the sum of squares), bit
	// for bit; a hypot only where that overflows (a mu of 1e300, refused
	// below, whose message should not say +Inf).
	c.MuAfter = math.Sqrt(prior.SumSq + c.Mu*c.Mu)
	if math.IsInf(c.MuAfter, 1) && !math.IsInf(c.Mu, 1) && !math.IsInf(prior.SumSq, 1) {
		c.MuAfter = math.Hypot(muBefore, c.Mu)
	}
	if be := tooLarge(b, muBefore, prior, m); be != nil {
		return c, be
	}
	var err error
	if c.Comp, err = prior.Comp.Add(m); err != nil {
		return Checked{}, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", b.Scope, err)
	}
	c.MuAfter = b.Shown(c.MuAfter)
	c.MuRemaining = math.Sqrt(math.Max(b.Mu*b.Mu-c.MuAfter*c.MuAfter, 0))
	if math.IsInf(b.Mu, 1) {
		c.MuRemaining = math.Inf(1)
	}
	if c.EpsilonGDP = math.Inf(1); !math.IsInf(c.MuAfter, 1) {
		c.EpsilonGDP, _ = Epsilon(c.MuAfter, b.Delta)
	}
	c.Epsilon = c.EpsilonGDP
	capped := !math.IsInf(b.Mu, 1) // the file's total without a cap has none
	gaussOnly := prior.NonGaussian == 0 && m.IsGaussian()
	if gaussOnly {
		// Only Gaussian entries: GDP composition is exact.
		if capped && c.MuAfter*c.MuAfter > b.Mu*b.Mu*(1+tolerance) {
			return c, &BudgetError{Scope: b.Scope, Spent: muBefore, Need: c.Mu, Budget: b.Mu, AfterWouldBe: c.MuAfter, Unit: "mu", Mechanism: m.Kind}
		}
	}
	totalTV := prior.NoiseTV + tv
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
	epsAfter, err := certifiedEpsilon(c.Comp, b.Delta, totalTV)
	if err != nil {
		return c, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", b.Scope, err)
	}
	if !gaussOnly {
		c.Epsilon, c.Rigorous = epsAfter, true
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
		// For the message only: what was spent, and where the samplers'
		// error caps what the scope can certify, what the composition
		// would reach without it.
		be := &BudgetError{Scope: b.Scope, Budget: epsBudget, AfterWouldBe: epsAfter, Unit: "epsilon", Delta: b.Delta, NoiseTV: totalTV, Mechanism: m.Kind}
		if prior.NonGaussian == 0 && prior.NoiseTV == 0 {
			be.Spent, _ = Epsilon(muBefore, b.Delta)
		} else {
			be.Spent, _ = certifiedEpsilon(prior.Comp, b.Delta, prior.NoiseTV)
		}
		if cp := SamplerCap(b.Delta, totalTV); !(epsAfter < cp-1) {
			be.Cap = cp
			if e, err := c.Comp.Epsilon(b.Delta); err == nil {
				be.AfterWouldBe = e
			}
		}
		be.Need = be.AfterWouldBe - be.Spent
		return c, be
	}
	return c, nil
}

// tooLarge returns the refusal of an entry whose own figure already exceeds
// the budget, decided before composing it: no composition can cost less
// than one of its entries (a Gaussian of mu costs at least mu; a Laplace
// entry of epsilon e0 at least e0 + 2 log(1 - delta) at delta), and a
// release at an epsilon of 1e300 has no privacy loss distribution to
// compose.
func tooLarge(b Budget, muBefore float64, prior Spend, m mechanism.Mechanism) *BudgetError {
	if math.IsInf(b.Mu, 1) {
		return nil
	}
	for _, part := range m.Components() {
		switch part.Kind {
		case mechanism.KindGaussian, mechanism.KindExternal, mechanism.KindGaussianInf:
			if mu := part.GDPMu(); mu > b.Mu*(1+tolerance) {
				return &BudgetError{Scope: b.Scope, Spent: muBefore, Need: mu, Budget: b.Mu, AfterWouldBe: math.Hypot(muBefore, mu), Unit: "mu", Mechanism: m.Kind, Alone: true}
			}
		case mechanism.KindLaplace, mechanism.KindLaplaceInf:
			eb := b.epsilonBudget()
			e0 := part.Epsilon * part.StepsOrOne()
			if e0+2*math.Log1p(-b.Delta) > eb*(1+1e-9)+1e-9 {
				return &BudgetError{Scope: b.Scope, Need: e0, Budget: eb, AfterWouldBe: e0, Unit: "epsilon", Delta: b.Delta, Mechanism: m.Kind, Alone: true}
			}
		}
	}
	return nil
}

// MaxGaussian returns the largest mu of one more add/remove Gaussian call
// that passes every check fits makes, to a relative precision of upper,
// rounded down (each check of a mixed scope composes a PLD).
func MaxGaussian(upper, precision float64, fits func(mu float64) bool) float64 {
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
