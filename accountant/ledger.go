package accountant

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // the ledger connection uses the plain "sqlite3" driver
)

// Schema is the ledger's SQL, created by [Init] in the protected database file.
// dp_ledger is append-only (triggers reject UPDATE and DELETE) and hash-chained;
// dp_scope_state holds figures derived from dp_ledger at each charge, so that
// dp_budget_status can be read by any SQLite client.
const Schema = `
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS dp_budget (
  scope          TEXT PRIMARY KEY,
  mu_budget      REAL NOT NULL CHECK (mu_budget > 0),
  delta          REAL NOT NULL CHECK (delta > 0 AND delta < 1),
  created_at     TEXT NOT NULL,
  epsilon_budget REAL CHECK (epsilon_budget IS NULL OR epsilon_budget > 0)
);
CREATE TABLE IF NOT EXISTS dp_ledger (
  id        INTEGER PRIMARY KEY,
  at        TEXT NOT NULL,
  scope     TEXT NOT NULL REFERENCES dp_budget(scope),
  mechanism TEXT NOT NULL,
  mu        REAL NOT NULL,
  params    TEXT NOT NULL,
  query     TEXT,
  prev_hash TEXT NOT NULL,
  hash      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS dp_ledger_scope ON dp_ledger(scope, id);
CREATE TRIGGER IF NOT EXISTS dp_ledger_no_update BEFORE UPDATE ON dp_ledger
BEGIN SELECT RAISE(ABORT, 'dp_ledger is append-only: rows cannot be updated'); END;
CREATE TRIGGER IF NOT EXISTS dp_ledger_no_delete BEFORE DELETE ON dp_ledger
BEGIN SELECT RAISE(ABORT, 'dp_ledger is append-only: rows cannot be deleted'); END;
CREATE TRIGGER IF NOT EXISTS dp_budget_no_update BEFORE UPDATE ON dp_budget
BEGIN SELECT RAISE(ABORT, 'dp_budget rows cannot be changed: create a new scope instead'); END;
CREATE TRIGGER IF NOT EXISTS dp_budget_no_delete BEFORE DELETE ON dp_budget
BEGIN SELECT RAISE(ABORT, 'dp_budget rows cannot be deleted'); END;
CREATE TABLE IF NOT EXISTS dp_scope_state (
  scope            TEXT PRIMARY KEY REFERENCES dp_budget(scope),
  through_id       INTEGER NOT NULL,
  mu_spent         REAL NOT NULL,
  mu_remaining     REAL NOT NULL,
  epsilon_spent    REAL NOT NULL,
  epsilon_rigorous REAL,
  pld              BLOB
);
CREATE VIEW IF NOT EXISTS dp_budget_status AS
SELECT b.scope AS scope,
       b.mu_budget AS mu_budget,
       coalesce(s.mu_spent, 0) AS mu_spent,
       coalesce(s.mu_remaining, b.mu_budget) AS mu_remaining,
       coalesce(s.epsilon_spent, 0) AS epsilon_spent,
       b.delta AS delta,
       b.epsilon_budget AS epsilon_budget,
       s.epsilon_rigorous AS epsilon_rigorous,
       (SELECT count(*) FROM dp_ledger l WHERE l.scope = b.scope) AS entries
FROM dp_budget b LEFT JOIN dp_scope_state s ON s.scope = b.scope;
`

// GenesisHash is the prev_hash of the first ledger row.
var GenesisHash = strings.Repeat("0", 64)

// Errors the ledger returns; test them with errors.Is.
var (
	ErrNoLedger      = errors.New("the database has no dpsql ledger: create one with `dpsql init DB --mu 1` or SELECT dp_init(1.0)")
	ErrUnknownScope  = errors.New("unknown budget scope")
	ErrBudget        = errors.New("privacy budget exceeded")
	ErrChainBroken   = errors.New("ledger hash chain broken")
	ErrWriteConflict = errors.New("the ledger could not be locked")
)

// tolerance allows for floating-point round-off in sums of squares when a
// budget is spent exactly (e.g. 100 spends of 0.1 against a budget of 1).
const tolerance = 1e-12

