package protect

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/dpsql/dpsql/accountant"
)

// PolicySchema holds the owner's policies: dp_policy, one row per protected
// table, and dp_policy_log, an append-only, hash-chained log of every change
// (see VerifyPolicies). Analyst connections may read both and write neither.
const PolicySchema = `
CREATE TABLE IF NOT EXISTS dp_policy_log (
  id        INTEGER PRIMARY KEY,
  at        TEXT NOT NULL,
  tbl       TEXT NOT NULL,
  action    TEXT NOT NULL CHECK (action IN ('protect', 'unprotect')),
  policy    TEXT,
  prev_hash TEXT NOT NULL,
  hash      TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS dp_policy_log_no_update BEFORE UPDATE ON dp_policy_log
BEGIN SELECT RAISE(ABORT, 'dp_policy_log is append-only: rows cannot be updated'); END;
CREATE TRIGGER IF NOT EXISTS dp_policy_log_no_delete BEFORE DELETE ON dp_policy_log
BEGIN SELECT RAISE(ABORT, 'dp_policy_log is append-only: rows cannot be deleted'); END;
CREATE TABLE IF NOT EXISTS dp_policy (
  tbl    TEXT PRIMARY KEY COLLATE NOCASE,
  policy TEXT NOT NULL,
  log_id INTEGER NOT NULL REFERENCES dp_policy_log(id)
);
`

// Policy is the owner's rule for one protected table.
type Policy struct {
	// PrivacyUnit is the column that identifies a person; "" means each row
	// is a person (then MaxGroups and MaxRows are 1).
	PrivacyUnit string `json:"privacy_unit,omitempty"`
	// MaxGroups is how many groups of one GROUP BY one person may contribute to.
	MaxGroups int `json:"max_groups"`
	// MaxRows is how many rows per group one person may contribute.
	MaxRows int `json:"max_rows"`
	// Bounds are public clamping bounds per column, used by SUM and AVG when
	// the statement gives none.
	Bounds map[string][2]float64 `json:"bounds,omitempty"`
	// PublicKeys declares, per column, a public table.column that lists the
	// column's possible values: a GROUP BY on columns that all have one
	// releases every listed key (rows with other keys are dropped) with no
	// partition selection.
	PublicKeys map[string]string `json:"public_keys,omitempty"`
}

// Normalize fills defaults (1 group, 1 row) and checks the policy.
func (p *Policy) Normalize() error {
	if p.MaxGroups == 0 {
		p.MaxGroups = 1
	}
	if p.MaxRows == 0 {
		p.MaxRows = 1
	}
	if p.MaxGroups < 1 || p.MaxGroups > 1<<20 || p.MaxRows < 1 || p.MaxRows > 1<<20 {
		return fmt.Errorf("max_groups and max_rows must lie in [1, 2^20], got %d and %d", p.MaxGroups, p.MaxRows)
	}
	if p.PrivacyUnit == "" && (p.MaxGroups != 1 || p.MaxRows != 1) {
		return errors.New("without a privacy unit each row is a person, who contributes one row to one group: leave max_groups and max_rows at 1, or name the privacy-unit column")
	}
	for c, b := range p.Bounds {
		if !(b[0] < b[1]) || math.IsInf(b[0], 0) || math.IsInf(b[1], 0) {
			return fmt.Errorf("bounds of %s must be finite with lo < hi, got [%v, %v]", c, b[0], b[1])
		}
	}
	return nil
}

// ParsePolicy decodes a policy from JSON (as dp_protect takes it) and
// normalises it. Unknown keys are refused.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("policy is not valid JSON with keys privacy_unit, max_groups, max_rows, bounds, public_keys: %w", err)
	}
	return p, p.Normalize()
}

func (p Policy) canonical() string {
	b, _ := json.Marshal(p) // map keys are sorted by encoding/json
	return string(b)
}

// tableColumns returns the columns of a main-schema table, by lower-case name.
func tableColumns(ctx context.Context, q accountant.Queryer, table string) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT name FROM pragma_table_info(?, 'main')`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		cols[strings.ToLower(n)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("no table %q in the database", table)
	}
	return cols, nil
}

// canonicalTable returns the table's name as the schema spells it, or an
// error if it is not an ordinary table of the main schema.
func canonicalTable(ctx context.Context, q accountant.Queryer, table string) (string, error) {
	var name, typ string
	err := q.QueryRowContext(ctx, `SELECT name, type FROM main.sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')`, table).Scan(&name, &typ)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("no table %q in the database", table)
	}
	if err != nil {
		return "", err
	}
	if typ != "table" {
		return "", fmt.Errorf("%q is a view; protect the tables it reads", name)
	}
	if strings.HasPrefix(strings.ToLower(name), "dp_") || strings.HasPrefix(strings.ToLower(name), "sqlite_") {
		return "", fmt.Errorf("%q is dpsql's or SQLite's own table and cannot be protected", name)
	}
	return name, nil
}

