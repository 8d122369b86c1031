package ext

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/protect"
)

// registerOwnerFuncs adds the owner's SQL functions to a curator connection:
//
//	dp_protect(table, policy_json)  record or replace a table's policy; returns the table's name
//	dp_unprotect(table)             remove a table's policy; returns the table's name
//
// policy_json has keys privacy_unit, max_groups, max_rows and bounds
// ({"col": [lo, hi]}), as json_object builds it. The change is written and
// committed on a connection of its own (like a ledger charge), so call these
// in a plain SELECT outside BEGIN ... COMMIT. Analyst connections refuse both.
// Both are SQLITE_DIRECTONLY: SQLite refuses them in views, triggers and
// schema expressions, so that whoever wrote the file's schema cannot make the
// owner's plain SELECT from a view remove or weaken a protection. db is the
// connection's sqlite3*, on which sqlfuncs.Register has run (it hands package
// sqlite the connection's API table); path is its main database file.
func registerOwnerFuncs(db unsafe.Pointer, path string) error {
	if err := ownerFunc(db, "dp_protect", 2, func(args ...any) (any, error) {
		table, policy, err := ownerArgs("dp_protect", args, "table", "policy")
		if err != nil {
			return nil, err
		}
		p, err := protect.ParsePolicy([]byte(policy))
		if err != nil {
			return nil, fmt.Errorf("dp_protect: %w", err)
		}
		db, err := ownerDB(path)
		if err != nil {
			return nil, fmt.Errorf("dp_protect: %w", err)
		}
		defer db.Close()
		if err := protect.Protect(context.Background(), db, table, p); err != nil {
			return nil, fmt.Errorf("dp_protect: %w", err)
		}
		return table, nil
	}); err != nil {
		return err
	}
	return ownerFunc(db, "dp_unprotect", 1, func(args ...any) (any, error) {
		table, _, err := ownerArgs("dp_unprotect", args, "table")
		if err != nil {
			return nil, err
		}
		db, err := ownerDB(path)
		if err != nil {
			return nil, fmt.Errorf("dp_unprotect: %w", err)
		}
		defer db.Close()
		if err := protect.Unprotect(context.Background(), db, table); err != nil {
			return nil, fmt.Errorf("dp_unprotect: %w", err)
		}
		return table, nil
	})
}

// ownerFunc adds the scalar SQL function name of nargs arguments to the
// connection db, marked SQLITE_DIRECTONLY; a panic in f becomes the call's
// error.
func ownerFunc(db unsafe.Pointer, name string, nargs int, f func(args ...any) (any, error)) error {
	c := sqlite.ConnOf(db)
	if !c.Valid() {
		return fmt.Errorf("registering %s: the connection has no dpsql functions: call sqlfuncs.Register first", name)
	}
	return c.CreateFunction(&sqlite.Func{Name: name, NArgs: nargs, Flags: sqlite.DirectOnly, CopyBlobs: true,
		Scalar: func(args []any) (any, error) { return f(args...) }})
}

// ownerArgs returns the owner function fn's TEXT arguments, named names
// (one or two).
func ownerArgs(fn string, args []any, names ...string) (first, second string, err error) {
	var out [2]string
	for i, name := range names {
		s, ok := args[i].(string)
		if !ok {
			return "", "", fmt.Errorf("%s: %s must be TEXT", fn, name)
		}
		out[i] = s
	}
	return out[0], out[1], nil
}

// ownerDB opens a writer on path for one policy change; the caller closes it.
func ownerDB(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("protected mode needs a database file")
	}
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
