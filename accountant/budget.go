package accountant

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/mechanism"
)

// FileScope names the whole file: its row of dp_budget_status is the total
// over every scope (they all protect the same people), and a budget created
// for it (dp_init(mu, delta, '*'), dpsql init --file-mu) caps that total:
// every charge must then pass both its scope's budget and the cap.
const FileScope = "*"

// DefaultScope is the budget scope a connection charges until dp_use_scope, the
// dp_scope DSN parameter or a --scope flag names another.
const DefaultScope = "default"

// OwnScopeOnly is in the message of every refusal of another scope on a
// connection confined to its own (an analyst's): package protect reports
// those as refusals.
const OwnScopeOnly = "this connection sees its own scope only"

// tolerance allows for floating-point round-off in sums of squares when a
// budget is spent exactly (e.g. 100 spends of 0.1 against a budget of 1).
const tolerance = 1e-12

// ErrBudget is what a refusal for lack of budget wraps (see [BudgetError]).
var ErrBudget = errors.New("privacy budget exceeded")

// Budget is one scope's budget.
type Budget struct {
	Scope      string
	Mu         float64 // GDP budget; always set
	Delta      float64 // delta at which epsilon figures are reported and checked
	Epsilon    float64 // set when the scope was created from (epsilon, delta)
	Neighbours string  // the scope's neighbour relation: AddRemove ("" means AddRemove) or ReplaceOne
}

// Relation returns the scope's neighbour relation, [mechanism.AddRemove]
// when unset.
func (b Budget) Relation() string {
	if b.Neighbours == "" {
		return mechanism.AddRemove
	}
	return b.Neighbours
}

// NewBudget builds an add/remove budget from either mu (epsilon == 0) or
// (epsilon, delta); set Neighbours on the result for a replace-one scope.
func NewBudget(scope string, mu, epsilon, delta float64) (Budget, error) {
	if scope == "" {
		return Budget{}, errors.New("scope name must not be empty")
	}
	if err := checkDelta(delta); err != nil {
		return Budget{}, err
	}
	b := Budget{Scope: scope, Delta: delta}
	switch {
	case epsilon != 0 && mu != 0:
		return b, errors.New("give either mu or epsilon for a budget, not both")
	case epsilon != 0:
		m, err := Mu(epsilon, delta)
		if err != nil {
			return b, err
		}
		b.Mu, b.Epsilon = m, epsilon
	default:
		if err := checkMu(mu); err != nil {
			return b, fmt.Errorf("budget: %w", err)
		}
		b.Mu = mu
	}
	return b, nil
}

// Shown returns the mu a scope that spent muSpent shows as spent: muSpent,
// or the budget's mu when it exceeds it by no more than the decision's
// allowance for round-off in sums of squares. A budget of 1 spent by exactly
// 100 charges of 0.1 shows 1 of 1, not 1.0000000000000002: the sum of the
// squares of the doubles nearest 0.1 rounds to 1.0000000000000007, whose
// square root the decision accepts as the budget.
func (b Budget) Shown(muSpent float64) float64 {
	if muSpent > b.Mu && muSpent*muSpent <= b.Mu*b.Mu*(1+tolerance) {
		return b.Mu
	}
	return muSpent
}

// Validate reports an error unless b is a budget a scope can have: a name,
// a positive finite mu, a delta strictly between 0 and 1 and a known
// neighbour relation.
func (b Budget) Validate() error {
	if b.Scope == "" {
		return errors.New("scope name must not be empty")
	}
	if !finitePos(b.Mu) {
		return errors.New("budget: mu must be positive")
	}
	if err := checkDelta(b.Delta); err != nil {
		return err
	}
	switch b.Neighbours {
	case "", mechanism.AddRemove, mechanism.ReplaceOne:
	default:
		return fmt.Errorf("budget: unknown neighbours %q (want %q or %q)", b.Neighbours, mechanism.AddRemove, mechanism.ReplaceOne)
	}
	return nil
}

// BudgetError explains a refused charge.
type BudgetError struct {
	Scope               string
	Spent, Need, Budget float64 // in mu, or epsilon when Unit == "epsilon"
	Unit                string
	Delta               float64
	AfterWouldBe        float64
	Mechanism           string
	NoiseTV             float64 // the scope's samplers' total-variation bound, paid from Delta
	// Cap, when set, is the largest epsilon the scope can certify at Delta
	// with its samplers' error (SamplerCap), which the charge would pass;
	// AfterWouldBe is then the composition's epsilon without that error.
	Cap float64
	// Alone is set when the entry alone exceeds the budget (decided
	// before composing it).
	Alone bool
}

func (e *BudgetError) Error() string {
	where := fmt.Sprintf("in scope %q", e.Scope)
	budget := "budget"
	if e.Scope == FileScope {
		where = fmt.Sprintf("for the whole file (scope %q, the owner's cap on the total over every scope)", e.Scope)
		budget = "cap"
	}
	at := ""
	if e.Unit == "epsilon" {
		at = fmt.Sprintf(" at delta = %g", e.Delta)
	}
	switch {
	case e.Alone:
		return fmt.Sprintf("privacy budget exceeded %s: this %s call alone needs %s = %.6g%s, over the %s of %.6g; nothing was released",
			where, e.Mechanism, e.Unit, e.Need, at, budget, e.Budget)
	case e.Cap > 0:
		return fmt.Sprintf("privacy budget exceeded %s: spent epsilon = %.6g%s; this %s call would take it "+
			"beyond epsilon = %.4g, the most this scope can certify at that delta with its noise samplers, whatever its budget: their error bound "+
			"(%.3g for this scope's draws; dpsql's samplers are within 2^-125 per value drawn) is paid from delta, "+
			"and beyond that epsilon it would take all of it; nothing was released",
			where, e.Spent, at, e.Mechanism, e.Cap, e.NoiseTV)
	}
	return fmt.Sprintf("privacy budget exceeded %s: spent %s = %.6g%s, this %s call needs %s = %.6g, which would bring the total to %.6g, over the %s of %.6g; nothing was released",
		where, e.Unit, e.Spent, at, e.Mechanism, e.Unit, e.Need, e.AfterWouldBe, budget, e.Budget)
}

// IsBudgetExceeded reports whether err is a refusal for lack of budget (of
// its scope or of the file's cap). An error that crossed SQLite carries its
// type only once recovered through its connection (ext.Typed); its message
// is never parsed.
func IsBudgetExceeded(err error) bool {
	return errors.Is(err, ErrBudget)
}

// Unwrap lets errors.Is(err, ErrBudget) match.
func (e *BudgetError) Unwrap() error { return ErrBudget }

func finitePos(x float64) bool { return x > 0 && !math.IsInf(x, 1) }