// Budget is one scope's budget.
type Budget struct {
	Scope   string
	Mu      float64 // GDP budget; always set
	Delta   float64 // delta at which epsilon figures are reported and checked
	Epsilon float64 // set when the scope was created from (epsilon, delta)
}

// NewBudget builds a budget from either mu (epsilon == 0) or (epsilon, delta).
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

// Init creates the ledger schema (if absent) and the budget scope b. Creating a
// scope that already exists is an error.
func Init(ctx context.Context, db *sql.DB, b Budget) error {
	if b.Mu <= 0 {
		return errors.New("budget: mu must be positive")
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, Schema); err != nil {
		return fmt.Errorf("creating the ledger schema: %w", err)
	}
	var eps any
	if b.Epsilon > 0 {
		eps = b.Epsilon
	}
	_, err = conn.ExecContext(ctx, `INSERT INTO dp_budget(scope, mu_budget, delta, created_at, epsilon_budget) VALUES (?, ?, ?, ?, ?)`,
		b.Scope, b.Mu, b.Delta, now(), eps)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") {
			return fmt.Errorf("scope %q already has a budget; budgets cannot be changed, create a new scope", b.Scope)
		}
		return fmt.Errorf("creating scope %q: %w", b.Scope, err)
	}
	return nil
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }

// Ledger writes charges through its own connection to the database file, so a
// charge commits before the query that caused it has finished (see design.md,
// "Charge before release").
type Ledger struct {
	path string
	db   *sql.DB
	refs int // connections holding the ledger (RetainLedger)
}

var (
	ledgersMu sync.Mutex
	ledgers   = map[string]*Ledger{}
)

// OpenLedger returns the process-wide ledger for the database file path; every
// caller for one file shares it, so charges within a process are serialised
// before SQLite's write lock serialises them across processes.
func OpenLedger(path string) (*Ledger, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, errors.New("DP functions need a database file: an in-memory database cannot hold a durable ledger")
	}
	ledgersMu.Lock()
	defer ledgersMu.Unlock()
	if l, ok := ledgers[path]; ok {
		return l, nil
	}
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", "30000")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(time.Minute)
	l := &Ledger{path: path, db: db}
	ledgers[path] = l
	return l, nil
}

// RetainLedger notes that a connection to the file at path may charge; pair it
// with ReleaseLedger when the connection closes.
func RetainLedger(path string) error {
	l, err := OpenLedger(path)
	if err != nil {
		return err
	}
	ledgersMu.Lock()
	l.refs++
	ledgersMu.Unlock()
	return nil
}

