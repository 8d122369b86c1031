package ext

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/dpsql/dpsql/sqlfuncs"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// Typed returns err, the error of the statement last run on conn, with the
// typed error behind it: SQLite passes only a function's message on to the
// statement's caller, so a refused charge (a budget refusal and the other
// accountant.Code errors) is recovered from the connection that ran the
// statement, never parsed from the message. The result's message is err's;
// errors.As and errors.Is see both err and the typed error (e.g.
// errors.Is(Typed(conn, err), accountant.CodeBudgetExceeded)). Call it on
// the same *sql.Conn before running another statement on it; err is
// returned as it is when nothing typed is known.
func Typed(conn *sql.Conn, err error) error {
	if err == nil || conn == nil {
		return err
	}
	var typed error
	_ = conn.Raw(func(dc any) error {
		if sc := sqliteConn(dc); sc != nil {
			if h, ok := handles.Load(sc); ok {
				typed = sqlfuncs.LastError(h.(hostHandle).db)
			}
		}
		return nil
	})
	if typed == nil || errors.Is(err, typed) {
		return err
	}
	// The connection counts statement runs, not statements: one that failed
	// before it ran (a syntax error, an unknown table) leaves the earlier
	// statement's refusal in place. The statement's message is the refused
	// function's own, so one that does not hold it is another statement's
	// error. (This decides only whether the typed error is err's, never
	// which code it has.)
	if !strings.Contains(err.Error(), typed.Error()) {
		return err
	}
	return &crossed{err: err, typed: typed}
}

// TypedContext is Typed for a caller that holds a *sql.DB: it cannot tell
// which pooled connection ran the statement, so it takes one with a single
// open connection only (db.SetMaxOpenConns(1)), as dpsql's CLI does; with a
// larger pool use Typed on a *sql.Conn.
func TypedContext(ctx context.Context, db *sql.DB, err error) error {
	if err == nil || db == nil || db.Stats().MaxOpenConnections != 1 {
		return err
	}
	conn, cerr := db.Conn(ctx)
	if cerr != nil {
		return err
	}
	defer conn.Close()
	return Typed(conn, err)
}

// sqliteConn returns the go-sqlite3 connection of a driver connection
// opened by this package's driver.
func sqliteConn(dc any) *sqlite3.SQLiteConn {
	switch c := dc.(type) {
	case *conn:
		return c.SQLiteConn
	case *sqlite3.SQLiteConn:
		return c
	}
	return nil
}

// crossed is a statement's error with the typed error behind it.
type crossed struct{ err, typed error }

func (e *crossed) Error() string   { return e.err.Error() }
func (e *crossed) Unwrap() []error { return []error{e.err, e.typed} }
