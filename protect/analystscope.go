package protect

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/dpsql/dpsql/ledger"
)

// An analyst sees their own scope only. dpsql's tables hold every scope's
// figures (dp_ledger's rows and query texts, dp_budget, dp_scope_state, the
// view dp_budget_status) and the service's accounts (dp_account): an analyst
// connection reads none of them in the main schema. Instead it has TEMP
// tables of the same names holding its own scope's rows, which unqualified
// names reach first:
//
//	dp_ledger         the scope's charge and budget rows (all columns)
//	dp_budget         the scope's row
//	dp_scope_state    the scope's row
//	dp_budget_status  the scope's row
//
// They are brought up to the ledger's head before each statement the
// connection prepares (and an analyst cannot write them: dp_ names are
// reserved). The policies (dp_policy, dp_policy_log) are the same for
// every scope and stay readable.

// analystReadable are the main schema's dpsql tables an analyst connection
// reads as they are.
var analystReadable = []string{"dp_policy", "dp_policy_log"}

// scopedCopies are the TEMP tables of the scope's rows and the SQL that fills
// each from the main schema (?1 is the scope).
var scopedCopies = []struct{ name, fill string }{
	{"dp_budget", `SELECT * FROM main.dp_budget WHERE scope = ?1`},
	{"dp_scope_state", `SELECT * FROM main.dp_scope_state WHERE scope = ?1`},
	{"dp_budget_status", `SELECT * FROM main.dp_budget_status WHERE scope = ?1`},
	// dp_ledger is append-only: only the rows after the copy's last are added.
	{"dp_ledger", `SELECT * FROM main.dp_ledger WHERE id > (SELECT coalesce(max(id), 0) FROM temp.dp_ledger) AND scope = ?1 AND kind IN ('charge', 'budget')`},
}

// hiddenMain reports whether the authorizer refuses a read of table a1 in
// schema a3 on an analyst connection: dpsql's tables of the main schema, but
// the policies.
func hiddenMain(a1, a3 string) bool {
	t := strings.ToLower(a1)
	return a3 != "temp" && strings.HasPrefix(t, "dp_") && !containsFold(analystReadable, t)
}

// syncScope brings the connection's TEMP copies of its scope's rows up to
// the ledger's head (see above). A file without a ledger has nothing to copy.
// The copies and the head they are at (temp.dp_scope_copied) are written in
// one savepoint, so a transaction of the analyst's that rolls back takes
// both back.
func (c *AnalystConn) syncScope(ctx context.Context) error {
	head, err := ledger.ReadHead(ctx, c.engine.meta)
	if errors.Is(err, ledger.ErrNoLedger) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the ledger's head: %w", err)
	}
	// The authorizer lets the copies' own statements through (the
	// connection runs one statement at a time).
	c.syncing = true
	defer func() { c.syncing = false }()
	exec := func(q string, args ...any) error {
		nv := make([]driver.NamedValue, len(args))
		for i, a := range args {
			nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		_, err := c.sc.ExecContext(ctx, q, nv)
		return err
	}
	if err := exec(`CREATE TEMP TABLE IF NOT EXISTS dp_scope_copied (head_id INTEGER, head_hash TEXT)`); err != nil {
		return fmt.Errorf("copying the scope's ledger rows: %w", err)
	}
	var at ledger.Head
	rows, err := c.sc.QueryContext(ctx, `SELECT head_id, head_hash FROM temp.dp_scope_copied`, nil)
	if err != nil {
		return fmt.Errorf("copying the scope's ledger rows: %w", err)
	}
	dest := make([]driver.Value, 2)
	if rows.Next(dest) == nil {
		at.ID, _ = dest[0].(int64)
		at.Hash, _ = dest[1].(string)
	}
	rows.Close()
	if at == head {
		return nil
	}
	fresh := head.ID < at.ID // the chain is shorter than the copy: start again
	copyAll := func() error {
		if err := exec(`SAVEPOINT dp_scope_copy`); err != nil {
			return err
		}
		for _, t := range scopedCopies {
			if err := exec(fmt.Sprintf(`CREATE TEMP TABLE IF NOT EXISTS %s AS SELECT * FROM main.%s WHERE 0`, t.name, t.name)); err != nil {
				return err
			}
			if t.name != "dp_ledger" || fresh {
				if err := exec(`DELETE FROM temp.` + t.name); err != nil {
					return err
				}
			}
			if err := exec(`INSERT INTO temp.`+t.name+` `+t.fill, c.scope); err != nil {
				return err
			}
		}
		if err := exec(`DELETE FROM temp.dp_scope_copied`); err != nil {
			return err
		}
		if err := exec(`INSERT INTO temp.dp_scope_copied VALUES (?, ?)`, head.ID, head.Hash); err != nil {
			return err
		}
		return exec(`RELEASE dp_scope_copy`)
	}
	err = copyAll()
	if err != nil {
		// A schema that changed under the copies (an upgraded file): drop
		// them and copy again.
		_ = exec(`ROLLBACK TO dp_scope_copy`)
		_ = exec(`RELEASE dp_scope_copy`)
		for _, t := range scopedCopies {
			_ = exec(`DROP TABLE IF EXISTS temp.` + t.name)
		}
		fresh = true
		if err = copyAll(); err != nil {
			_ = exec(`ROLLBACK TO dp_scope_copy`)
			_ = exec(`RELEASE dp_scope_copy`)
		}
	}
	if err != nil {
		return fmt.Errorf("copying the scope's ledger rows: %w", err)
	}
	return nil
}