// ReleaseLedger undoes RetainLedger. When the last connection to a file lets
// go, the ledger connection closes too, so that the application's last
// connection can checkpoint the WAL and remove it, as SQLite does when a
// database is closed.
func ReleaseLedger(path string) error {
	ledgersMu.Lock()
	defer ledgersMu.Unlock()
	l, ok := ledgers[path]
	if !ok {
		return nil
	}
	if l.refs--; l.refs > 0 {
		return nil
	}
	delete(ledgers, path)
	return l.db.Close()
}

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
	var rig any
	if st.rigorous {
		rig = st.epsilon
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_scope_state(scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous, pld)
		VALUES (?,?,?,?,?,?,?) ON CONFLICT(scope) DO UPDATE SET through_id=excluded.through_id, mu_spent=excluded.mu_spent,
		mu_remaining=excluded.mu_remaining, epsilon_spent=excluded.epsilon_spent, epsilon_rigorous=excluded.epsilon_rigorous, pld=excluded.pld`,
		c.Scope, id, st.muAfter, st.muRemaining, st.epsGDP, rig, st.cache); err != nil {
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

type checked struct {
	budget              Budget
	newMu, muAfter      float64
	muRemaining, epsGDP float64
	epsilon             float64
	rigorous            bool
	cache               []byte // the scope's composition including this charge
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

func checkBudget(ctx context.Context, tx *sql.Tx, scope string, m Mechanism) (checked, error) {
	b, err := LoadBudget(ctx, tx, scope)
	if err != nil {
		return checked{}, err
	}
	var sumSq float64
	var nonGaussian int
	var lastID int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(mu*mu), 0), coalesce(sum(mechanism NOT IN ('gaussian', 'external')), 0), coalesce(max(id), 0) FROM dp_ledger WHERE scope = ?`, scope).Scan(&sumSq, &nonGaussian, &lastID); err != nil {
		return checked{}, err
	}
	cache, err := scopeCache(ctx, tx, scope, lastID)
	if err != nil {
		return checked{}, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", scope, err)
	}
	c := checked{budget: b, newMu: m.GDPMu()}
	if c.cache, err = ComposeInto(cache, m); err != nil {
		return checked{}, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", scope, err)
	}
	muBefore := math.Sqrt(sumSq)
	c.muAfter = math.Sqrt(sumSq + c.newMu*c.newMu)
	if math.IsInf(c.newMu, 1) {
		c.muAfter = math.Inf(1)
	}
	c.muRemaining = math.Sqrt(math.Max(b.Mu*b.Mu-c.muAfter*c.muAfter, 0))
	if c.epsGDP = math.Inf(1); !math.IsInf(c.muAfter, 1) {
		c.epsGDP, _ = Epsilon(c.muAfter, b.Delta)
	}
	c.epsilon = c.epsGDP
	if nonGaussian == 0 && m.IsGaussian() {
		// Only Gaussian entries: GDP composition is exact.
		if c.muAfter*c.muAfter > b.Mu*b.Mu*(1+tolerance) {
			return c, &BudgetError{Scope: scope, Spent: muBefore, Need: c.newMu, Budget: b.Mu, AfterWouldBe: c.muAfter, Unit: "mu", Mechanism: m.Kind}
		}
		return c, nil
	}
	// A subsampled or non-Gaussian entry exists: every decision uses the
	// rigorous (PLD) figure, extended from the scope's cached composition.
	epsAfter, err := CachedEpsilon(c.cache, b.Delta)
	if err != nil {
		return c, fmt.Errorf("budget check of scope %q cannot be computed, refusing: %w", scope, err)
	}
	epsBudget := b.Epsilon
	if epsBudget == 0 {
		epsBudget, _ = Epsilon(b.Mu, b.Delta)
	}
	c.epsilon, c.rigorous = epsAfter, true
	// The PLD figure already bounds its own round-off: no tolerance here.
	if !(epsAfter <= epsBudget) {
		epsBefore := 0.0 // for the message only
		if lastID > 0 {
			epsBefore, _ = CachedEpsilon(cache, b.Delta)
		}
		return c, &BudgetError{Scope: scope, Spent: epsBefore, Need: epsAfter - epsBefore, Budget: epsBudget, AfterWouldBe: epsAfter, Unit: "epsilon", Delta: b.Delta, Mechanism: m.Kind}
	}
	return c, nil
}

// scopeCache returns the scope's cached composition (see ComposeInto) if it
// covers every ledger row up to lastID, or rebuilds it from the ledger.
func scopeCache(ctx context.Context, tx Queryer, scope string, lastID int64) ([]byte, error) {
	var through sql.NullInt64
	var cache []byte
	err := tx.QueryRowContext(ctx, `SELECT through_id, pld FROM dp_scope_state WHERE scope = ?`, scope).Scan(&through, &cache)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if lastID == 0 {
		return nil, nil
	}
	if through.Valid && through.Int64 == lastID && cache != nil {
		return cache, nil
	}
	ms, err := scopeMechanisms(ctx, tx, scope)
	if err != nil {
		return nil, err
	}
	cache = nil
	for _, m := range ms {
		if cache, err = ComposeInto(cache, m); err != nil {
			return nil, err
		}
	}
	return cache, nil
}

// Row is one dp_ledger row.
type Row struct {
	ID        int64
	At        string
	Scope     string
	Mechanism string
	Mu        float64
	Params    string
	Query     string
	PrevHash  string
	Hash      string
}

