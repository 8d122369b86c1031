package ledger

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// The objects dpsql creates in a database file, each with the SQL texts
// SQLite keeps for it in sqlite_master (CREATE ... IF NOT EXISTS is kept
// without IF NOT EXISTS; an automatic index has none). [Verify] and every
// write to the ledger compare the file's objects with these: an object of
// another type, another SQL text or a trigger that dpsql does not create on
// one of these tables is a disagreement. Each schema version has its own
// list, with every text a dpsql of that version wrote (a version-1 file
// upgraded from version 0 by ALTER TABLE keeps those texts; the status views
// of the version-1 releases): a file is checked against its version's list
// only, so a file that says version 2 with a version-1 view, or the reverse,
// is a disagreement. An upgrade (migrate.go) replaces what differs.

// object is one entry of sqlite_master that dpsql creates.
type object struct {
	typ, name, table string
	sql              []string // accepted texts, this version's first; nil: an automatic index (no SQL)
}

// stored returns the text SQLite keeps for the CREATE statement stmt.
func stored(stmt string) string {
	s := strings.TrimSuffix(strings.TrimSpace(stmt), ";")
	for _, t := range []string{"TABLE", "INDEX", "TRIGGER", "VIEW"} {
		s = strings.Replace(s, "CREATE "+t+" IF NOT EXISTS ", "CREATE "+t+" ", 1)
	}
	return s
}

// statements splits a schema into its CREATE statements (a trigger's body
// ends with "END;").
func statements(schema string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.SplitAfter(schema, ";\n") {
		s := stored(part)
		if s == "" {
			continue
		}
		f := strings.Fields(s)
		out[f[2]] = s
	}
	return out
}

// ledgerObjects returns the ledger's objects in a file of schema version v
// (0 to SchemaVersion; the caller has refused any other).
func ledgerObjects(v int) []object {
	switch v {
	case 0:
		return objectsV0
	case 1:
		return objectsV1
	}
	return objectsV2
}

var objectsV0, objectsV1, objectsV2 = makeLedgerObjects(0), makeLedgerObjects(1), makeLedgerObjects(2)

// makeLedgerObjects lists the ledger's objects of version v as the dpsql
// releases of that version wrote them: a fresh file's, and those of a file
// upgraded from an earlier version (an upgrade keeps the tables' texts).
// Versions 1 and 2 differ only in the view.
func makeLedgerObjects(v int) []object {
	cur := statements(Schema)
	auto := []object{
		{"index", "sqlite_autoindex_dp_budget_1", "dp_budget", nil},
		{"index", "sqlite_autoindex_dp_scope_state_1", "dp_scope_state", nil},
	}
	triggers := make([]object, 0, len(protectingTriggers))
	for _, t := range protectingTriggers {
		table := strings.Fields(t.body)[3]
		triggers = append(triggers, object{"trigger", t.name, table, []string{cur[t.name]}})
	}
	var objs []object
	switch v {
	case 0:
		objs = []object{
			{"table", "dp_budget", "dp_budget", []string{v0Budget}},
			{"table", "dp_ledger", "dp_ledger", []string{v0Ledger}},
			{"index", "dp_ledger_scope", "dp_ledger", []string{cur["dp_ledger_scope"]}},
			{"table", "dp_scope_state", "dp_scope_state", []string{v0ScopeState}},
			{"view", "dp_budget_status", "dp_budget_status", []string{v0StatusView}},
		}
	default:
		budget, ledger, state := cur["dp_budget"], cur["dp_ledger"], cur["dp_scope_state"]
		views := []string{cur["dp_budget_status"]}
		if v == 1 {
			budget, ledger, state = v1Budget, v1Ledger, v1ScopeState
			views = v1StatusViews
		}
		objs = []object{
			{"table", "dp_budget", "dp_budget", []string{budget, strings.TrimSuffix(v0Budget, ")") + upgradedBudget}},
			{"table", "dp_ledger", "dp_ledger", []string{ledger, strings.TrimSuffix(v0Ledger, ")") + upgradedLedger}},
			{"index", "dp_ledger_scope", "dp_ledger", []string{cur["dp_ledger_scope"]}},
			{"table", "dp_scope_state", "dp_scope_state", []string{state, upgradedScopeState, v0ScopeState}},
			{"view", "dp_budget_status", "dp_budget_status", views},
		}
	}
	return append(append(objs, auto...), triggers...)
}

