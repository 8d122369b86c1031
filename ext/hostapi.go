package ext

import (
	"database/sql"
	"strings"
	"sync"
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/internal/sqlite/linked"
	"github.com/dpsql/dpsql/ledger"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// registerErr is the error of registering the automatic extension that hands
// package sqlite each connection's table and handle, reported by every open.
var registerErr error

func init() { registerErr = sqlite.RegisterCapture() }

// SQLiteAPI returns the extension API table (a const sqlite3_api_routines*)
// of the SQLite this program links through go-sqlite3, for packages that call
// SQLite through the table (the same table a loadable extension gets from its
// host).
func SQLiteAPI() (unsafe.Pointer, error) {
	if registerErr != nil {
		return nil, registerErr
	}
	return linked.API()
}

// hostHandle is a connection's SQLite handle and the API table to call it
// through.
type hostHandle struct{ api, db unsafe.Pointer }

// handles maps each open connection of the driver to its hostHandle.
var handles sync.Map // *sqlite3.SQLiteConn -> hostHandle

// handleOf returns the API table and the sqlite3* handle of a go-sqlite3
// connection opened after this package's init (package sqlite's HandleOf:
// a second call fails).
func handleOf(sc *sqlite3.SQLiteConn) (api, db unsafe.Pointer, err error) {
	if registerErr != nil {
		return nil, nil, registerErr
	}
	return sqlite.HandleOf(sc)
}

// handleFilename is the main database file of db, read through the API table
// (the tests check handleOf with it).
func handleFilename(db unsafe.Pointer) string {
	return sqlite.NewConn(sqlite.CapturedAPI(), db).Filename()
}

// libVersion is the version number of the SQLite behind the captured API
// table.
func libVersion() int {
	if api := sqlite.CapturedAPI(); api != nil {
		return sqlite.TableVersion(api)
	}
	return 0
}

func init() { ledger.SetOpener(openLedger) }

// ledgers holds the ledger connection pools openLedger opened, by file
// (path -> *sql.DB), for checkpointBeforeClose; a pool the ledger has closed
// since fails its Exec and is dropped.
var ledgers sync.Map

// openLedger opens a ledger's connection as ledger.DefaultOpener does, with
// go-sqlite3 and ledger.LedgerDSN (synchronous FULL), through package
// sqlite's batch VFS, which gathers the connection's appends to the -wal
// file (a release's rows) into large writes and reads the -wal file ahead
// at a checkpoint; through the default VFS if it cannot be registered.
func openLedger(path string) (*sql.DB, error) {
	if registerBatchVFS() != nil {
		return ledger.DefaultOpener(path)
	}
	db, err := sql.Open(ledger.LedgerDriver, ledger.LedgerDSN(path)+"&vfs="+sqlite.BatchVFS)
	if err == nil {
		ledgers.Store(path, db)
	}
	return db, err
}

// withBatchVFS adds vfs=dpsql_batch to a DSN of a database file that names
// no VFS of its own, when package sqlite's batch VFS registers: the
// connection then reads ahead through a table whose pages lie in order, and
// the -wal file through a checkpoint (in a file of 4 KiB pages, one read a
// page each without it). The VFS passes every other operation on to the
// default one.
func withBatchVFS(dsn string) string {
	if strings.Contains(dsn, "vfs=") || strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "mode=memory") || dsn == "" {
		return dsn
	}
	if registerBatchVFS() != nil {
		return dsn
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&vfs=" + sqlite.BatchVFS
	}
	return dsn + "?vfs=" + sqlite.BatchVFS
}

// registerBatchVFS hands package sqlite the API table of the SQLite
// go-sqlite3 links and registers the batch VFS over its default VFS.
func registerBatchVFS() error {
	api, err := SQLiteAPI()
	if err == nil {
		err = sqlite.SetAPI(api)
	}
	if err == nil {
		err = sqlite.RegisterBatchVFS()
	}
	return err
}

// ledgerDB is the open ledger pool of the file at path that openLedger
// opened, or nil.
func ledgerDB(path string) *sql.DB {
	if v, ok := ledgers.Load(path); ok {
		return v.(*sql.DB)
	}
	return nil
}

// checkpointThrough runs a passive checkpoint through db, the ledger pool
// of the file at path; a closed pool is forgotten.
func checkpointThrough(path string, db *sql.DB) error {
	_, err := db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	if err != nil && strings.Contains(err.Error(), "database is closed") {
		ledgers.CompareAndDelete(path, db)
	}
	return err
}