// ComputeHash returns SHA-256, in hex, over the row's canonical content: the
// JSON array [id, at, scope, mechanism, mu, params, query, prev_hash], mu
// printed with 17 significant digits.
func (r Row) ComputeHash() string {
	canon, _ := json.Marshal([]any{r.ID, r.At, r.Scope, r.Mechanism, strconv.FormatFloat(r.Mu, 'g', 17, 64), r.Params, r.Query, r.PrevHash})
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

// ReadLedger returns every ledger row in id order.
func ReadLedger(ctx context.Context, db Queryer) ([]Row, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash FROM dp_ledger ORDER BY id`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, ErrNoLedger
		}
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.At, &r.Scope, &r.Mechanism, &r.Mu, &r.Params, &r.Query, &r.PrevHash, &r.Hash); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Verify checks the hash chain of every ledger row and that each row's mu
// matches its mechanism description. It returns the number of rows checked and
// an error wrapping ErrChainBroken naming the first bad row.
func Verify(ctx context.Context, db Queryer) (int, error) {
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		return 0, err
	}
	prev := GenesisHash
	for i, r := range rows {
		if r.PrevHash != prev {
			return i, fmt.Errorf("%w at row %d: prev_hash %.12s... does not match the previous row's hash %.12s... (a row was removed, inserted or reordered)", ErrChainBroken, r.ID, r.PrevHash, prev)
		}
		if got := r.ComputeHash(); got != r.Hash {
			return i, fmt.Errorf("%w at row %d: its content does not match its hash (the row was edited)", ErrChainBroken, r.ID)
		}
		m, err := ParseMechanism([]byte(r.Params))
		if err != nil {
			return i, fmt.Errorf("row %d cannot be re-accounted: %w", r.ID, err)
		}
		if err := VerifyNoisePayload(m); err != nil {
			return i, fmt.Errorf("row %d: %w", r.ID, err)
		}
		if mu := m.GDPMu(); !(math.Abs(mu-r.Mu) <= 1e-12*math.Max(1, mu)) && !(math.IsInf(mu, 1) && math.IsInf(r.Mu, 1)) {
			return i, fmt.Errorf("row %d: recorded mu %g does not match its mechanism (%g)", r.ID, r.Mu, mu)
		}
		prev = r.Hash
	}
	return len(rows), nil
}

// Status is one row of dp_budget_status.
type Status struct {
	Scope           string
	MuBudget        float64
	MuSpent         float64
	MuRemaining     float64
	EpsilonSpent    float64
	Delta           float64
	EpsilonBudget   sql.NullFloat64
	EpsilonRigorous sql.NullFloat64
	Entries         int64
}

// ReadStatus reads a scope's row of dp_budget_status (all scopes when scope is "").
func ReadStatus(ctx context.Context, db Queryer, scope string) (Status, error) {
	sts, err := ReadStatuses(ctx, db, scope)
	if err != nil {
		return Status{}, err
	}
	if len(sts) == 0 {
		return Status{}, fmt.Errorf("%w %q", ErrUnknownScope, scope)
	}
	return sts[0], nil
}

// ReadStatuses reads dp_budget_status, one scope or all (scope == "").
func ReadStatuses(ctx context.Context, db Queryer, scope string) ([]Status, error) {
	q := `SELECT scope, mu_budget, mu_spent, mu_remaining, epsilon_spent, delta, epsilon_budget, epsilon_rigorous, entries FROM dp_budget_status`
	var args []any
	if scope != "" {
		q += ` WHERE scope = ?`
		args = append(args, scope)
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY scope`, args...)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, ErrNoLedger
		}
		return nil, err
	}
	defer rows.Close()
	var out []Status
	for rows.Next() {
		var s Status
		if err := rows.Scan(&s.Scope, &s.MuBudget, &s.MuSpent, &s.MuRemaining, &s.EpsilonSpent, &s.Delta, &s.EpsilonBudget, &s.EpsilonRigorous, &s.Entries); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
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
	cache, err := scopeCache(ctx, l.db, scope, lastID)
	if err != nil {
		return 0, err
	}
	return CachedEpsilon(cache, delta)
}
