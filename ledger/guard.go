package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dpsql/dpsql/accountant"
)

// The checks beside the chain's: SQLite's integrity check of the tables
// dpsql writes, the types of their values, and (cheap, before every charge)
// the derived tables against the chain.

// checkIntegrity runs SQLite's integrity check over each table dpsql creates
// that the file holds, and their indexes, and names the first problem it
// reports.
func checkIntegrity(ctx context.Context, q Queryer) error {
	file, err := readMaster(ctx, q)
	if err != nil {
		return err
	}
	var tables []string
	for _, o := range append(ledgerObjects(SchemaVersion), otherObjects...) {
		if m, ok := file[o.name]; ok && o.typ == "table" && m.typ == "table" {
			tables = append(tables, o.name)
		}
	}
	return integrityOf(ctx, q, tables...)
}

// integrityOf runs SQLite's integrity check over each table and its
// indexes, and names the first problem it reports.
func integrityOf(ctx context.Context, q Queryer, tables ...string) error {
	for _, name := range tables {
		var first string
		err := q.QueryRowContext(ctx, `PRAGMA integrity_check(`+name+`)`).Scan(&first)
		if err == nil && first != "ok" {
			err = errors.New(first)
		}
		if err != nil {
			return fmt.Errorf("%w: SQLite's integrity check of %s and its indexes fails: %v (the pages that hold them are damaged or were changed)",
				ErrMismatch, name, err)
		}
	}
	return nil
}

// columnTypes are the types (typeof) dpsql writes in the ledger's tables,
// per column; a column a version-0 file lacks is skipped.
var columnTypes = []struct {
	table   string
	columns [][2]string // name, the types it may hold
}{
	{"dp_ledger", [][2]string{{"id", "'integer'"}, {"at", "'text'"}, {"scope", "'text'"}, {"mechanism", "'text'"}, {"mu", "'real'"},
		{"params", "'text'"}, {"query", "'text', 'null'"}, {"prev_hash", "'text'"}, {"hash", "'text'"}, {"kind", "'text'"}, {"form", "'integer'"}}},
	{"dp_budget", [][2]string{{"scope", "'text'"}, {"mu_budget", "'real'"}, {"delta", "'real'"}, {"created_at", "'text'"},
		{"epsilon_budget", "'real', 'null'"}, {"neighbours", "'text'"}}},
	{"dp_scope_state", [][2]string{{"scope", "'text'"}, {"through_id", "'integer'"}, {"mu_spent", "'real'"}, {"mu_remaining", "'real'"},
		{"epsilon_spent", "'real'"}, {"epsilon_rigorous", "'real', 'null'"}, {"pld", "'blob', 'null'"}}},
	{"dp_policy", [][2]string{{"tbl", "'text'"}, {"policy", "'text'"}, {"ledger_id", "'integer'"}}},
	{"dp_account", [][2]string{{"name", "'text'"}, {"scope", "'text'"}, {"hasher", "'text'"}, {"salt", "'text'"}, {"hash", "'text'"},
		{"added_at", "'text'"}, {"revoked_at", "'text', 'null'"}, {"ledger_id", "'integer'"}}},
}

// checkTypes reports the first value of the ledger's tables, dp_policy's
// and dp_account's whose type is not the one dpsql writes (the hash covers a row's text, not its type: a
// TEXT turned BLOB of the same bytes reads the same).
func checkTypes(ctx context.Context, q Queryer, v int) error {
	for _, t := range columnTypes {
		var conds, cases []string
		for _, c := range t.columns {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, t.table, c[0]).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			cond := fmt.Sprintf("typeof(%s) NOT IN (%s)", c[0], c[1])
			if c[0] == "query" && t.table == "dp_ledger" && v > 0 {
				cond = "(" + cond + " OR query = '' AND form <> 0)" // NULL for no query, but '' in version-0 rows
			}
			conds = append(conds, cond)
			cases = append(cases, fmt.Sprintf("WHEN %s THEN '%s'", cond, c[0]))
		}
		if len(conds) == 0 { // a table the file does not have
			continue
		}
		var rowid int64
		var col string
		err := q.QueryRowContext(ctx, `SELECT rowid, CASE `+strings.Join(cases, " ")+` END FROM `+t.table+
			` WHERE `+strings.Join(conds, " OR ")+` LIMIT 1`).Scan(&rowid, &col)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		if col == "pld" {
			col = "pld (a checkpoint's kept composition)"
		}
		return fmt.Errorf("%w: %s row %d holds a %s of another type than dpsql writes", ErrMismatch, t.table, rowid, col)
	}
	return nil
}

// createdAt returns when a budget event (checked) says its budget was
// created: the row's time, or the created_at a version-0 budget carried over
// (migrate.go).
func createdAt(r Row) string {
	var rec budgetRecord
	if json.Unmarshal([]byte(r.Params), &rec) == nil && rec.Migrated {
		return rec.CreatedAt
	}
	return r.At
}

