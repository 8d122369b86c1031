package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dpsql/dpsql/accountant"
)

// SchemaVersion is the ledger schema this code writes, kept in the file's
// PRAGMA user_version. Version 0 (user_version 0 with a dp_ledger table) is the
// first release's schema: dp_ledger without kind and form, budgets only in
// dp_budget. Version 1 records every budget as an event in the hash chain and
// each scope's neighbour relation. Version 2 changes only the dp_budget_status
// view: its mu_remaining is the one remaining figure (dp_scope_state's, and no
// more than the file's cap leaves), which a dpsql of version 1 does not
// recognise. [Init], [Ledger.Charge] and [Ledger.Append] upgrade a version-0 or
// version-1 file in place, inside their transaction (see migrate.go); reading
// and [Verify] accept versions 0 to SchemaVersion as they are and never change
// them; a file of a later version is refused with [ErrNewerSchema].
//
// Any change to the SQL of an object dpsql creates is a new version (an older
// dpsql would otherwise take this version's objects for tampering):
// TestObjectSQLIsVersioned fails until it is one.
const SchemaVersion = 2

// Schema is the ledger's SQL (version [SchemaVersion]), created by [Init] in
// the protected database file. dp_ledger is append-only (triggers reject
// UPDATE and DELETE) and hash-chained; it holds every event: charges
// (kind 'charge') and budget creations (kind 'budget'). dp_budget and
// dp_scope_state are derived from dp_ledger, for SQL readers: the charge path
// never reads them, and [Verify] recomputes and compares them.
var Schema = `
CREATE TABLE IF NOT EXISTS dp_budget (
  scope          TEXT PRIMARY KEY,
  mu_budget      REAL NOT NULL CHECK (mu_budget > 0),
  delta          REAL NOT NULL CHECK (delta > 0 AND delta < 1),
  created_at     TEXT NOT NULL,
  epsilon_budget REAL CHECK (epsilon_budget IS NULL OR epsilon_budget > 0),
  neighbours     TEXT NOT NULL DEFAULT 'add_remove'
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
  hash      TEXT NOT NULL,
  kind      TEXT NOT NULL DEFAULT 'charge',
  form      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS dp_ledger_scope ON dp_ledger(scope, id);
CREATE TABLE IF NOT EXISTS dp_scope_state ` + scopeStateColumns + `;
` + triggersSQL + statusViewSQL

// scopeStateColumns defines dp_scope_state (also used by the upgrade).
const scopeStateColumns = `(
  scope            TEXT PRIMARY KEY,
  through_id       INTEGER NOT NULL,
  mu_spent         REAL NOT NULL,
  mu_remaining     REAL NOT NULL,
  epsilon_spent    REAL NOT NULL,
  epsilon_rigorous REAL,
  pld              BLOB
)`

// protectingTriggers are the triggers that keep dp_ledger append-only and
// dp_budget unchanged; [Verify] checks that each exists exactly as created.
var protectingTriggers = []struct{ name, body string }{
	{"dp_ledger_no_update", "BEFORE UPDATE ON dp_ledger\nBEGIN SELECT RAISE(ABORT, 'dp_ledger is append-only: rows cannot be updated'); END"},
	{"dp_ledger_no_delete", "BEFORE DELETE ON dp_ledger\nBEGIN SELECT RAISE(ABORT, 'dp_ledger is append-only: rows cannot be deleted'); END"},
	{"dp_budget_no_update", "BEFORE UPDATE ON dp_budget\nBEGIN SELECT RAISE(ABORT, 'dp_budget rows cannot be changed: create a new scope instead'); END"},
	{"dp_budget_no_delete", "BEFORE DELETE ON dp_budget\nBEGIN SELECT RAISE(ABORT, 'dp_budget rows cannot be deleted'); END"},
}

var triggersSQL = func() string {
	var b strings.Builder
	for _, t := range protectingTriggers {
		fmt.Fprintf(&b, "CREATE TRIGGER IF NOT EXISTS %s %s;\n", t.name, t.body)
	}
	return b.String()
}()

