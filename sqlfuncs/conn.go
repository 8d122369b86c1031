package sqlfuncs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Conn is dpsql's state for one SQLite connection: the scope it charges, its
// noise stream, and the way to its ledger.
type Conn struct {
	db   sqlite.Conn // the connection, reached through the process's API table
	path string
	runs sqlite.RunCounter // statement runs started on the connection

	mu    sync.Mutex
	scope string
	// confined: the connection sees its own scope only (an analyst
	// connection of protected mode, see ConfineScope).
	confined bool
	noise    *release.Noise

	// The charges committed during the statement execution exec, so that a
	// later error in the same statement can say that they stand.
	exec    sqlite.Execution
	failed  failure // the last refused charge (LastError)
	charged []committed

	// Calibrations made since the last charge, to be cached in the file by
	// the next one (calibration.go).
	calibrations map[string]float64
}

// committed is one charge a statement has committed.
type committed struct {
	fn string
	id int64
	mu float64
}

var conns sync.Map // uintptr(sqlite3*) -> *Conn

// Lookup returns the dpsql state of the connection db (a sqlite3*)
// registered with [Register].
func Lookup(db unsafe.Pointer) (*Conn, bool) {
	c, ok := conns.Load(uintptr(db))
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

// ConfineScope makes the connection see its own scope only: the functions
// that take a scope (dp_budget_remaining, dp_epsilon) refuse any other. An
// analyst connection of protected mode is confined (package ext).
func (c *Conn) ConfineScope() {
	c.mu.Lock()
	c.confined = true
	c.mu.Unlock()
}

// otherScope refuses, on a confined connection, a scope other than its own.
func (c *Conn) otherScope(fn, scope string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.confined && scope != c.scope {
		return fmt.Errorf("%s: %s (%q), not %q: call %s without a scope", fn, accountant.OwnScopeOnly, c.scope, scope, fn)
	}
	return nil
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
func (c *Conn) ledger() (*ledger.Ledger, error) {
	return ledger.OpenLedger(c.path)
}

// Charge commits a spend to the ledger before the caller may release anything:
// release, if not nil, runs inside the charge's transaction. It refuses to run
// inside a writing statement or an explicit transaction, where the charge could
// not commit first.
func (c *Conn) Charge(fn string, m mechanism.Mechanism, details any, release func(tx *sql.Tx) (map[string]any, error)) (ledger.Receipt, error) {
	return c.charge(fn, ledger.Charge{Mechanism: m, Details: details}, release)
}

// ChargeQuote is Charge of exactly the quote q (ledger.Charge with Quote set): its
// mechanism and record, refused unless q was priced at the scope's delta.
func (c *Conn) ChargeQuote(fn string, q mechanism.Quote, release func(tx *sql.Tx) (map[string]any, error)) (ledger.Receipt, error) {
	return c.charge(fn, ledger.Charge{Quote: &q}, release)
}

// charge runs ac, completed with the connection's scope and the running
// statement's SQL text.
func (c *Conn) charge(fn string, ac ledger.Charge, release func(tx *sql.Tx) (map[string]any, error)) (ledger.Receipt, error) {
	if err := c.canWriteLedger(fn); err != nil {
		return ledger.Receipt{}, err
	}
	if c.db.Interrupted() {
		return ledger.Receipt{}, fmt.Errorf("%s: the statement was interrupted; nothing was released or charged", fn)
	}
	l, err := c.ledger()
	if err != nil {
		return ledger.Receipt{}, named(fn, err)
	}
	// A release's errors already name the function (they are the
	// mechanism's); the ledger's get the name here.
	var relErr error
	if release != nil {
		inner := release
		release = func(tx *sql.Tx) (map[string]any, error) {
			// The release's writes (batchInsert) look for an interrupt
			// of this connection's statement as they go.
			releasing.Store(tx, &releaseWrite{c: c})
			defer releasing.Delete(tx)
			more, err := inner(tx)
			if err == nil && c.db.Interrupted() {
				err = fmt.Errorf("%s: the statement was interrupted; the release was rolled back and nothing was charged", fn)
			}
			relErr = err
			return more, err
		}
	}
	release, cached := c.withCalibrations(release)
	exec := c.db.RunningExecution(c.runs)
	charging.Add(1)
	defer charging.Add(-1)
	ctx, stop := c.untilInterrupted()
	defer stop()
	ac.Scope, ac.Query = c.Scope(), exec.SQL
	r, err := l.Charge(ctx, ac, release)
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, errWriteInterrupted)):
		// The interrupt cancelled the charge's transaction (waiting for the
		// lock, or while a release was being written): it rolled back.
		err = fmt.Errorf("%s: the statement was interrupted; the release was rolled back and nothing was charged", fn)
	case err != nil && relErr == nil:
		err = named(fn, err)
	}
	if err != nil {
		c.rememberFailure(exec, err)
	}
	if err == nil {
		cached()
		c.mu.Lock()
		if exec != c.exec {
			c.exec, c.charged = exec, nil
		}
		c.charged = append(c.charged, committed{fn: fn, id: r.ID, mu: r.Mu})
		c.mu.Unlock()
	}
	return r, err
}

