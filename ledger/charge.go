package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// Charge describes one spend.
type Charge struct {
	Scope     string
	Mechanism mechanism.Mechanism
	// Details is the release's params record (a struct of package
	// mechanism, such as mechanism.Gaussian; nil for none), recorded in the
	// row's params beside the mechanism. It must encode as a JSON object.
	Details any
	Query   string // the SQL text that made the charge
	// Quote, if set, is what is charged: its mechanism (Mechanism must then
	// be unset or equal), its record (params record, noise_tv, quoted
	// figures) beside Details, and it must have been priced at the scope's
	// delta (a charge of another delta is refused). The budget is decided
	// on the mechanism itself, composed with the scope's entries: the
	// quoted epsilon is recorded, never trusted.
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

// Charge checks the scope's budget, appends the ledger row and runs release, all
// in one IMMEDIATE transaction that is committed before Charge returns. release
// (may be nil) writes release tables with tx and may return details to record
// in the row; if it fails, nothing is charged and nothing is released. The
// budget and the scope's spend come from the hash chain, accounted by this
// process (see state.go); a version-0 file is upgraded first.
func (l *Ledger) Charge(ctx context.Context, c Charge, release func(tx *sql.Tx) (map[string]any, error)) (Receipt, error) {
	d, err := newDecision(c)
	if err != nil {
		return Receipt{}, err
	}
	return l.commit(ctx, d, release)
}

// Decision is a charge's budget decision made ahead of its commit, at the
// head of the chain it was made at: Decide computes it (the composition and
// the certified epsilon, the costly part of a charge) without writing
// anything and without holding the write lock, so that it can run while the
// caller does other work (a protected statement's read); Commit then charges.
// A decision is only ever reused at the head it was made at: if the chain
// moved in between (another process or connection charged), Commit decides
// again inside its IMMEDIATE transaction, as Charge does.
type Decision struct {
	c       Charge         // validated, its quote applied
	details map[string]any // c.Details as the row's fields, the quote's record in
	// Set once decided at head fs.head (fs nil: not decided, or the
	// decision failed and Commit decides again).
	fs      *fileState
	st, tot accountant.Checked
}

// newDecision validates c (the checks that do not depend on the chain).
func newDecision(c Charge) (*Decision, error) {
	details, err := mechanism.Fields(c.Details)
	if err != nil {
		return nil, err
	}
	if c.Quote != nil {
		if c, details, err = withQuote(c, details); err != nil {
			return nil, err
		}
	}
	if err := c.Mechanism.Validate(); err != nil {
		return nil, err
	}
	return &Decision{c: c, details: details}, nil
}

// Decide makes c's budget decision at the chain's current head, writing
// nothing: it returns an error only for a charge that no head could accept
// (an invalid mechanism or quote). A refusal (over budget, unknown scope) or
// a failure to read the chain is not returned here: Commit decides again and
// reports it, so that nothing is refused on a decision the chain no longer
// supports. Commit the decision with Commit.
func (l *Ledger) Decide(ctx context.Context, c Charge) (*Decision, error) {
	d, err := newDecision(c)
	if err != nil {
		return nil, err
	}
	fs, err := l.state(ctx, l.db)
	if err != nil {
		return d, nil // Commit decides inside its transaction
	}
	if err := d.decideAt(ctx, fs); err != nil {
		d.fs = nil
	}
	return d, nil
}

// Ready reports whether the decision was made (at the head Decide read):
// Commit reuses it if that is still the head. A decision that is not ready
// is made by Commit.
func (d *Decision) Ready() bool { return d != nil && d.fs != nil }

// Commit charges a decision as Charge charges its Charge, in one IMMEDIATE
// transaction committed before Commit returns: it reuses the decision when
// the chain's head (id and hash of its last row, read inside the
// transaction) is the one the decision was made at, and otherwise decides
// again there. Either way the charge fits the budget at the head it is
// appended to.
func (l *Ledger) Commit(ctx context.Context, d *Decision, release func(tx *sql.Tx) (map[string]any, error)) (Receipt, error) {
	if d == nil {
		return Receipt{}, errors.New("ledger: Commit needs a decision from Decide")
	}
	return l.commit(ctx, &Decision{c: d.c, details: d.details, fs: d.fs, st: d.st, tot: d.tot}, release)
}

// decideAt decides d's charge at the state fs (the scope's and the file's
// total checks); on success d holds fs and the figures.
func (d *Decision) decideAt(ctx context.Context, fs *fileState) error {
	c := d.c
	if c.Scope == accountant.FileScope {
		return fmt.Errorf("scope %q is the whole file's total, not a scope to charge: charge one of its scopes", accountant.FileScope)
	}
	sc, err := fs.scope(c.Scope)
	if err != nil {
		return err
	}
	if c.Quote != nil && c.Quote.Delta != sc.budget.Delta {
		return fmt.Errorf("the release was quoted at delta %g, but scope %q reports and checks at delta %g; nothing was charged: quote it again at the scope's delta", c.Quote.Delta, c.Scope, sc.budget.Delta)
	}
	acc, err := accountant.InScope(c.Scope, sc.budget.Neighbours, c.Mechanism)
	if err != nil {
		return err
	}
	tv, err := noiseTVOf(d.details)
	if err != nil {
		return err
	}
	st, err := accountant.Decide(sc.budget, sc.spend, acc, tv)
	if err != nil {
		return err
	}
	// Every scope protects the same people: the charge must also fit the
	// file's total (decided only when the owner capped it).
	accT, err := accountant.InScope(accountant.FileScope, fs.total.budget.Neighbours, c.Mechanism)
	if err != nil {
		return err
	}
	tot, err := accountant.Decide(fs.total.budget, fs.total.spend, accT, tv)
	if err != nil {
		return err
	}
	// What the scope and the cap can still charge after it, as
	// dp_scope_state records it (ownRoom), the one figure every surface
	// shows: computed here, deterministically from the state after, so that
	// Verify recomputes it exactly.
	if st.MuRemaining, err = roomOf(ctx, sc.budget, sc.spend.With(st), roomTV); err != nil {
		return fmt.Errorf("what scope %q can still charge cannot be computed: %w", c.Scope, err)
	}
	if tot.MuRemaining, err = roomOf(ctx, fs.total.budget, fs.total.spend.With(tot), roomTV); err != nil {
		return fmt.Errorf("what the file's cap leaves cannot be computed: %w", err)
	}
	d.fs, d.st, d.tot = fs, st, tot
	return nil
}

// commit runs the charge's transaction; d is this call's own copy.
func (l *Ledger) commit(ctx context.Context, d *Decision, release func(tx *sql.Tx) (map[string]any, error)) (Receipt, error) {
	c := d.c
	if err := l.ensureWAL(ctx, d); err != nil {
		return Receipt{}, err
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return Receipt{}, l.lockError(err)
	}
	defer tx.Rollback()
	fs, oc, err := l.preflight(ctx, tx)
	if err != nil {
		return Receipt{}, err
	}
	if d.fs == nil || d.fs.head != fs.head {
		// Not decided, or decided at another head: decide here, under
		// the write lock.
		d.fs = nil
		if err := d.decideAt(ctx, fs); err != nil {
			return Receipt{}, err
		}
	}
	st, tot := d.st, d.tot
	params := map[string]any{}
	for k, v := range d.details {
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
	if err := writeScopeState(ctx, tx, accountant.FileScope, row.ID, tot); err != nil {
		return Receipt{}, err
	}
	next := fs.after(st, tot, row)
	if next.checkpointDue() {
		if next, err = writeCheckpoint(ctx, tx, next, c.Scope); err != nil {
			return Receipt{}, fmt.Errorf("writing a checkpoint after the charge: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Receipt{}, fmt.Errorf("committing the charge: %w", err)
	}
	l.remember(next)
	oc.note(l.path) // an upgrade committed with the charge
	// What can still be charged, as every surface shows it (gaussianRoom):
	// from the rooms the decision computed.
	room := st.MuRemaining
	if next.capped {
		room = jointRoom(next.scopes[c.Scope], c.Scope, room, tot.MuRemaining, roomTV)
	}
	return Receipt{ID: row.ID, Scope: c.Scope, Mu: st.Mu, MuSpent: st.MuAfter, MuRemaining: room,
		Epsilon: st.Epsilon, Delta: st.Budget.Delta, Rigorous: st.Rigorous, Params: params}, nil
}

// withQuote returns c with its quote's mechanism in place, and details with
// the quote's record (which wins over details of the same name).
func withQuote(c Charge, details map[string]any) (Charge, map[string]any, error) {
	q := c.Quote
	if c.Mechanism.Kind != "" && !reflect.DeepEqual(c.Mechanism, q.Mechanism) {
		return c, nil, errors.New("the charge names another mechanism than its quote; charge exactly the quote")
	}
	rec, err := q.Record()
	if err != nil {
		return c, nil, err
	}
	for k, v := range rec {
		details[k] = v
	}
	c.Mechanism = q.Mechanism
	return c, details, nil
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
func writeScopeState(ctx context.Context, tx *sql.Tx, scope string, id int64, st accountant.Checked) error {
	var rig any
	if st.Rigorous {
		rig = st.Epsilon
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_scope_state(scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous, pld)
		VALUES (?,?,?,?,?,?,NULL) ON CONFLICT(scope) DO UPDATE SET through_id=excluded.through_id, mu_spent=excluded.mu_spent,
		mu_remaining=excluded.mu_remaining, epsilon_spent=excluded.epsilon_spent, epsilon_rigorous=excluded.epsilon_rigorous`,
		scope, id, st.MuAfter, st.MuRemaining, st.EpsilonGDP, rig); err != nil {
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
// is what can still be charged, the one figure every surface shows
// (dp_budget_status, a charge's receipt, dp_budget_remaining(), the
// service): the largest mu one more add/remove Gaussian call (one scalar
// value's sampler error included) can spend, passing the scope's check
// (rigorous once the scope holds other entries, converted in a replace-one
// scope, the samplers' error paid from delta) and the file's cap. It stops
// when ctx is done, with ctx's error.
func (l *Ledger) Remaining(ctx context.Context, scope string) (Status, error) {
	fs, err := l.state(ctx, l.db)
	if err != nil {
		return Status{}, err
	}
	sc, err := fs.scope(scope)
	if err != nil {
		return Status{}, err
	}
	// The room first, stopped by ctx (status then finds it memoised).
	room, err := fs.gaussianRoom(ctx, scope, roomTV)
	if err != nil {
		return Status{}, err
	}
	st, err := sc.status(scope)
	if err != nil {
		return st, err
	}
	st.MuRemaining = room
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
	return fs.gaussianRoom(ctx, scope, tv)
}

// Queryer is what the ledger's readers need: a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// LoadBudget reads one scope's budget from its latest budget event in the
// chain (from dp_budget in a version-0 file, which has none). It does not
// check the chain; the charge path does (see state.go).
func LoadBudget(ctx context.Context, q Queryer, scope string) (accountant.Budget, error) {
	v, has, err := schemaVersion(ctx, q)
	if err != nil {
		return accountant.Budget{}, err
	}
	if !has {
		return accountant.Budget{}, ErrNoLedger
	}
	if v == 0 {
		bs, err := tableBudgets(ctx, q)
		if err != nil {
			return accountant.Budget{}, err
		}
		if b, ok := bs[scope]; ok {
			return b, nil
		}
		return accountant.Budget{}, unknownScope(scope)
	}
	r := Row{Scope: scope, Kind: EventBudget}
	err = q.QueryRowContext(ctx, `SELECT id, params FROM dp_ledger WHERE kind = 'budget' AND scope = ? ORDER BY id DESC LIMIT 1`, scope).Scan(&r.ID, &r.Params)
	if errors.Is(err, sql.ErrNoRows) {
		return accountant.Budget{}, unknownScope(scope)
	}
	if err != nil {
		return accountant.Budget{}, err
	}
	return parseBudgetEvent(r)
}

// Init creates the schema (if absent) and the scope b through the ledger connection.
func (l *Ledger) Init(ctx context.Context, b accountant.Budget) error { return Init(ctx, l.db, b) }

// Budget returns a scope's budget as the chain records it, without
// accounting what the scope spent (Remaining searches the room left, which
// can take long on a scope of large subsampled releases).
func (l *Ledger) Budget(ctx context.Context, scope string) (accountant.Budget, error) {
	return LoadBudget(ctx, l.db, scope)
}

// ScopeEpsilon returns the rigorous epsilon, at delta, of everything a scope
// has spent: the composition its budget checks use (exact GDP conversion
// while its entries are all Gaussian), computed by this process.
func (l *Ledger) ScopeEpsilon(ctx context.Context, scope string, delta float64) (float64, error) {
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("delta must lie strictly between 0 and 1, got %v", delta)
	}
	fs, err := l.state(ctx, l.db)
	if err != nil {
		return 0, err
	}
	sc, err := fs.scope(scope)
	if err != nil {
		return 0, err
	}
	return sc.spend.Comp.Epsilon(delta)
}

// accounted returns m with only the fields that its kind's accounting reads
// (so informational fields recorded beside it, such as a scope's delta, do
// not count as a difference).
func accounted(m mechanism.Mechanism) mechanism.Mechanism {
	a := mechanism.Mechanism{Kind: m.Kind, Steps: m.Steps, Neighbours: m.Neighbours}
	if a.Steps == 1 {
		a.Steps = 0
	}
	switch m.Kind {
	case mechanism.KindGaussian:
		a.Mu, a.Sensitivity, a.Sigma = m.Mu, m.Sensitivity, m.Sigma
	case mechanism.KindExternal:
		a.Mu = m.Mu
	case mechanism.KindSubsampledGaussian:
		a.Q, a.Sigma = m.Q, m.Sigma
	case mechanism.KindLaplace:
		a.Epsilon = m.Epsilon
	case mechanism.KindGaussianInf:
		a.Mu, a.Delta = m.Mu, m.Delta
	case mechanism.KindLaplaceInf:
		a.Epsilon, a.Delta = m.Epsilon, m.Delta
	case mechanism.KindComposite:
		for _, p := range m.Parts {
			a.Parts = append(a.Parts, accounted(p))
		}
	default: // the noise families and anything newer: every field counts
		a = m
		a.Parts = nil
	}
	return a
}

// sameAccounting reports an error unless params, as a later process parses
// them, account exactly as m does.
func sameAccounting(params []byte, m mechanism.Mechanism) error {
	got, err := mechanism.Parse(params)
	if err != nil {
		return fmt.Errorf("recording the charge: its parameters would not re-account (%v); a detail key probably names a mechanism field", err)
	}
	a, _ := json.Marshal(accounted(got))
	b, _ := json.Marshal(accounted(m))
	if string(a) != string(b) {
		return fmt.Errorf("recording the charge: its parameters would re-account as %s, not as the charged %s; a detail key names a mechanism field", a, b)
	}
	return nil
}