// statusViewSQL is dp_budget_status, derived for SQL readers; "mu_remaining"
// is what the scope can still charge (dp_scope_state's figure, Room's, and no
// more than the file's cap leaves); "entries"
// counts charges only; "guarantee" is 'mu-GDP' while a scope holds only
// Gaussian entries and '(epsilon, delta)' once it holds others: then its
// guarantee is (epsilon_budget, delta), not a mu-GDP curve, and mu_budget is
// only the way the budget was written. Its row for FileScope has a NULL mu_budget and
// mu_remaining when the file has no cap, and is reported at the cap's delta
// (else the smallest scope delta) in the cap's relation (else replace_one if
// any scope is, so that every entry is converted soundly).
const statusViewSQL = `CREATE VIEW IF NOT EXISTS dp_budget_status AS
SELECT b.scope AS scope,
       b.mu_budget AS mu_budget,
       coalesce(s.mu_spent, 0) AS mu_spent,
       min(coalesce(s.mu_remaining, b.mu_budget),
           coalesce((SELECT coalesce(t.mu_remaining, c.mu_budget) FROM dp_budget c LEFT JOIN dp_scope_state t ON t.scope = c.scope WHERE c.scope = '*'), 1e308)) AS mu_remaining,
       coalesce(s.epsilon_spent, 0) AS epsilon_spent,
       b.delta AS delta,
       b.epsilon_budget AS epsilon_budget,
       s.epsilon_rigorous AS epsilon_rigorous,
       (SELECT count(*) FROM dp_ledger l WHERE l.scope = b.scope AND l.kind = 'charge') AS entries,
       b.neighbours AS neighbours,
       CASE WHEN s.epsilon_rigorous IS NULL THEN 'mu-GDP' ELSE '(epsilon, delta)' END AS guarantee
FROM dp_budget b LEFT JOIN dp_scope_state s ON s.scope = b.scope
WHERE b.scope <> '*'
UNION ALL
SELECT '*',
       c.mu_budget,
       coalesce(s.mu_spent, 0),
       CASE WHEN c.scope IS NULL THEN NULL ELSE coalesce(s.mu_remaining, c.mu_budget) END,
       coalesce(s.epsilon_spent, 0),
       coalesce(c.delta, (SELECT min(delta) FROM dp_budget WHERE scope <> '*')),
       c.epsilon_budget,
       s.epsilon_rigorous,
       (SELECT count(*) FROM dp_ledger WHERE kind = 'charge'),
       coalesce(c.neighbours, CASE WHEN EXISTS (SELECT 1 FROM dp_budget WHERE scope <> '*' AND neighbours = 'replace_one') THEN 'replace_one' ELSE 'add_remove' END),
       CASE WHEN s.epsilon_rigorous IS NULL THEN 'mu-GDP' ELSE '(epsilon, delta)' END
FROM (SELECT 1) LEFT JOIN dp_budget c ON c.scope = '*' LEFT JOIN dp_scope_state s ON s.scope = '*'
WHERE EXISTS (SELECT 1 FROM dp_budget WHERE scope <> '*');
`

// Errors the ledger returns; test them with errors.Is. Each also matches its
// [accountant.Code] (errors.Is(err, accountant.CodeNoLedger)), and
// [accountant.CodeOf] reports it.
var (
	ErrNoLedger      = accountant.CodeNoLedger.Err("the database has no dpsql ledger: create one with `dpsql init DB --mu 1` or SELECT dp_init(1.0)")
	ErrUnknownScope  = accountant.CodeUnknownScope.Err("unknown budget scope")
	ErrChainBroken   = accountant.CodeChainBroken.Err("ledger hash chain broken")
	ErrWriteConflict = accountant.CodeWriteConflict.Err("the ledger could not be locked")
	// ErrNewerSchema reports a file whose schema version (PRAGMA
	// user_version) is later than SchemaVersion: a newer dpsql wrote it,
	// and this one can neither vouch for it nor charge it.
	ErrNewerSchema = errors.New("this file was written by a newer dpsql")
)

