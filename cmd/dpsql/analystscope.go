package main

import (
	"context"
	"database/sql"
	"fmt"
)

// checkAnalystScope fails early, in an analyst's words, when the scope an
// analyst session would charge does not exist: scope is the --scope flag (or
// DPSQL_SCOPE, or the config file's), "" for the default scope. Creating a
// scope is the owner's job, so the message asks for the analyst's scope
// rather than saying how to create one. A file without budgets is left to
// fail where it would have.
func checkAnalystScope(ctx context.Context, db *sql.DB, path, scope string) error {
	name := scope
	if name == "" {
		name = "default"
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM dp_budget WHERE scope = ?`, name).Scan(&n); err != nil || n > 0 {
		return nil
	}
	if scope == "" {
		return usagef("%s has no budget scope %q, which an analyst session charges when no --scope is given: pass --scope NAME (your scope, the one the owner created for you)", path, name)
	}
	return fmt.Errorf("%s has no budget scope %q: pass --scope NAME (your scope, the one the owner created for you; ask the owner if you do not know it)", path, name)
}
