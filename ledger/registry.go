package ledger

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger writes charges through its own connection to the database file, so a
// charge commits before the query that caused it has finished (see design.md,
// "Charge before release").
type Ledger struct {
	path string
	db   *sql.DB
	refs int // connections holding the ledger (RetainLedger)

	memoMu sync.Mutex
	memo   *fileState // the state at the last head this process saw (state.go)

	wal atomic.Bool // the file was found in WAL mode (wal.go): a file stays so
}

var (
	ledgersMu sync.Mutex
	ledgers          = map[string]*Ledger{}
	opener    Opener = DefaultOpener
)

// An Opener opens the connection pool a ledger writes through, to the
// database file at path. Its connections must behave as [LedgerDSN] asks of
// go-sqlite3: BeginTx starts BEGIN IMMEDIATE, a busy timeout waits for
// another connection's write lock (and its failure says "locked" or "busy"),
// foreign keys are enforced, the file is in WAL mode with synchronous FULL.
// OpenLedger then limits the pool to one connection.
type Opener func(path string) (*sql.DB, error)

// SetOpener sets how ledgers not yet open in this process are opened; nil
// restores [DefaultOpener]. The loadable extension dp0 sets one that opens
// the file through its host's SQLite.
func SetOpener(o Opener) {
	ledgersMu.Lock()
	defer ledgersMu.Unlock()
	if o == nil {
		o = DefaultOpener
	}
	opener = o
}

// LedgerDriver is the database/sql driver [DefaultOpener] uses: go-sqlite3's
// "sqlite3", which a Go program links by importing package ext (or
// github.com/mattn/go-sqlite3).
const LedgerDriver = "sqlite3"

// LedgerDSN returns the DSN of the ledger's connection to the file at path,
// in go-sqlite3's form (which internal/sqlite/hostsql reads too): BEGIN IMMEDIATE
// transactions, a 30 s busy timeout, synchronous FULL, foreign keys. It
// leaves the journal mode as the file has it (opening never converts a
// file); a charge switches the file to WAL mode first (wal.go).
func LedgerDSN(path string) string {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", "30000")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// DefaultOpener opens the ledger with the [LedgerDriver] driver and
// [LedgerDSN].
func DefaultOpener(path string) (*sql.DB, error) {
	if !slices.Contains(sql.Drivers(), LedgerDriver) {
		return nil, fmt.Errorf("the ledger needs the database/sql driver %q, which this program does not link: import github.com/dpsql/dpsql/ext (or github.com/mattn/go-sqlite3), or set a ledger.Opener", LedgerDriver)
	}
	return sql.Open(LedgerDriver, LedgerDSN(path))
}

// OpenLedger returns the process-wide ledger for the database file path; every
// caller for one file shares it, so charges within a process are serialised
// before SQLite's write lock serialises them across processes.
func OpenLedger(path string) (*Ledger, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, errors.New("DP functions need a database file: an in-memory database cannot hold a durable ledger")
	}
	ledgersMu.Lock()
	defer ledgersMu.Unlock()
	if l, ok := ledgers[path]; ok {
		return l, nil
	}
	l, err := newLedgerConn(path)
	if err != nil {
		return nil, err
	}
	ledgers[path] = l
	return l, nil
}

// newLedgerConn opens a ledger connection to path outside the registry (as
// another process would have it), through the opener.
func newLedgerConn(path string) (*Ledger, error) {
	db, err := opener(path)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(time.Minute)
	return &Ledger{path: path, db: db}, nil
}

// RetainLedger notes that a connection to the file at path may charge; pair it
// with ReleaseLedger when the connection closes.
func RetainLedger(path string) error {
	l, err := OpenLedger(path)
	if err != nil {
		return err
	}
	ledgersMu.Lock()
	l.refs++
	ledgersMu.Unlock()
	return nil
}

// ReleaseLedger undoes RetainLedger. When the last connection to a file lets
// go, the ledger connection closes too, so that the application's last
// connection can checkpoint the WAL and remove it, as SQLite does when a
// database is closed.
func ReleaseLedger(path string) error {
	ledgersMu.Lock()
	defer ledgersMu.Unlock()
	l, ok := ledgers[path]
	if !ok {
		return nil
	}
	if l.refs--; l.refs > 0 {
		return nil
	}
	delete(ledgers, path)
	return l.db.Close()
}