// failure is the typed error of the last charge the connection refused, and
// the statement run it happened in.
type failure struct {
	seq uint64 // the connection's run count then (sqlite.Execution.Seq)
	err error
}

// rememberFailure keeps err, a failed charge's error, for LastError: SQLite
// passes only its message on to the statement's caller.
func (c *Conn) rememberFailure(exec sqlite.Execution, err error) {
	if exec == (sqlite.Execution{}) || exec.Seq == 0 || accountant.CodeOf(err) == "" {
		return
	}
	c.mu.Lock()
	c.failed = failure{seq: exec.Seq, err: err}
	c.mu.Unlock()
}

// LastError returns the typed error of a charge refused during the last
// statement run on the connection (nil if none was, or a statement ran
// since). The statement's own error, which crossed SQLite, holds only its
// message: read the code from this one (accountant.CodeOf, errors.As).
func (c *Conn) LastError() error {
	c.mu.Lock()
	f := c.failed
	c.mu.Unlock()
	if f.err == nil || f.seq != c.runs.Value() {
		return nil
	}
	return f.err
}

// LastError is [Conn.LastError] of the connection db ([Register]); nil when
// db has no dpsql state.
func LastError(db unsafe.Pointer) error {
	c, ok := Lookup(db)
	if !ok {
		return nil
	}
	return c.LastError()
}

// interruptPoll is how often a charge in progress looks for an interrupt of
// its statement (Ctrl-C, a cancelled context).
const interruptPoll = 10 * time.Millisecond

// untilInterrupted returns a context that is cancelled when the connection's
// running statement is interrupted, so that a charge waiting for the write
// lock, or a release being written, stops at once (its transaction rolls
// back). stop ends the watch. The watch runs in its own goroutine, which
// SQLite before 3.41 cannot answer (Conn.InterruptedFromAnywhere): there the charge
// waits out the lock, and the checks the statement's own goroutine makes
// before and after the release still roll it back.
//
// stop returns only once the watch has ended: the connection may close as
// soon as the function that charged returns, and the watch must not touch
// its handle after that.
func (c *Conn) untilInterrupted() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done, exited := make(chan struct{}), make(chan struct{})
	watches.Add(1)
	go func() {
		defer close(exited)
		defer watches.Add(-1)
		t := time.NewTicker(interruptPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if c.db.InterruptedFromAnywhere() {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); <-exited; cancel() }
}

// watches counts the watches of untilInterrupted still running; tests read it.
var watches atomic.Int64

// interruptible runs f, a pure computation, in its own goroutine and returns
// its result, or an error as soon as the connection's statement is
// interrupted; f then finishes unobserved and its result is dropped. f must
// not touch state shared with the connection (such as its noise stream).
func interruptible[T any](c *Conn, fn string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() { ch <- r }()
		defer guard(fn, &r.err)
		r.v, r.err = f()
	}()
	t := time.NewTicker(interruptPoll)
	defer t.Stop()
	for {
		select {
		case r := <-ch:
			return r.v, r.err
		case <-t.C:
			if c.db.Interrupted() {
				var zero T
				return zero, errors.New("the statement was interrupted; nothing was released or charged")
			}
		}
	}
}

// releasing maps the transaction of each release being written to its
// releaseWrite (*sql.Tx -> *releaseWrite).
var releasing sync.Map

// releaseWrite is a release being written in a charge's transaction, for its
// writes' checks of their statement's interrupt (writeInterrupted).
type releaseWrite struct {
	c *Conn // the connection whose statement runs the release
	// offStatement is set while the writes run on goroutines other than the
	// statement's (see writeOffStatement); seen is then set when the
	// statement's goroutine finds the statement interrupted.
	offStatement, seen atomic.Bool
}

// errWriteInterrupted is the error of a release's write that found its
// statement interrupted.
var errWriteInterrupted = errors.New("the statement was interrupted; the release was rolled back and nothing was charged")

