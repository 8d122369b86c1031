package ext

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
)

// splitRole removes the dp_role parameter from a DSN and reports whether it
// asks for an analyst connection. For analysts the statement cache
// (_stmt_cache_size) is removed too: a cached statement would skip the
// authorizer's check of the current policies.
func splitRole(dsn string) (string, bool, error) {
	i := strings.IndexByte(dsn, '?')
	if i < 0 {
		return dsn, false, nil
	}
	q, err := url.ParseQuery(dsn[i+1:])
	if err != nil {
		return "", false, fmt.Errorf("dpsql: bad DSN parameters %q: %w", dsn[i+1:], err)
	}
	role := q.Get("dp_role")
	switch role {
	case "", "curator", "owner":
	case "analyst":
		q.Del("_stmt_cache_size")
	default:
		return "", false, fmt.Errorf("dpsql: unknown dp_role %q (want analyst, or leave it out for the owner)", role)
	}
	q.Del("dp_role")
	rest := dsn[:i]
	if len(q) > 0 {
		rest += "?" + q.Encode()
	}
	return rest, role == "analyst", nil
}

// OpenAnalyst opens the database file at path for an analyst of protected
// mode, charging scope ("" means the default scope): the DSN of [DSN] with
// dp_role=analyst. Protected tables are reachable only through
// SELECT WITH DIFFERENTIAL_PRIVACY; public tables, the ledger, budgets and
// policies are readable and never writable. The owner's process holds the
// file; the analyst gets only this *sql.DB (see the threat model in docs/protected-mode.md).
func OpenAnalyst(path, scope string) (*sql.DB, error) {
	ctx := context.Background()
	dsn := DSN(path) + "&dp_role=analyst"
	if scope != "" {
		dsn += "&" + url.Values{"dp_scope": {scope}}.Encode()
	}
	db, err := sql.Open(DriverName, dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}
