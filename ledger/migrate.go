package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// migrateV0 upgrades a version-0 ledger (the first release's schema) to
// version 1 in place, inside the caller's write transaction:
//   - dp_ledger gains kind ('charge' for every old row) and form (0: the old
//     rows keep their canonical form and so their hashes);
//   - dp_budget gains neighbours: replace_one for a scope that already holds a
//     replace-one entry (its add/remove entries are then converted by group
//     privacy, which is sound), add_remove otherwise;
//   - each budget of dp_budget, as found, is appended as a budget event
//     (migrated: true, with its created_at), so that from now on the charge
//     path reads budgets from the chain;
//   - dp_scope_state loses its foreign key (it also holds the file's total)
//     and its cached PLDs, and is rewritten from the chain as version 1
//     accounts it (the samplers' noise_tv is now paid from delta);
//   - dp_budget_status counts charges only, shows the relation and a row for
//     the whole file (version 1's last view: migrateV1 then replaces it).
//
// Version-0 budgets were never chain events: what the upgrade copies is what
// dp_budget holds at that moment. The protecting triggers are left as found,
// so that Verify still reports one that was dropped.
func migrateV0(ctx context.Context, x ledgerConn) error {
	fail := func(err error) error { return fmt.Errorf("upgrading the ledger to schema version 1: %w", err) }
	for _, q := range []string{
		`ALTER TABLE dp_ledger ADD COLUMN kind TEXT NOT NULL DEFAULT 'charge'`,
		`ALTER TABLE dp_ledger ADD COLUMN form INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE dp_budget ADD COLUMN neighbours TEXT NOT NULL DEFAULT 'add_remove'`,
		`DROP VIEW IF EXISTS dp_budget_status`,
		// dp_scope_state loses its foreign key, to hold the file's total.
		`CREATE TABLE dp_scope_state_v1 ` + scopeStateColumns,
		`INSERT INTO dp_scope_state_v1 SELECT scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous, NULL FROM dp_scope_state`,
		`DROP TABLE dp_scope_state`,
		`ALTER TABLE dp_scope_state_v1 RENAME TO dp_scope_state`,
		v1StatusView,
	} {
		if _, err := x.ExecContext(ctx, q); err != nil {
			return fail(err)
		}
	}
	// Scopes that hold a replace-one entry become replace-one scopes.
	rows, err := ReadLedger(ctx, x)
	if err != nil {
		return fail(err)
	}
	replace := map[string]bool{}
	for _, r := range rows {
		var m mechanism.Mechanism
		if json.Unmarshal([]byte(r.Params), &m) == nil && m.Neighbours == mechanism.ReplaceOne {
			replace[r.Scope] = true
		}
	}
	if len(replace) > 0 {
		var hadTrigger int
		if err := x.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'dp_budget_no_update'`).Scan(&hadTrigger); err != nil {
			return fail(err)
		}
		if _, err := x.ExecContext(ctx, `DROP TRIGGER IF EXISTS dp_budget_no_update`); err != nil {
			return fail(err)
		}
		for s := range replace {
			if _, err := x.ExecContext(ctx, `UPDATE dp_budget SET neighbours = ? WHERE scope = ?`, mechanism.ReplaceOne, s); err != nil {
				return fail(err)
			}
		}
		if hadTrigger > 0 {
			t := protectingTriggers[2]
			if _, err := x.ExecContext(ctx, "CREATE TRIGGER "+t.name+" "+t.body); err != nil {
				return fail(err)
			}
		}
	}
	budgets, err := x.QueryContext(ctx, `SELECT scope, mu_budget, delta, created_at, coalesce(epsilon_budget, 0), neighbours FROM dp_budget ORDER BY created_at, scope`)
	if err != nil {
		return fail(err)
	}
	type found struct {
		scope string
		rec   budgetRecord
	}
	var all []found
	for budgets.Next() {
		var f found
		if err := budgets.Scan(&f.scope, &f.rec.MuBudget, &f.rec.Delta, &f.rec.CreatedAt, &f.rec.EpsilonBudget, &f.rec.Neighbours); err != nil {
			budgets.Close()
			return fail(err)
		}
		f.rec.Migrated = true
		all = append(all, f)
	}
	budgets.Close()
	if err := budgets.Err(); err != nil {
		return fail(err)
	}
	for _, f := range all {
		p, err := json.Marshal(f.rec)
		if err != nil {
			return fail(err)
		}
		if _, err := appendRow(ctx, x, Row{Kind: EventBudget, Scope: f.scope, Mechanism: EventBudget, Mu: f.rec.MuBudget, Params: string(p)}); err != nil {
			return fail(err)
		}
	}
	// Every scope's figures as version 1 computes them (the samplers' error
	// now paid from delta) and the file's total, which version 0 did not keep.
	if rows, err = ReadLedger(ctx, x); err != nil {
		return fail(err)
	}
	fs, err := computeState(rows, nil)
	if err != nil {
		return fail(err)
	}
	if err := writeStates(ctx, x, fs, append(sortedScopes(fs), accountant.FileScope)...); err != nil {
		return fail(err)
	}
	_, err = x.ExecContext(ctx, `PRAGMA user_version = 1`)
	return err
}

// migrateV1 upgrades a version-1 ledger to version 2 in place, inside the
// caller's write transaction (a charge's, a dp_init's or a record's, so that
// the upgrade is committed with that write or not at all): it replaces the
// dp_budget_status view, whichever version-1 release wrote it, with this
// version's, whose mu_remaining is the one remaining figure, and sets
// user_version to 2. Nothing else changes: the tables, their rows, the
// triggers and the chain are version 1's and version 2's alike (the chain
// gains no row; the version and the view are what an auditor sees change).
// After it a dpsql of version 1 refuses the file as written by a newer
// dpsql instead of reading the new view as a replaced one. The caller has
// checked the version-1 objects (checkObjectsIn), so a look-alike view is
// refused, not replaced.
func migrateV1(ctx context.Context, x ledgerConn) error {
	for _, q := range []string{
		`DROP VIEW dp_budget_status`,
		statusViewSQL,
		`PRAGMA user_version = 2`,
	} {
		if _, err := x.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("upgrading the ledger to schema version 2: %w", err)
		}
	}
	return nil
}

// writeStates rewrites the dp_scope_state rows of the named scopes (those with
// charges) from fs, for SQL readers.
func writeStates(ctx context.Context, x ledgerConn, fs *fileState, names ...string) error {
	for _, name := range names {
		sc, err := fs.scope(name)
		if err != nil || sc.entries == 0 {
			continue
		}
		st, err := sc.status(name)
		if err != nil {
			return err
		}
		var rig any
		if st.EpsilonRigorous.Valid {
			rig = st.EpsilonRigorous.Float64
		}
		if _, err := x.ExecContext(ctx, `INSERT OR REPLACE INTO dp_scope_state(scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous) VALUES (?,?,?,?,?,?)`,
			name, sc.lastID, st.MuSpent, st.MuRemaining, st.EpsilonSpent, rig); err != nil {
			return err
		}
	}
	return nil
}

// UpgradeNotice, when not nil, is told in words when this process has
// upgraded a file's ledger to SchemaVersion (once: the write that upgraded it
// committed). It prints the message on standard error; programs with a place
// of their own for messages replace it.
var UpgradeNotice = func(message string) {
	fmt.Fprintf(os.Stderr, "dpsql: %s\n", message)
}

// note tells UpgradeNotice that ensureSchema upgraded the file at path, once
// the write that did it committed.
func (oc objectsCheck) note(path string) {
	if oc.upgraded && UpgradeNotice != nil {
		UpgradeNotice(fmt.Sprintf("upgraded the ledger of %s from schema version %d to %d (docs/ledger.md, Schema versions); "+
			"a dpsql that reads only version %d or earlier no longer charges it, and says it was written by a newer dpsql", path, oc.from, SchemaVersion, oc.from))
	}
}
