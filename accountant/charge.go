package accountant

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Charge describes one spend.
type Charge struct {
	Scope     string
	Mechanism Mechanism
	Details   map[string]any // recorded in params beside the mechanism (n, d, chosen features, ...)
	Query     string         // the SQL text that made the charge
}

// Receipt is what a committed charge reports.
type Receipt struct {
	ID          int64
	Scope       string
	Mu          float64 // this charge's GDP figure (CLT value for subsampled mechanisms)
	MuSpent     float64 // sqrt(sum mu_i^2) of the scope after this charge
	MuRemaining float64 // the largest mu a further Gaussian charge may still spend
	Epsilon     float64 // epsilon of the scope's spend at its delta (rigorous where needed)
	Delta       float64
	Rigorous    bool // Epsilon comes from the PLD accountant
	Params      map[string]any
}

// BudgetError explains a refused charge.
type BudgetError struct {
	Scope               string
	Spent, Need, Budget float64 // in mu, or epsilon when Unit == "epsilon"
	Unit                string
	Delta               float64
	AfterWouldBe        float64
	Mechanism           string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("privacy budget exceeded in scope %q: spent %s = %.6g, this %s call needs %s = %.6g, which would bring the total to %.6g, over the budget of %.6g%s; nothing was released",
		e.Scope, e.Unit, e.Spent, e.Mechanism, e.Unit, e.Need, e.AfterWouldBe, e.Budget, e.deltaNote())
}

func (e *BudgetError) deltaNote() string {
	if e.Unit == "epsilon" {
		return fmt.Sprintf(" (at delta = %g)", e.Delta)
	}
	return ""
}

// IsBudgetExceeded reports whether err is a refusal for lack of budget, also
// after it crossed the SQL boundary (where SQLite keeps only its message).
func IsBudgetExceeded(err error) bool {
	return err != nil && (errors.Is(err, ErrBudget) || strings.Contains(err.Error(), ErrBudget.Error()))
}

// Unwrap lets errors.Is(err, ErrBudget) match.
func (e *BudgetError) Unwrap() error { return ErrBudget }

// Charge checks the scope's budget, appends the ledger row and runs release, all
// in one IMMEDIATE transaction that is committed before Charge returns. release
// (may be nil) writes release tables with tx and may return details to record
// in the row; if it fails, nothing is charged and nothing is released.
func (l *Ledger) Charge(ctx context.Context, c Charge, release func(tx *sql.Tx) (map[string]any, error)) (Receipt, error) {
	if err := c.Mechanism.Validate(); err != nil {
		return Receipt{}, err
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return Receipt{}, l.lockError(err)
	}
	defer tx.Rollback()

	st, err := checkBudget(ctx, tx, c.Scope, c.Mechanism)
	if err != nil {
		return Receipt{}, err
	}
	params := map[string]any{}
	for k, v := range c.Details {
		params[k] = v
	}
	if release != nil {
		more, err := release(tx)
		if err != nil {
			return Receipt{}, err
		}
		for k, v := range more {
			params[k] = v
		}
	}
	// The mechanism's own fields win over details of the same name.
	for k, v := range c.Mechanism.Fields() {
		params[k] = v
	}
	pj, err := json.Marshal(params)
	if err != nil {
		return Receipt{}, fmt.Errorf("recording the charge's parameters: %w", err)
	}
	// The new row follows the last one: the next id, chained to its hash.
	id, prev := int64(1), GenesisHash
	switch err := tx.QueryRowContext(ctx, `SELECT id + 1, hash FROM dp_ledger ORDER BY id DESC LIMIT 1`).Scan(&id, &prev); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Receipt{}, err
	}
	row := Row{ID: id, At: now(), Scope: c.Scope, Mechanism: c.Mechanism.Kind, Mu: st.newMu, Params: string(pj), Query: c.Query, PrevHash: prev}
	row.Hash = row.ComputeHash()
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_ledger(id, at, scope, mechanism, mu, params, query, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?)`,
		row.ID, row.At, row.Scope, row.Mechanism, row.Mu, row.Params, row.Query, row.PrevHash, row.Hash); err != nil {
		return Receipt{}, fmt.Errorf("appending to dp_ledger: %w", err)
	}
	cache, err := st.comp.MarshalBinary()
	if err != nil {
		return Receipt{}, fmt.Errorf("updating dp_scope_state: %w", err)
	}
	var rig any
	if st.rigorous {
		rig = st.epsilon
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_scope_state(scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous, pld)
		VALUES (?,?,?,?,?,?,?) ON CONFLICT(scope) DO UPDATE SET through_id=excluded.through_id, mu_spent=excluded.mu_spent,
		mu_remaining=excluded.mu_remaining, epsilon_spent=excluded.epsilon_spent, epsilon_rigorous=excluded.epsilon_rigorous, pld=excluded.pld`,
		c.Scope, id, st.muAfter, st.muRemaining, st.epsGDP, rig, cache); err != nil {
		return Receipt{}, fmt.Errorf("updating dp_scope_state: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Receipt{}, fmt.Errorf("committing the charge: %w", err)
	}
	return Receipt{ID: id, Scope: c.Scope, Mu: st.newMu, MuSpent: st.muAfter, MuRemaining: st.muRemaining,
		Epsilon: st.epsilon, Delta: st.budget.Delta, Rigorous: st.rigorous, Params: params}, nil
}

