package accountant

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/dpsql/dpsql/mechanism"
)

// Charge describes one spend.
type Charge struct {
	Scope     string
	Mechanism Mechanism
	Details   map[string]any // recorded in params beside the mechanism (n, d, chosen features, ...)
	Query     string         // the SQL text that made the charge
	// Quote, if set, is what is charged: its mechanism (Mechanism must then
	// be unset or equal), its record (params record, noise_tv, quoted
	// figures) beside Details, and it must have been priced at the scope's
	// delta. See QuoteCharge.
	Quote *mechanism.Quote
}

// Receipt is what a committed charge reports.
type Receipt struct {
	ID          int64
	Scope       string
	Mu          float64 // this charge's GDP figure in its scope's relation (CLT value for subsampled mechanisms)
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
	NoiseTV             float64 // the scope's samplers' total-variation bound, paid from Delta
}

func (e *BudgetError) Error() string {
	if e.Scope == FileScope {
		return fmt.Sprintf("privacy budget exceeded for the whole file (scope %q, the owner's cap on the total over every scope): spent %s = %.6g, this %s call needs %s = %.6g, which would bring the total to %.6g, over the cap of %.6g%s; nothing was released",
			e.Scope, e.Unit, e.Spent, e.Mechanism, e.Unit, e.Need, e.AfterWouldBe, e.Budget, e.deltaNote())
	}
	return fmt.Sprintf("privacy budget exceeded in scope %q: spent %s = %.6g, this %s call needs %s = %.6g, which would bring the total to %.6g, over the budget of %.6g%s; nothing was released",
		e.Scope, e.Unit, e.Spent, e.Mechanism, e.Unit, e.Need, e.AfterWouldBe, e.Budget, e.deltaNote())
}

