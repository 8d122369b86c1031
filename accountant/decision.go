package accountant

import (
	"fmt"
	"math"
)

// The budget decision: whether one more entry fits a scope's budget. It is a
// pure function of the scope's budget, what its entries so far add up to and
// the new entry; reading those from the ledger is the caller's business.

// scopeSpend is what a scope's entries so far add up to.
type scopeSpend struct {
	sumSq       float64     // sum of GDPMu()^2 (CLT figure for subsampled entries, +Inf after a Laplace one)
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
}

// decide returns the figures of scope b after m is added to prior, or a
// *BudgetError if m does not fit. While the scope and m are all exactly GDP,
// GDP composition decides (with a relative tolerance for round-off in the sum
// of squares); otherwise the rigorous (PLD) epsilon at the scope's delta
// decides, against the budget's epsilon (or the epsilon its mu gives).
func decide(b Budget, prior scopeSpend, m Mechanism) (checked, error) {
	c := checked{budget: b, mechanism: m, newMu: m.GDPMu()}
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
	if prior.nonGaussian == 0 && m.IsGaussian() {
		// Only Gaussian entries: GDP composition is exact.
		if capped && c.muAfter*c.muAfter > b.Mu*b.Mu*(1+tolerance) {
			return c, &BudgetError{Scope: b.Scope, Spent: muBefore, Need: c.newMu, Budget: b.Mu, AfterWouldBe: c.muAfter, Unit: "mu", Mechanism: m.Kind}
		}
		return c, nil
	}
	// A subsampled or non-Gaussian entry exists: every decision uses the
	// rigorous (PLD) figure.
	epsAfter, err := c.comp.Epsilon(b.Delta)
	if err != nil {
		return c, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", b.Scope, err)
	}
	c.epsilon, c.rigorous = epsAfter, true
	if !capped {
		return c, nil
	}
	epsBudget := b.Epsilon
	if epsBudget == 0 {
		epsBudget, _ = Epsilon(b.Mu, b.Delta)
	}
	// The PLD figure already bounds its own round-off: no tolerance here.
	if !(epsAfter <= epsBudget) {
		epsBefore, _ := prior.comp.Epsilon(b.Delta) // for the message only
		return c, &BudgetError{Scope: b.Scope, Spent: epsBefore, Need: epsAfter - epsBefore, Budget: epsBudget, AfterWouldBe: epsAfter, Unit: "epsilon", Delta: b.Delta, Mechanism: m.Kind}
	}
	return c, nil
}