// otherObjects are the objects the other packages create in a file when they
// are used (protected mode's dp_policy, an old file's dp_policy_log, the
// analyst service's dp_account, the SQL functions' caches); their texts are
// checked against what those packages create by a test of the command line,
// which links them all.
var otherObjects = []object{
	{"table", "dp_policy", "dp_policy", []string{policySQL, legacyPolicySQL}},
	{"index", "sqlite_autoindex_dp_policy_1", "dp_policy", nil},
	{"table", "dp_policy_log", "dp_policy_log", []string{policyLogSQL}},
	{"trigger", "dp_policy_log_no_update", "dp_policy_log", []string{"CREATE TRIGGER dp_policy_log_no_update BEFORE UPDATE ON dp_policy_log\n" +
		"BEGIN SELECT RAISE(ABORT, 'dp_policy_log is append-only: rows cannot be updated'); END"}},
	{"trigger", "dp_policy_log_no_delete", "dp_policy_log", []string{"CREATE TRIGGER dp_policy_log_no_delete BEFORE DELETE ON dp_policy_log\n" +
		"BEGIN SELECT RAISE(ABORT, 'dp_policy_log is append-only: rows cannot be deleted'); END"}},
	{"table", "dp_account", "dp_account", []string{accountSQL}},
	{"index", "sqlite_autoindex_dp_account_1", "dp_account", nil},
	{"table", "dp_optnoise_cache", "dp_optnoise_cache", []string{optCacheSQL}},
	{"index", "sqlite_autoindex_dp_optnoise_cache_1", "dp_optnoise_cache", nil},
	{"table", "dp_calibration_cache", "dp_calibration_cache", []string{calibrationCacheSQL}},
	{"index", "sqlite_autoindex_dp_calibration_cache_1", "dp_calibration_cache", nil},
}

// master is one row of sqlite_master.
type master struct {
	typ, name, table string
	sql              *string
}