// writeInterrupted reports whether the statement writing a release in tx is
// being interrupted. On the statement's goroutine (the release's writes are
// made from the function call) any SQLite can tell; on another one (see
// writeOffStatement) only SQLite 3.41 and later can, and before, the
// statement's goroutine tells the writes.
func writeInterrupted(tx *sql.Tx) bool {
	v, ok := releasing.Load(tx)
	if !ok {
		return false
	}
	w := v.(*releaseWrite)
	if w.offStatement.Load() {
		return w.seen.Load() || w.c.db.InterruptedFromAnywhere()
	}
	return w.c.db.Interrupted()
}

// writeOffStatement runs write, which writes the release of tx from
// goroutines other than the statement's (dp_avgmix's workers write their own
// batches), and returns its error; a panic in write is re-raised here.
//
// Those goroutines can ask SQLite 3.41 and later whether the statement is
// being interrupted (sqlite3_is_interrupted). An older SQLite (Debian 12's
// 3.40, for the libsqlite3 build and the dp0 extension) tells only the
// statement's own thread, through a probe statement on its connection; run
// from another thread, the probe waits for the connection's mutex, which the
// statement blocked in this goroutine holds: the release hung at its first
// check. There write runs in a goroutine of its own, and this one, the
// statement's, looks for an interrupt every interruptPoll and passes it on
// to the writes.
func writeOffStatement(tx *sql.Tx, write func() error) error {
	v, ok := releasing.Load(tx)
	if !ok {
		return write()
	}
	w := v.(*releaseWrite)
	w.offStatement.Store(true)
	defer w.offStatement.Store(false)
	if sqlite.CanPollInterrupts() {
		return write()
	}
	type result struct {
		err      error
		pv       any
		panicked bool
	}
	ch := make(chan result, 1)
	go func() {
		r := result{panicked: true}
		defer func() {
			if r.panicked {
				r.pv = recover()
			}
			ch <- r
		}()
		r.err = write()
		r.panicked = false
	}()
	t := time.NewTicker(interruptPoll)
	defer t.Stop()
	for {
		select {
		case r := <-ch:
			if r.panicked {
				panic(r.pv)
			}
			return r.err
		case <-t.C:
			if !w.seen.Load() && w.c.db.Interrupted() {
				w.seen.Store(true)
			}
		}
	}
}

// charging counts the charges in progress in this process.
var charging atomic.Int64

// Charging reports whether a charge is in progress in this process: waiting
// for the database's write lock, checking the budget or writing a release.
// The dpsql command uses it to explain a wait for another process's lock.
func Charging() bool { return charging.Load() > 0 }

// annotate adds to err, an error of a function call about to fail its
// statement, the charges that earlier calls of the same statement execution
// committed: they stand although the statement fails.
func (c *Conn) annotate(err error) error {
	if err == nil {
		return nil
	}
	exec := c.db.RunningExecution(c.runs)
	c.mu.Lock()
	var charged []committed
	if exec != (sqlite.Execution{}) && exec == c.exec {
		charged = c.charged
	}
	c.mu.Unlock()
	if len(charged) == 0 {
		return err
	}
	return &fnError{msg: err.Error() + "; " + chargesNote(charged), err: err}
}

// chargesNote describes charges that stand: "this statement had already
// committed 1 charge, which stands: ledger row 7 (dp_gaussian, mu = 0.1)".
func chargesNote(cs []committed) string {
	var b strings.Builder
	n := "1 charge, which stands"
	if len(cs) > 1 {
		n = fmt.Sprintf("%d charges, which stand", len(cs))
	}
	fmt.Fprintf(&b, "this statement had already committed %s: ledger row", n)
	if len(cs) > 1 {
		b.WriteString("s")
	}
	for i, ch := range cs {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(cs)-i)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d (%s, mu = %s)", ch.id, ch.fn, strconv.FormatFloat(ch.mu, 'g', 6, 64))
	}
	return b.String()
}

// canWriteLedger refuses when the ledger connection could not commit before
// this connection's statement ends: inside BEGIN ... COMMIT, or in a statement
// that writes (it holds the database's write lock).
func (c *Conn) canWriteLedger(fn string) error {
	if !c.db.Autocommit() {
		return fmt.Errorf("%s: run DP functions outside BEGIN ... COMMIT: the charge must commit on its own connection before the noisy value is released, which an open transaction would prevent", fn)
	}
	if c.db.Writing() {
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
