// Command dp0 is dpsql as a SQLite loadable extension, for every SQLite host
// that loads extensions: the sqlite3 shell, Python's sqlite3, DB Browser.
// Build it with
//
//	go build -buildmode=c-shared -o dp0.so ./cmd/dp0
//
// and load it with .load ./dp0 (SQLite calls its entry point
// sqlite3_dp_init). It registers dpsql's functions (package sqlfuncs) on the
// host's connection, in curator mode: the analyst holds the file, and
// protected mode, which needs a process the analyst does not control, is not
// part of it. Every call into SQLite goes through the host's API table, and
// the ledger's own connection (package ledger, over internal/sqlite/hostsql)
// opens the same file through the host's SQLite and VFS: two copies of
// SQLite in one process would break each other's POSIX locks. Charging needs
// the file in WAL mode; otherwise a charge is refused with the pragma that
// switches it.
//
// The main function is never run: a c-shared library starts the Go runtime
// when the host loads it.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../internal/sqlite -I${SRCDIR}/../../third_party/sqlite
#include <stdlib.h>
*/
import "C"

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/internal/sqlite/hostsql"
	"github.com/dpsql/dpsql/sqlfuncs"
)

func main() {}

var (
	mu    sync.Mutex
	api   unsafe.Pointer              // the host's API table (one per process)
	vfss  map[string]string           // database file -> the VFS its host connection opened it through
	conns = map[unsafe.Pointer]bool{} // host connections dpsql is registered on
)

// dp0Init registers dpsql on the host connection db; it returns NULL or an
// error message the caller frees, and sets *again when db already has dpsql.
//
//export dp0Init
func dp0Init(db, table unsafe.Pointer, again *C.int) *C.char {
	mu.Lock()
	loaded := conns[db]
	mu.Unlock()
	if loaded {
		*again = 1
		return nil
	}
	if err := register(db, table); err != nil {
		return C.CString(err.Error())
	}
	mu.Lock()
	conns[db] = true
	mu.Unlock()
	return nil
}

func register(db, table unsafe.Pointer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dp0: internal error loading (please report): %v", r)
		}
	}()
	mu.Lock()
	if api == nil {
		api, vfss = table, map[string]string{}
		ledger.SetOpener(openLedger)
	} else if api != table {
		mu.Unlock()
		return errors.New("dp0: this process has two SQLite libraries loading dp0; one Go runtime can serve only one")
	}
	if path := hostsql.Filename(table, db); path != "" {
		vfs, err := hostsql.VFSName(table, db)
		if err != nil {
			mu.Unlock()
			return fmt.Errorf("dp0: %w", err)
		}
		if _, ok := vfss[path]; !ok {
			vfss[path] = vfs
		}
	}
	mu.Unlock()
	if _, err := sqlfuncs.Register(table, db, ""); err != nil {
		return fmt.Errorf("dp0: %w", err)
	}
	return nil
}

// dp0Forget drops dpsql's state of a connection that is closing.
//
//export dp0Forget
func dp0Forget(db unsafe.Pointer) {
	defer func() { recover() }() // nothing may unwind into the host
	mu.Lock()
	delete(conns, db)
	mu.Unlock()
	sqlfuncs.Forget(db)
}

// openLedger opens a ledger's connection through the host's SQLite and the
// VFS the host opened the file through, refusing (at its first use) a file
// that is not in WAL mode instead of converting it under the host.
func openLedger(path string) (*sql.DB, error) {
	cfg, err := hostsql.ParseDSN(ledger.LedgerDSN(path))
	if err != nil {
		return nil, err
	}
	mu.Lock()
	cfg.API, cfg.VFS = api, vfss[path]
	mu.Unlock()
	cfg.JournalMode, cfg.RequireWAL = "", true
	c, err := hostsql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(walConnector{c}), nil
}