// readMaster returns sqlite_master's rows by lower-case name (SQLite's
// names are case-insensitive).
func readMaster(ctx context.Context, q Queryer) (map[string]master, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, tbl_name, sql FROM sqlite_master`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]master{}
	for rows.Next() {
		var m master
		if err := rows.Scan(&m.typ, &m.name, &m.table, &m.sql); err != nil {
			return nil, err
		}
		out[strings.ToLower(m.name)] = m
	}
	return out, rows.Err()
}

// objectsCheck is what checkObjects found beside the disagreements it
// reports.
type objectsCheck struct {
	linked []string // the derived tables present that name ledger rows (ledger_id): dp_policy, dp_account
	// upgraded is set by ensureSchema when it upgraded the file, in the
	// caller's transaction, from schema version from.
	upgraded bool
	from     int
}

// checkObjects compares the file's objects with those dpsql creates in a
// file of schema version v: the ledger's must all be there, the others'
// when present, each of its type and with one of its texts, and no other
// trigger may sit on one of their tables. It names the first disagreement,
// wrapping ErrMismatch.
func checkObjects(ctx context.Context, q Queryer, v int) (objectsCheck, error) {
	var res objectsCheck
	if err := knownVersion(v); err != nil {
		return res, err
	}
	file, err := readMaster(ctx, q)
	if err != nil {
		return res, fmt.Errorf("reading the file's schema: %w", err)
	}
	return checkObjectsIn(file, v)
}

// checkObjectsIn is checkObjects on the file's sqlite_master rows.
func checkObjectsIn(file map[string]master, v int) (objectsCheck, error) {
	var res objectsCheck
	if err := knownVersion(v); err != nil {
		return res, err
	}
	if l, ok := file["dp_ledger"]; ok && v == 0 && l.sql != nil && indexOf(ledgerObjects(SchemaVersion)[1].sql, *l.sql) >= 0 {
		// user_version is anyone's to set: a file with the event-model
		// columns is not a version-0 file, whatever it says.
		return res, fmt.Errorf("%w: the file says schema version 0 (PRAGMA user_version) but its dp_ledger has the event-model columns of version 1: "+
			"the version was set back, which would skip the budget checks", ErrMismatch)
	}
	ours := append(append([]object(nil), ledgerObjects(v)...), otherObjects...)
	required := len(ledgerObjects(v))
	tables := map[string]bool{}
	for i, o := range ours {
		got, ok := file[o.name]
		if !ok {
			if i < required {
				return res, fmt.Errorf("%w: %s %s is missing (it was dropped)", ErrMismatch, o.typ, o.name)
			}
			continue
		}
		if got.typ != o.typ || !strings.EqualFold(got.table, o.table) {
			return res, fmt.Errorf("%w: %s is a %s on %s, but dpsql creates a %s on %s there (another object took its name)",
				ErrMismatch, o.name, got.typ, got.table, o.typ, o.table)
		}
		if o.typ == "table" {
			tables[o.name] = true
			if got.sql != nil && strings.Contains(*got.sql, "ledger_id INTEGER") {
				res.linked = append(res.linked, o.name)
			}
		}
		switch {
		case o.sql == nil && got.sql == nil:
		case o.sql == nil || got.sql == nil:
			return res, fmt.Errorf("%w: %s %s is not the one dpsql creates (it was replaced)", ErrMismatch, o.typ, o.name)
		default:
			if indexOf(o.sql, *got.sql) < 0 {
				return res, fmt.Errorf("%w: %s %s was replaced: its SQL is not the one dpsql writes (see it with SELECT sql FROM sqlite_master WHERE name = '%s')",
					ErrMismatch, o.typ, o.name, o.name)
			}
		}
	}
	known := map[string]bool{}
	for _, o := range ours {
		known[o.name] = true
	}
	var names []string
	for n := range file {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := file[n]
		if m.typ == "trigger" && !known[n] && tables[strings.ToLower(m.table)] {
			return res, fmt.Errorf("%w: trigger %s on %s is not one dpsql creates: it can change or drop what dpsql writes (see it with SELECT sql FROM sqlite_master WHERE name = '%s')",
				ErrMismatch, m.name, m.table, m.name)
		}
	}
	return res, nil
}

// checkStatusView checks that v is a schema version this dpsql reads and
// that dp_budget_status is a view dpsql writes in a file of that version.
func checkStatusView(ctx context.Context, q Queryer, v int) error {
	if err := knownVersion(v); err != nil {
		return err
	}
	var got string
	if err := q.QueryRowContext(ctx, `SELECT coalesce((SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'dp_budget_status'), '')`).Scan(&got); err != nil {
		return err
	}
	for _, o := range ledgerObjects(v) {
		if o.name == "dp_budget_status" && indexOf(o.sql, got) < 0 {
			return fmt.Errorf("%w: view dp_budget_status was replaced or dropped: its SQL is not the one dpsql writes", ErrMismatch)
		}
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// v1StatusView is the last version-1 release's view, which the upgrade from
// version 0 writes (migrateV0) before migrateV1 replaces it.
var v1StatusView = v1StatusViews[0]

// The texts of older versions and of the other packages' objects, as SQLite
// keeps them.
const (
	// The version-1 tables, as every version-1 release created them (and
	// version 2 creates them still).
	v1Budget = `CREATE TABLE dp_budget (
  scope          TEXT PRIMARY KEY,
  mu_budget      REAL NOT NULL CHECK (mu_budget > 0),
  delta          REAL NOT NULL CHECK (delta > 0 AND delta < 1),
  created_at     TEXT NOT NULL,
  epsilon_budget REAL CHECK (epsilon_budget IS NULL OR epsilon_budget > 0),
  neighbours     TEXT NOT NULL DEFAULT 'add_remove'
)`
	v1Ledger = `CREATE TABLE dp_ledger (
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
)`
	v1ScopeState = `CREATE TABLE dp_scope_state (
  scope            TEXT PRIMARY KEY,
  through_id       INTEGER NOT NULL,
  mu_spent         REAL NOT NULL,
  mu_remaining     REAL NOT NULL,
  epsilon_spent    REAL NOT NULL,
  epsilon_rigorous REAL,
  pld              BLOB
)`

	v0Budget = `CREATE TABLE dp_budget (
  scope          TEXT PRIMARY KEY,
  mu_budget      REAL NOT NULL CHECK (mu_budget > 0),
  delta          REAL NOT NULL CHECK (delta > 0 AND delta < 1),
  created_at     TEXT NOT NULL,
  epsilon_budget REAL CHECK (epsilon_budget IS NULL OR epsilon_budget > 0)
)`
	v0Ledger = `CREATE TABLE dp_ledger (
  id        INTEGER PRIMARY KEY,
  at        TEXT NOT NULL,
  scope     TEXT NOT NULL REFERENCES dp_budget(scope),
  mechanism TEXT NOT NULL,
  mu        REAL NOT NULL,
  params    TEXT NOT NULL,
  query     TEXT,
  prev_hash TEXT NOT NULL,
  hash      TEXT NOT NULL
)`
	// A version-0 file's dp_scope_state (kept by version-1 files of the
	// first version-1 release).
	v0ScopeState = `CREATE TABLE dp_scope_state (
  scope            TEXT PRIMARY KEY REFERENCES dp_budget(scope),
  through_id       INTEGER NOT NULL,
  mu_spent         REAL NOT NULL,
  mu_remaining     REAL NOT NULL,
  epsilon_spent    REAL NOT NULL,
  epsilon_rigorous REAL,
  pld              BLOB
)`
	v0StatusView = `CREATE VIEW dp_budget_status AS
SELECT b.scope AS scope,
       b.mu_budget AS mu_budget,
       coalesce(s.mu_spent, 0) AS mu_spent,
       coalesce(s.mu_remaining, b.mu_budget) AS mu_remaining,
       coalesce(s.epsilon_spent, 0) AS epsilon_spent,
       b.delta AS delta,
       b.epsilon_budget AS epsilon_budget,
       s.epsilon_rigorous AS epsilon_rigorous,
       (SELECT count(*) FROM dp_ledger l WHERE l.scope = b.scope) AS entries
FROM dp_budget b LEFT JOIN dp_scope_state s ON s.scope = b.scope`

	// What the upgrade (migrate.go) makes of the version-0 tables: ALTER
	// TABLE ADD COLUMN appends to the kept text; dp_scope_state is created
	// anew and renamed, which quotes its name.
	upgradedBudget     = ", neighbours TEXT NOT NULL DEFAULT 'add_remove')"
	upgradedLedger     = ", kind TEXT NOT NULL DEFAULT 'charge', form INTEGER NOT NULL DEFAULT 0)"
	upgradedScopeState = `CREATE TABLE "dp_scope_state" ` + scopeStateColumns

	policySQL = `CREATE TABLE dp_policy (
  tbl       TEXT PRIMARY KEY COLLATE NOCASE,
  policy    TEXT NOT NULL,
  ledger_id INTEGER NOT NULL
)`
	legacyPolicySQL = `CREATE TABLE dp_policy (
  tbl    TEXT PRIMARY KEY COLLATE NOCASE,
  policy TEXT NOT NULL,
  log_id INTEGER NOT NULL REFERENCES dp_policy_log(id)
)`
	policyLogSQL = `CREATE TABLE dp_policy_log (
  id        INTEGER PRIMARY KEY,
  at        TEXT NOT NULL,
  tbl       TEXT NOT NULL,
  action    TEXT NOT NULL CHECK (action IN ('protect', 'unprotect')),
  policy    TEXT,
  prev_hash TEXT NOT NULL,
  hash      TEXT NOT NULL
)`
	accountSQL = `CREATE TABLE dp_account (
	name TEXT PRIMARY KEY,
	scope TEXT NOT NULL,
	hasher TEXT NOT NULL,
	salt TEXT NOT NULL,
	hash TEXT NOT NULL,
	added_at TEXT NOT NULL,
	revoked_at TEXT,
	ledger_id INTEGER NOT NULL
)`
	optCacheSQL = `CREATE TABLE dp_optnoise_cache (
  epsilon  REAL NOT NULL,
  delta    REAL NOT NULL,
  loss     TEXT NOT NULL,
  per_unit INTEGER NOT NULL,
  half     INTEGER NOT NULL,
  weights  BLOB NOT NULL,
  sha256   TEXT NOT NULL,
  PRIMARY KEY (epsilon, delta, loss, per_unit, half)
)`
	calibrationCacheSQL = `CREATE TABLE dp_calibration_cache (
  problem TEXT PRIMARY KEY,
  sigma   REAL NOT NULL
)`
)

// v1StatusViews are the dp_budget_status views the version-1 releases wrote,
// the last first: with the guarantee column, then without it, then without
// the file's total either. A version-1 dpsql replaced an earlier one's view
// at its next write; version 2's view (mu_remaining no more than the file's
// cap leaves, issue 23) is not among them: a version-1 dpsql would refuse it
// as replaced, so it comes with version 2.
var v1StatusViews = []string{
	`CREATE VIEW dp_budget_status AS
SELECT b.scope AS scope,
       b.mu_budget AS mu_budget,
       coalesce(s.mu_spent, 0) AS mu_spent,
       coalesce(s.mu_remaining, b.mu_budget) AS mu_remaining,
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
WHERE EXISTS (SELECT 1 FROM dp_budget WHERE scope <> '*')`,
	`CREATE VIEW dp_budget_status AS
SELECT b.scope AS scope,
       b.mu_budget AS mu_budget,
       coalesce(s.mu_spent, 0) AS mu_spent,
       coalesce(s.mu_remaining, b.mu_budget) AS mu_remaining,
       coalesce(s.epsilon_spent, 0) AS epsilon_spent,
       b.delta AS delta,
       b.epsilon_budget AS epsilon_budget,
       s.epsilon_rigorous AS epsilon_rigorous,
       (SELECT count(*) FROM dp_ledger l WHERE l.scope = b.scope AND l.kind = 'charge') AS entries,
       b.neighbours AS neighbours
FROM dp_budget b LEFT JOIN dp_scope_state s ON s.scope = b.scope`,
	`CREATE VIEW dp_budget_status AS
SELECT b.scope AS scope,
       b.mu_budget AS mu_budget,
       coalesce(s.mu_spent, 0) AS mu_spent,
       coalesce(s.mu_remaining, b.mu_budget) AS mu_remaining,
       coalesce(s.epsilon_spent, 0) AS epsilon_spent,
       b.delta AS delta,
       b.epsilon_budget AS epsilon_budget,
       s.epsilon_rigorous AS epsilon_rigorous,
       (SELECT count(*) FROM dp_ledger l WHERE l.scope = b.scope AND l.kind = 'charge') AS entries,
       b.neighbours AS neighbours
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
       coalesce(c.neighbours, CASE WHEN EXISTS (SELECT 1 FROM dp_budget WHERE scope <> '*' AND neighbours = 'replace_one') THEN 'replace_one' ELSE 'add_remove' END)
FROM (SELECT 1) LEFT JOIN dp_budget c ON c.scope = '*' LEFT JOIN dp_scope_state s ON s.scope = '*'
WHERE EXISTS (SELECT 1 FROM dp_budget WHERE scope <> '*')`,
}