// newerSchema is the error for a file of schema version v > SchemaVersion.
func newerSchema(v int) error {
	return fmt.Errorf("%w (ledger schema version %d; this dpsql reads up to %d): upgrade dpsql", ErrNewerSchema, v, SchemaVersion)
}

// knownVersion checks that v is a schema version this dpsql reads:
// ErrNewerSchema for a later one, ErrMismatch for one no dpsql writes.
func knownVersion(v int) error {
	switch {
	case v > SchemaVersion:
		return newerSchema(v)
	case v < 0:
		return fmt.Errorf("%w: the file says schema version %d (PRAGMA user_version), which no dpsql writes (it reads versions 0 to %d): the version was changed",
			ErrMismatch, v, SchemaVersion)
	}
	return nil
}

// budgetRecord is the params of a budget event in dp_ledger.
type budgetRecord struct {
	MuBudget      float64 `json:"mu_budget"`
	Delta         float64 `json:"delta"`
	EpsilonBudget float64 `json:"epsilon_budget,omitempty"`
	Neighbours    string  `json:"neighbours"`
	// Migrated marks a budget copied from dp_budget when a version-0 file was
	// upgraded (such budgets were not chain events when they were created).
	Migrated  bool   `json:"migrated,omitempty"`
	CreatedAt string `json:"created_at,omitempty"` // of a migrated budget
}

func (r budgetRecord) budget(scope string) accountant.Budget {
	return accountant.Budget{Scope: scope, Mu: r.MuBudget, Delta: r.Delta, Epsilon: r.EpsilonBudget, Neighbours: r.Neighbours}
}

func recordOf(b accountant.Budget) budgetRecord {
	return budgetRecord{MuBudget: b.Mu, Delta: b.Delta, EpsilonBudget: b.Epsilon, Neighbours: b.Relation()}
}