// Protect records (or replaces) the policy of a table, through db, the
// owner's connection. The change is appended to dp_policy_log.
func Protect(ctx context.Context, db *sql.DB, table string, p Policy) error {
	if err := p.Normalize(); err != nil {
		return fmt.Errorf("protect %s: %w", table, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	name, err := canonicalTable(ctx, conn, table)
	if err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	cols, err := tableColumns(ctx, conn, name)
	if err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	if p.PrivacyUnit != "" {
		c, ok := cols[strings.ToLower(p.PrivacyUnit)]
		if !ok {
			return fmt.Errorf("protect %s: privacy unit column %q does not exist", name, p.PrivacyUnit)
		}
		p.PrivacyUnit = c
	}
	bounds := map[string][2]float64{}
	for c, b := range p.Bounds {
		cc, ok := cols[strings.ToLower(c)]
		if !ok {
			return fmt.Errorf("protect %s: bounds for column %q, which does not exist", name, c)
		}
		bounds[cc] = b
	}
	if len(bounds) > 0 {
		p.Bounds = bounds
	} else {
		p.Bounds = nil
	}
	keys := map[string]string{}
	for c, src := range p.PublicKeys {
		cc, ok := cols[strings.ToLower(c)]
		if !ok {
			return fmt.Errorf("protect %s: public keys for column %q, which does not exist", name, c)
		}
		kt, kc, _ := strings.Cut(src, ".")
		kt, err := canonicalTable(ctx, conn, kt)
		if err != nil {
			return fmt.Errorf("protect %s: public keys of %s: %w", name, cc, err)
		}
		if strings.EqualFold(kt, name) {
			return fmt.Errorf("protect %s: the public keys of %s cannot come from the protected table itself", name, cc)
		}
		if kc == "" {
			kc = cc
		}
		kcols, err := tableColumns(ctx, conn, kt)
		if err != nil {
			return err
		}
		canon, ok := kcols[strings.ToLower(kc)]
		if !ok {
			return fmt.Errorf("protect %s: public keys of %s: no column %q in %s (write TABLE.COLUMN)", name, cc, kc, kt)
		}
		keys[cc] = kt + "." + canon
	}
	if len(keys) > 0 {
		p.PublicKeys = keys
	} else {
		p.PublicKeys = nil
	}
	return appendPolicy(ctx, conn, name, "protect", &p)
}

// Unprotect removes a table's policy; its rows become public. Owner only.
func Unprotect(ctx context.Context, db *sql.DB, table string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ps, err := LoadPolicies(ctx, conn)
	if err != nil {
		return err
	}
	name := ""
	for n := range ps {
		if strings.EqualFold(n, table) {
			name = n
		}
	}
	if name == "" {
		return fmt.Errorf("unprotect: table %q is not protected", table)
	}
	return appendPolicy(ctx, conn, name, "unprotect", nil)
}

// appendPolicy writes one policy change in a transaction: the log row,
// chained to the previous one, and the new state of dp_policy.
func appendPolicy(ctx context.Context, conn *sql.Conn, table, action string, p *Policy) error {
	if _, err := conn.ExecContext(ctx, PolicySchema); err != nil {
		return fmt.Errorf("creating the policy tables: %w", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	id, prev := int64(1), accountant.GenesisHash
	switch err := tx.QueryRowContext(ctx, `SELECT id + 1, hash FROM dp_policy_log ORDER BY id DESC LIMIT 1`).Scan(&id, &prev); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	}
	e := PolicyEvent{ID: id, At: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Table: table, Action: action, PrevHash: prev}
	if p != nil {
		e.Policy = p.canonical()
	}
	e.Hash = e.ComputeHash()
	var pol any
	if p != nil {
		pol = e.Policy
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_policy_log(id, at, tbl, action, policy, prev_hash, hash) VALUES (?,?,?,?,?,?,?)`,
		e.ID, e.At, e.Table, e.Action, pol, e.PrevHash, e.Hash); err != nil {
		return fmt.Errorf("appending to dp_policy_log: %w", err)
	}
	if p != nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO dp_policy(tbl, policy, log_id) VALUES (?,?,?) ON CONFLICT(tbl) DO UPDATE SET tbl = excluded.tbl, policy = excluded.policy, log_id = excluded.log_id`, table, e.Policy, e.ID)
	} else {
		_, err = tx.ExecContext(ctx, `DELETE FROM dp_policy WHERE tbl = ?`, table)
	}
	if err != nil {
		return fmt.Errorf("updating dp_policy: %w", err)
	}
	return tx.Commit()
}

// PolicyEvent is one dp_policy_log row.
type PolicyEvent struct {
	ID       int64
	At       string
	Table    string
	Action   string // protect or unprotect
	Policy   string // canonical JSON; "" for unprotect
	PrevHash string
	Hash     string
}

// ComputeHash returns SHA-256, in hex, of the JSON array
// ["dp_policy_log", id, at, table, action, policy, prev_hash].
func (e PolicyEvent) ComputeHash() string {
	canon, _ := json.Marshal([]any{"dp_policy_log", e.ID, e.At, e.Table, e.Action, e.Policy, e.PrevHash})
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

// LoadPolicies reads every protected table's policy, by table name as the
// schema spells it. A database without policy tables protects nothing.
func LoadPolicies(ctx context.Context, q accountant.Queryer) (map[string]Policy, error) {
	rows, err := q.QueryContext(ctx, `SELECT tbl, policy FROM main.dp_policy`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return map[string]Policy{}, nil
		}
		return nil, err
	}
	defer rows.Close()
	out := map[string]Policy{}
	for rows.Next() {
		var t, js string
		if err := rows.Scan(&t, &js); err != nil {
			return nil, err
		}
		p, err := ParsePolicy([]byte(js))
		if err != nil {
			return nil, fmt.Errorf("policy of %s cannot be read (%v): refusing", t, err)
		}
		out[t] = p
	}
	return out, rows.Err()
}

// VerifyPolicies checks dp_policy_log's hash chain and that dp_policy is
// exactly the state the log leads to. It returns the number of log rows.
func VerifyPolicies(ctx context.Context, q accountant.Queryer) (int, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, at, tbl, action, coalesce(policy, ''), prev_hash, hash FROM main.dp_policy_log ORDER BY id`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return 0, nil
		}
		return 0, err
	}
	var evs []PolicyEvent
	for rows.Next() {
		var e PolicyEvent
		if err := rows.Scan(&e.ID, &e.At, &e.Table, &e.Action, &e.Policy, &e.PrevHash, &e.Hash); err != nil {
			rows.Close()
			return 0, err
		}
		evs = append(evs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	prev := accountant.GenesisHash
	want := map[string][2]string{} // lower-case table -> (policy, log id)
	for i, e := range evs {
		if e.PrevHash != prev {
			return i, fmt.Errorf("%w: dp_policy_log row %d does not chain to the previous row (a row was removed, inserted or reordered)", accountant.ErrChainBroken, e.ID)
		}
		if e.ComputeHash() != e.Hash {
			return i, fmt.Errorf("%w: dp_policy_log row %d does not match its hash (the row was edited)", accountant.ErrChainBroken, e.ID)
		}
		prev = e.Hash
		if e.Action == "protect" {
			want[strings.ToLower(e.Table)] = [2]string{e.Policy, fmt.Sprint(e.ID)}
		} else {
			delete(want, strings.ToLower(e.Table))
		}
	}
	got := map[string][2]string{}
	prow, err := q.QueryContext(ctx, `SELECT tbl, policy, log_id FROM main.dp_policy`)
	if err != nil {
		return len(evs), err
	}
	defer prow.Close()
	for prow.Next() {
		var t, p string
		var id int64
		if err := prow.Scan(&t, &p, &id); err != nil {
			return len(evs), err
		}
		got[strings.ToLower(t)] = [2]string{p, fmt.Sprint(id)}
	}
	if err := prow.Err(); err != nil {
		return len(evs), err
	}
	var bad []string
	for t, w := range want {
		if got[t] != w {
			bad = append(bad, t)
		}
	}
	for t := range got {
		if _, ok := want[t]; !ok {
			bad = append(bad, t)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return len(evs), fmt.Errorf("%w: dp_policy does not match dp_policy_log for %s (a policy was changed outside dpsql protect)", accountant.ErrChainBroken, strings.Join(bad, ", "))
	}
	return len(evs), nil
}
