package accountant

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
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