// compareCreated checks each dp_budget row's created_at against its budget
// event's (fs.created).
func compareCreated(ctx context.Context, q Queryer, fs *fileState) error {
	want := fs.created
	got, err := q.QueryContext(ctx, `SELECT scope, created_at FROM dp_budget`)
	if err != nil {
		return err
	}
	defer got.Close()
	for got.Next() {
		var scope, at string
		if err := got.Scan(&scope, &at); err != nil {
			return err
		}
		if w, ok := want[scope]; ok && at != w {
			return fmt.Errorf("%w: dp_budget says scope %q was created at %s; its budget event says %s", ErrMismatch, scope, at, w)
		}
	}
	return got.Err()
}

// preflight runs a charge's cheap checks in x, its transaction, before the
// charge writes anything, and returns the chain's state: the schema version
// and every object dpsql creates (ensureSchema: a dropped or replaced
// trigger, a look-alike view; an older file is upgraded here, which the
// caller says once it committed: objectsCheck.note), the chain
// since the head this process last saw (state), and the derived tables
// against the chain (checkDerived: a deleted tail leaves dp_scope_state
// ahead of it). A charge over a disagreement would overwrite the evidence.
func (l *Ledger) preflight(ctx context.Context, x ledgerConn) (*fileState, objectsCheck, error) {
	oc, err := ensureSchema(ctx, x, false)
	if err != nil {
		return nil, oc, err
	}
	fs, err := l.state(ctx, x)
	if err != nil {
		return nil, oc, err
	}
	if err := checkDerived(ctx, x, fs, oc.linked); err != nil {
		return nil, oc, fmt.Errorf("refusing to charge (run `dpsql audit verify`); nothing was charged: %w", err)
	}
	return fs, oc, nil
}

// checkDerived is a charge's check of the derived tables against the chain
// state fs it is about to extend, before it writes anything: dp_budget must
// hold exactly the chain's budgets, dp_scope_state exactly the figures of
// each scope's last charge (a tail deleted from the chain leaves it ahead),
// and dp_policy and dp_account no id past the chain's head; and SQLite's
// integrity check of dp_budget and dp_scope_state passes. It reads a few
// rows per scope; the chain's own check is state's.
func checkDerived(ctx context.Context, tx Queryer, fs *fileState, linked []string) error {
	// The small derived tables' pages first (a few per scope, table or
	// account; dp_ledger's integrity check grows with its history and is
	// Verify's).
	if err := integrityOf(ctx, tx, append([]string{"dp_budget", "dp_scope_state"}, linked...)...); err != nil {
		return err
	}
	// dp_budget in one read: the budgets and their creation times.
	tb, created := map[string]accountant.Budget{}, map[string]string{}
	rows, err := tx.QueryContext(ctx, `SELECT scope, mu_budget, delta, coalesce(epsilon_budget, 0), neighbours, created_at FROM dp_budget`)
	if err != nil {
		return fmt.Errorf("%w: reading dp_budget: %v", ErrMismatch, err)
	}
	for rows.Next() {
		var b accountant.Budget
		var at string
		if err := rows.Scan(&b.Scope, &b.Mu, &b.Delta, &b.Epsilon, &b.Neighbours, &at); err != nil {
			rows.Close()
			return fmt.Errorf("%w: reading dp_budget: %v", ErrMismatch, err)
		}
		tb[b.Scope], created[b.Scope] = b, at
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: reading dp_budget: %v", ErrMismatch, err)
	}
	if err := compareBudgets(fs, tb); err != nil {
		return err
	}
	for _, scope := range slices.Sorted(maps.Keys(created)) {
		if w, ok := fs.created[scope]; ok && created[scope] != w {
			at := created[scope]
			return fmt.Errorf("%w: dp_budget says scope %q was created at %s; its budget event says %s", ErrMismatch, scope, at, w)
		}
	}
	// Every figure but what remains (a search per scope: Verify's).
	if _, _, err := compareStates(ctx, tx, fs, true, false); err != nil {
		if errors.Is(err, ErrMismatch) {
			return err
		}
		return fmt.Errorf("%w: reading dp_scope_state: %v", ErrMismatch, err)
	}
	for _, t := range linked {
		var past sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(ledger_id) FROM `+t+` WHERE ledger_id > ?`, fs.head.ID).Scan(&past); err != nil {
			return fmt.Errorf("%w: reading %s: %v", ErrMismatch, t, err)
		}
		if past.Valid {
			return fmt.Errorf("%w: %s names ledger row %d, past the chain's head %d (rows were removed from the chain's tail)", ErrMismatch, t, past.Int64, fs.head.ID)
		}
	}
	return nil
}