func (l *Ledger) lockError(err error) error {
	if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
		return fmt.Errorf("%w (%v): another connection holds the write lock on %s; if this query writes (INSERT ... SELECT, CREATE TABLE ... AS) or runs inside BEGIN ... COMMIT, run the DP query as a plain SELECT outside a transaction", ErrWriteConflict, err, l.path)
	}
	return err
}

// Remaining returns a scope's status without charging.
func (l *Ledger) Remaining(ctx context.Context, scope string) (Status, error) {
	return ReadStatus(ctx, l.db, scope)
}

// Queryer is what the ledger's readers need: a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// LoadBudget reads one scope's budget.
func LoadBudget(ctx context.Context, q Queryer, scope string) (Budget, error) {
	b := Budget{Scope: scope}
	var eps sql.NullFloat64
	err := q.QueryRowContext(ctx, `SELECT mu_budget, delta, epsilon_budget FROM dp_budget WHERE scope = ?`, scope).Scan(&b.Mu, &b.Delta, &eps)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return b, fmt.Errorf("%w %q: create it with `dpsql init DB --scope %s --mu 1` or SELECT dp_init(1.0, 1e-5, '%s')", ErrUnknownScope, scope, scope, scope)
		}
		if strings.Contains(err.Error(), "no such table") {
			return b, ErrNoLedger
		}
		return b, err
	}
	b.Epsilon = eps.Float64
	return b, nil
}

// scopeMechanisms reads the mechanisms charged so far in a scope.
func scopeMechanisms(ctx context.Context, q Queryer, scope string) ([]Mechanism, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, params FROM dp_ledger WHERE scope = ? ORDER BY id`, scope)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ms []Mechanism
	for rows.Next() {
		var id int64
		var p string
		if err := rows.Scan(&id, &p); err != nil {
			return nil, err
		}
		m, err := ParseMechanism([]byte(p))
		if err != nil {
			return nil, fmt.Errorf("ledger row %d cannot be accounted (%v): refusing to charge until the ledger is repaired", id, err)
		}
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

// checkBudget reads scope's budget and entries in tx and decides whether m fits.
func checkBudget(ctx context.Context, tx *sql.Tx, scope string, m Mechanism) (checked, error) {
	b, err := LoadBudget(ctx, tx, scope)
	if err != nil {
		return checked{}, err
	}
	var sp scopeSpend
	var lastID int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(mu*mu), 0), coalesce(sum(mechanism NOT IN ('gaussian', 'external')), 0), coalesce(max(id), 0) FROM dp_ledger WHERE scope = ?`, scope).Scan(&sp.sumSq, &sp.nonGaussian, &lastID); err != nil {
		return checked{}, err
	}
	if sp.comp, err = scopeComposition(ctx, tx, scope, lastID); err != nil {
		return checked{}, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", scope, err)
	}
	return decide(b, sp, m)
}

// scopeComposition returns the scope's cached composition if it covers every
// ledger row up to lastID, or rebuilds it from the ledger.
func scopeComposition(ctx context.Context, tx Queryer, scope string, lastID int64) (Composition, error) {
	var through sql.NullInt64
	var cache []byte
	err := tx.QueryRowContext(ctx, `SELECT through_id, pld FROM dp_scope_state WHERE scope = ?`, scope).Scan(&through, &cache)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Composition{}, err
	}
	var c Composition
	if lastID == 0 {
		return c, nil
	}
	if through.Valid && through.Int64 == lastID && cache != nil {
		err := c.UnmarshalBinary(cache)
		return c, err
	}
	ms, err := scopeMechanisms(ctx, tx, scope)
	if err != nil {
		return c, err
	}
	for _, m := range ms {
		if c, err = c.Add(m); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Init creates the schema (if absent) and the scope b through the ledger connection.
func (l *Ledger) Init(ctx context.Context, b Budget) error { return Init(ctx, l.db, b) }

// ScopeEpsilon returns the rigorous epsilon, at delta, of everything a scope
// has spent: the scope's cached composition (exact GDP conversion while its
// entries are all Gaussian), the figure its budget checks use.
func (l *Ledger) ScopeEpsilon(ctx context.Context, scope string, delta float64) (float64, error) {
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	if _, err := LoadBudget(ctx, l.db, scope); err != nil {
		return 0, err
	}
	// The same composition the budget checks use: the scope's cache, rebuilt
	// from the ledger if it is stale.
	var lastID int64
	if err := l.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM dp_ledger WHERE scope = ?`, scope).Scan(&lastID); err != nil {
		return 0, err
	}
	if lastID == 0 {
		return 0, nil
	}
	c, err := scopeComposition(ctx, l.db, scope, lastID)
	if err != nil {
		return 0, err
	}
	return c.Epsilon(delta)
}
