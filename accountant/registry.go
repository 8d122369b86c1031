package accountant

import (
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // the ledger connection uses the plain "sqlite3" driver
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
}

var (
	ledgersMu sync.Mutex
	ledgers   = map[string]*Ledger{}
)

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
// another process would have it).
func newLedgerConn(path string) (*Ledger, error) {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", "30000")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
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