// ledgerConn is what writing the ledger needs: a *sql.Conn or *sql.Tx.
type ledgerConn interface {
	Queryer
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Init creates the ledger schema (if absent; a version-0 or version-1 ledger is upgraded)
// and the budget scope b, recorded as a budget event in the hash chain and in
// dp_budget. Creating a scope that already exists is an error.
func Init(ctx context.Context, db *sql.DB, b accountant.Budget) error {
	if err := b.Validate(); err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Creating a ledger is a write, for charges to come: WAL mode.
	path := fileOf(ctx, conn)
	if err := (&Ledger{path: path}).checkBeforeSwitch(ctx, conn, nil, true); err != nil {
		return err
	}
	if err := switchToWAL(ctx, conn, path); err != nil {
		return fmt.Errorf("creating scope %q: %w", b.Scope, err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("creating scope %q: %w", b.Scope, err)
	}
	done := false
	defer func() {
		if !done {
			conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		}
	}()
	oc, err := ensureSchema(ctx, conn, true)
	if err != nil {
		return err
	}
	// As a charge does, refuse to write over a disagreement between the
	// chain and the tables derived from it.
	rows, err := ReadLedger(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := checkChain(rows); err != nil {
		return fmt.Errorf("refusing to create scope %q in a ledger whose chain does not verify (run `dpsql audit verify`): %w", b.Scope, err)
	}
	before, err := computeState(rows, nil)
	if err != nil {
		return fmt.Errorf("creating scope %q: the ledger cannot be accounted: %w", b.Scope, err)
	}
	if err := checkDerived(ctx, conn, before, oc.linked); err != nil {
		return fmt.Errorf("refusing to create scope %q (run `dpsql audit verify`); nothing was written: %w", b.Scope, err)
	}
	if err := createScope(ctx, conn, b); err != nil {
		return err
	}
	// A new scope or cap can change the relation or budget of the file's
	// total: its derived row is rewritten from the chain.
	rows, err = ReadLedger(ctx, conn)
	if err != nil {
		return err
	}
	fs, err := computeState(rows, nil)
	if err != nil {
		return fmt.Errorf("creating scope %q: the ledger cannot be accounted: %w", b.Scope, err)
	}
	if err := writeStates(ctx, conn, fs, accountant.FileScope); err != nil {
		return fmt.Errorf("creating scope %q: %w", b.Scope, err)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return fmt.Errorf("creating scope %q: %w", b.Scope, err)
	}
	done = true
	oc.note(path)
	return nil
}

// createScope inserts b into dp_budget and appends its budget event.
func createScope(ctx context.Context, x ledgerConn, b accountant.Budget) error {
	var eps any
	if b.Epsilon > 0 {
		eps = b.Epsilon
	}
	at := now()
	_, err := x.ExecContext(ctx, `INSERT INTO dp_budget(scope, mu_budget, delta, created_at, epsilon_budget, neighbours) VALUES (?, ?, ?, ?, ?, ?)`,
		b.Scope, b.Mu, b.Delta, at, eps, b.Relation())
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") {
			return fmt.Errorf("scope %q already has a budget; budgets cannot be changed, create a new scope", b.Scope)
		}
		return fmt.Errorf("creating scope %q: %w", b.Scope, err)
	}
	p, err := json.Marshal(recordOf(b))
	if err != nil {
		return err
	}
	_, err = appendRow(ctx, x, Row{At: at, Kind: EventBudget, Scope: b.Scope, Mechanism: EventBudget, Mu: b.Mu, Params: string(p)})
	return err
}

// ensureSchema brings the file's ledger to SchemaVersion: creates it when
// create is set and there is none, upgrades a version-0 or version-1 ledger
// (migrate.go), and refuses a file whose schema version or objects are not
// what a dpsql of that version writes (checkObjects), so that nothing is
// written over the evidence. Run it inside a write transaction: an upgrade is
// committed with what the transaction writes, or rolled back with it.
func ensureSchema(ctx context.Context, x ledgerConn, create bool) (objectsCheck, error) {
	var v int
	if err := x.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return objectsCheck{}, err
	}
	file, err := readMaster(ctx, x)
	if err != nil {
		return objectsCheck{}, fmt.Errorf("reading the file's schema: %w", err)
	}
	has := file["dp_ledger"].typ == "table"
	switch {
	case !has && !create:
		return objectsCheck{}, ErrNoLedger
	case !has:
		if _, err := x.ExecContext(ctx, Schema); err != nil {
			return objectsCheck{}, fmt.Errorf("creating the ledger schema: %w", err)
		}
		if _, err = x.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion)); err != nil {
			return objectsCheck{}, err
		}
		v = SchemaVersion // and objects of the same names that were there already are checked
		if file, err = readMaster(ctx, x); err != nil {
			return objectsCheck{}, err
		}
	}
	if v > SchemaVersion {
		return objectsCheck{}, fmt.Errorf("refusing to write to this ledger; nothing was written: %w", newerSchema(v))
	}
	oc, err := checkObjectsIn(file, v)
	if err != nil {
		return oc, fmt.Errorf("refusing to write to this ledger (run `dpsql audit verify`); nothing was written: %w", err)
	}
	oc.upgraded, oc.from = v < SchemaVersion, v
	if v == 0 {
		if err := migrateV0(ctx, x); err != nil {
			return oc, err
		}
		v = 1
	}
	if v == 1 {
		if err := migrateV1(ctx, x); err != nil {
			return oc, err
		}
	}
	return oc, nil
}

// schemaVersion returns the file's user_version and whether it has a ledger.
func schemaVersion(ctx context.Context, q Queryer) (int, bool, error) {
	var v, n int
	if err := q.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, false, err
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dp_ledger'`).Scan(&n); err != nil {
		return 0, false, err
	}
	return v, n > 0, nil
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }
