// Package linked gives the extension API table (a const
// sqlite3_api_routines*) of the SQLite that go-sqlite3 links into a Go
// program, captured by package sqlite's automatic extension: ext.SQLiteAPI
// returns it, and tests of code that calls SQLite only through such a table
// (package hostsql, the ledger over it) use it directly where ext cannot be
// imported (ext imports them). It is the one package of internal/sqlite that
// depends on go-sqlite3, which the loadable extension dp0 must never link.
package linked

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
	sqlite3 "github.com/mattn/go-sqlite3"
)

var (
	once sync.Once
	api  unsafe.Pointer
	err  error
)

// API returns the API table of the SQLite go-sqlite3 links.
func API() (unsafe.Pointer, error) {
	once.Do(func() {
		if err = sqlite.RegisterCapture(); err != nil {
			err = fmt.Errorf("linked: %w", err)
			return
		}
		// The automatic extension runs on the next connection opened.
		c, e := (&sqlite3.SQLiteDriver{}).Open(":memory:")
		if e != nil {
			err = fmt.Errorf("linked: opening SQLite to find its API table: %w", e)
			return
		}
		c.Close()
		if api = sqlite.CapturedAPI(); api == nil {
			err = errors.New("linked: SQLite did not run the automatic extension")
		}
	})
	return api, err
}
