package sqlfuncs

import (
	"context"
	"database/sql"
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/release"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// DefaultScope is the budget scope a connection charges until dp_use_scope or
// the dp_scope DSN parameter names another.
const DefaultScope = "default"

// Conn is dpsql's state for one SQLite connection: the scope it charges, its
// noise stream, and the way to its ledger.
type Conn struct {
	sc     *sqlite3.SQLiteConn
	handle unsafe.Pointer
	path   string

	mu    sync.Mutex
	scope string
	noise *release.Noise
}

var conns sync.Map // *sqlite3.SQLiteConn -> *Conn

// Lookup returns the dpsql state of a connection registered with [Register].
func Lookup(sc *sqlite3.SQLiteConn) (*Conn, bool) {
	c, ok := conns.Load(sc)
	if !ok {
		return nil, false
	}
	return c.(*Conn), true
}

// Scope returns the budget scope the connection charges.
func (c *Conn) Scope() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scope
}

// SetScope sets the budget scope the connection charges.
func (c *Conn) SetScope(s string) {
	c.mu.Lock()
	c.scope = s
	c.mu.Unlock()
}

// Noise returns the connection's secure noise stream. The connection is used by
// one goroutine at a time, and so is its stream.
func (c *Conn) Noise() *release.Noise { return c.noise }

// ledger returns the ledger of the connection's database file.
func (c *Conn) ledger() (*accountant.Ledger, error) {
	return accountant.OpenLedger(c.path)
}

// Charge commits a spend to the ledger before the caller may release anything:
// release, if not nil, runs inside the charge's transaction. It refuses to run
// inside a writing statement or an explicit transaction, where the charge could
// not commit first.
func (c *Conn) Charge(fn string, m accountant.Mechanism, details map[string]any, release func(tx *sql.Tx) (map[string]any, error)) (accountant.Receipt, error) {
	if err := c.canWriteLedger(fn); err != nil {
		return accountant.Receipt{}, err
	}
	l, err := c.ledger()
	if err != nil {
		return accountant.Receipt{}, fmt.Errorf("%s: %w", fn, err)
	}
	// A release's errors already name the function (they are the
	// mechanism's); the ledger's get the name here.
	var relErr error
	if release != nil {
		inner := release
		release = func(tx *sql.Tx) (map[string]any, error) {
			more, err := inner(tx)
			if err == nil && interrupted(c.handle) {
				err = fmt.Errorf("%s: the statement was interrupted; the release was rolled back and nothing was charged", fn)
			}
			relErr = err
			return more, err
		}
	}
	r, err := l.Charge(context.Background(), accountant.Charge{
		Scope: c.Scope(), Mechanism: m, Details: details, Query: runningSQL(c.handle),
	}, release)
	if err != nil && relErr == nil {
		err = fmt.Errorf("%s: %w", fn, err)
	}
	return r, err
}

// canWriteLedger refuses when the ledger connection could not commit before
// this connection's statement ends: inside BEGIN ... COMMIT, or in a statement
// that writes (it holds the database's write lock).
func (c *Conn) canWriteLedger(fn string) error {
	if !c.sc.AutoCommit() {
		return fmt.Errorf("%s: run DP functions outside BEGIN ... COMMIT: the charge must commit on its own connection before the noisy value is released, which an open transaction would prevent", fn)
	}
	if writing(c.handle) {
		return fmt.Errorf("%s: this statement writes (INSERT ... SELECT, CREATE TABLE ... AS, UPDATE); DP functions must run in a read-only statement so that their charge commits first: SELECT the noisy values, then store them in a second statement", fn)
	}
	return nil
}

// guard turns a panic into an error, so no panic crosses the SQL boundary.
func guard(fn string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: internal error (please report): %v\n%s", fn, r, debug.Stack())
	}
}