func (e *BudgetError) deltaNote() string {
	switch {
	case e.Unit == "epsilon" && e.NoiseTV > 0:
		return fmt.Sprintf(" (at delta = %g, of which (1 + e^epsilon) %g pays the samplers' total-variation bound noise_tv)", e.Delta, e.NoiseTV)
	case e.Unit == "epsilon":
		return fmt.Sprintf(" (at delta = %g)", e.Delta)
	}
	return ""
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

// Charge checks the scope's budget, appends the ledger row and runs release, all
// in one IMMEDIATE transaction that is committed before Charge returns. release
// (may be nil) writes release tables with tx and may return details to record
// in the row; if it fails, nothing is charged and nothing is released. The
// budget and the scope's spend come from the hash chain, accounted by this
// process (see state.go); a version-0 file is upgraded first.
func (l *Ledger) Charge(ctx context.Context, c Charge, release func(tx *sql.Tx) (map[string]any, error)) (Receipt, error) {
	if c.Quote != nil {
		var err error
		if c, err = withQuote(c); err != nil {
			return Receipt{}, err
		}
	}
	if err := c.Mechanism.Validate(); err != nil {
		return Receipt{}, err
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return Receipt{}, l.lockError(err)
	}
	defer tx.Rollback()
	if err := ensureSchema(ctx, tx, false); err != nil {
		return Receipt{}, err
	}
	if c.Scope == FileScope {
		return Receipt{}, fmt.Errorf("scope %q is the whole file's total, not a scope to charge: charge one of its scopes", FileScope)
	}
	fs, err := l.state(ctx, tx)
	if err != nil {
		return Receipt{}, err
	}
	sc, err := fs.scope(c.Scope)
	if err != nil {
		return Receipt{}, err
	}
	if c.Quote != nil && c.Quote.Delta != sc.budget.Delta {
		return Receipt{}, fmt.Errorf("the release was quoted at delta %g, but scope %q reports and checks at delta %g; nothing was charged: quote it again at the scope's delta", c.Quote.Delta, c.Scope, sc.budget.Delta)
	}
	acc, err := inScope(c.Scope, sc.budget.Neighbours, c.Mechanism)
	if err != nil {
		return Receipt{}, err
	}
	tv, err := noiseTVOf(c.Details)
	if err != nil {
		return Receipt{}, err
	}
	st, err := decide(sc.budget, sc.spend, acc, tv)
	if err != nil {
		return Receipt{}, err
	}
	// Every scope protects the same people: the charge must also fit the
	// file's total (decided only when the owner capped it).
	accT, err := inScope(FileScope, fs.total.budget.Neighbours, c.Mechanism)
	if err != nil {
		return Receipt{}, err
	}
	tot, err := decide(fs.total.budget, fs.total.spend, accT, tv)
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
	// Every later process re-accounts the row from these params: a detail
	// whose key names a mechanism field (JSON matches keys case-insensitively)
	// must not change what it accounts.
	if err := sameAccounting(pj, c.Mechanism); err != nil {
		return Receipt{}, err
	}
	// The row records the mechanism as stated (its own mu); the scope's
	// figures count it as converted to the scope's neighbour relation.
	row, err := appendRow(ctx, tx, Row{Kind: EventCharge, Scope: c.Scope, Mechanism: c.Mechanism.Kind, Mu: c.Mechanism.GDPMu(), Params: string(pj), Query: c.Query})
	if err != nil {
		return Receipt{}, err
	}
	if err := writeScopeState(ctx, tx, c.Scope, row.ID, st); err != nil {
		return Receipt{}, err
	}
	if err := writeScopeState(ctx, tx, FileScope, row.ID, tot); err != nil {
		return Receipt{}, err
	}
	if err := tx.Commit(); err != nil {
		return Receipt{}, fmt.Errorf("committing the charge: %w", err)
	}
	l.remember(fs.after(st, tot, row))
	return Receipt{ID: row.ID, Scope: c.Scope, Mu: st.newMu, MuSpent: st.muAfter, MuRemaining: st.muRemaining,
		Epsilon: st.epsilon, Delta: st.budget.Delta, Rigorous: st.rigorous, Params: params}, nil
}

// withQuote returns c with its quote's mechanism and record in place.
func withQuote(c Charge) (Charge, error) {
	q := c.Quote
	if c.Mechanism.Kind != "" && !reflect.DeepEqual(c.Mechanism, q.Mechanism) {
		return c, errors.New("the charge names another mechanism than its quote; charge exactly the quote")
	}
	rec, err := q.Record()
	if err != nil {
		return c, err
	}
	details := make(map[string]any, len(rec)+len(c.Details))
	for k, v := range c.Details {
		details[k] = v
	}
	for k, v := range rec { // the quote's figures win
		details[k] = v
	}
	c.Mechanism, c.Details = q.Mechanism, details
	return c, nil
}

// noiseTVOf returns the sampler's total-variation bound recorded in a
// charge's details ("noise_tv"; 0 when absent).
func noiseTVOf(details map[string]any) (float64, error) {
	v, ok := details["noise_tv"]
	if !ok {
		return 0, nil
	}
	var tv float64
	switch x := v.(type) {
	case float64:
		tv = x
	case json.Number:
		tv, _ = x.Float64()
	default:
		return 0, fmt.Errorf("noise_tv must be a number, got %T", v)
	}
	if !(tv >= 0) || math.IsInf(tv, 1) {
		return 0, fmt.Errorf("noise_tv must be a finite number >= 0, got %v", tv)
	}
	return tv, nil
}

// writeScopeState records a scope's figures after the charge in row id in
// dp_scope_state, for SQL readers; no charge reads them.
func writeScopeState(ctx context.Context, tx *sql.Tx, scope string, id int64, st checked) error {
	var rig any
	if st.rigorous {
		rig = st.epsilon
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_scope_state(scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous, pld)
		VALUES (?,?,?,?,?,?,NULL) ON CONFLICT(scope) DO UPDATE SET through_id=excluded.through_id, mu_spent=excluded.mu_spent,
		mu_remaining=excluded.mu_remaining, epsilon_spent=excluded.epsilon_spent, epsilon_rigorous=excluded.epsilon_rigorous, pld=NULL`,
		scope, id, st.muAfter, st.muRemaining, st.epsGDP, rig); err != nil {
		return fmt.Errorf("updating dp_scope_state: %w", err)
	}
	return nil
}

func (l *Ledger) lockError(err error) error {
	if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
		return fmt.Errorf("%w (%w): another connection holds the write lock on %s; if this query writes (INSERT ... SELECT, CREATE TABLE ... AS) or runs inside BEGIN ... COMMIT, run the DP query as a plain SELECT outside a transaction", ErrWriteConflict, err, l.path)
	}
	return err
}

// Remaining returns a scope's status without charging, computed by this
// process from the chain (not read from dp_budget_status). Its MuRemaining
// is the largest mu one more add/remove Gaussian call can spend: it passes
// the scope's check (rigorous once the scope holds other entries, converted
// in a replace-one scope) and the file's cap.
func (l *Ledger) Remaining(ctx context.Context, scope string) (Status, error) {
	fs, err := l.state(ctx, l.db)
	if err != nil {
		return Status{}, err
	}
	sc, err := fs.scope(scope)
	if err != nil {
		return Status{}, err
	}
	st, err := sc.status(scope)
	if err != nil {
		return st, err
	}
	st.MuRemaining = fs.gaussianRoom(scope, 0)
	return st, nil
}

// GaussianRoom returns the largest mu one more add/remove Gaussian call
// charged to scope can spend when its sampler is within tv in total
// variation of its ideal law (its noise_tv): the largest that passes the
// scope's check (rigorous once the scope holds other entries, converted in a
// replace-one scope, the samplers' error paid from delta) and the file's cap.
func (l *Ledger) GaussianRoom(ctx context.Context, scope string, tv float64) (float64, error) {
	if !(tv >= 0) || math.IsInf(tv, 1) {
		return 0, fmt.Errorf("noise_tv must be a finite number >= 0, got %v", tv)
	}
	fs, err := l.state(ctx, l.db)
	if err != nil {
		return 0, err
	}
	if _, err := fs.scope(scope); err != nil {
		return 0, err
	}
	return fs.gaussianRoom(scope, tv), nil
}

// Queryer is what the ledger's readers need: a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// LoadBudget reads one scope's budget from its latest budget event in the
// chain (from dp_budget in a version-0 file, which has none). It does not
// check the chain; the charge path does (see state.go).
func LoadBudget(ctx context.Context, q Queryer, scope string) (Budget, error) {
	v, has, err := schemaVersion(ctx, q)
	if err != nil {
		return Budget{}, err
	}
	if !has {
		return Budget{}, ErrNoLedger
	}
	if v == 0 {
		bs, err := tableBudgets(ctx, q)
		if err != nil {
			return Budget{}, err
		}
		if b, ok := bs[scope]; ok {
			return b, nil
		}
		return Budget{}, unknownScope(scope)
	}
	r := Row{Scope: scope, Kind: EventBudget}
	err = q.QueryRowContext(ctx, `SELECT id, params FROM dp_ledger WHERE kind = 'budget' AND scope = ? ORDER BY id DESC LIMIT 1`, scope).Scan(&r.ID, &r.Params)
	if errors.Is(err, sql.ErrNoRows) {
		return Budget{}, unknownScope(scope)
	}
	if err != nil {
		return Budget{}, err
	}
	return parseBudgetEvent(r)
}

// Init creates the schema (if absent) and the scope b through the ledger connection.
func (l *Ledger) Init(ctx context.Context, b Budget) error { return Init(ctx, l.db, b) }

// Budget returns a scope's budget as the chain records it, without
// accounting what the scope spent (Remaining searches the room left, which
// can take long on a scope of large subsampled releases).
func (l *Ledger) Budget(ctx context.Context, scope string) (Budget, error) {
	return LoadBudget(ctx, l.db, scope)
}

// ScopeEpsilon returns the rigorous epsilon, at delta, of everything a scope
// has spent: the composition its budget checks use (exact GDP conversion
// while its entries are all Gaussian), computed by this process.
func (l *Ledger) ScopeEpsilon(ctx context.Context, scope string, delta float64) (float64, error) {
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	fs, err := l.state(ctx, l.db)
	if err != nil {
		return 0, err
	}
	sc, err := fs.scope(scope)
	if err != nil {
		return 0, err
	}
	return sc.spend.comp.Epsilon(delta)
}
