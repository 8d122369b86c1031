// Package linkedsqlite gives the extension API table (a const
// sqlite3_api_routines*) of the SQLite that go-sqlite3 links into a Go
// program, captured by an automatic extension: ext.SQLiteAPI returns it, and
// tests of code that calls SQLite only through such a table (internal/hostsql,
// the accountant's ledger over it) use it directly where ext cannot be
// imported (ext imports them). ext's own tests check it is the table SQLite
// hands each new connection.
package linkedsqlite

/*
#cgo CFLAGS: -I${SRCDIR}/../../third_party/sqlite
#cgo linux LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#cgo darwin LDFLAGS: -Wl,-undefined,dynamic_lookup
int dpsql_linked_register(void);
const void *dpsql_linked_table(void);
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

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
		if rc := C.dpsql_linked_register(); rc != 0 {
			err = fmt.Errorf("linkedsqlite: sqlite3_auto_extension failed with code %d", int(rc))
			return
		}
		// The automatic extension runs on the next connection opened.
		c, e := (&sqlite3.SQLiteDriver{}).Open(":memory:")
		if e != nil {
			err = fmt.Errorf("linkedsqlite: opening SQLite to find its API table: %w", e)
			return
		}
		c.Close()
		if api = unsafe.Pointer(C.dpsql_linked_table()); api == nil {
			err = errors.New("linkedsqlite: SQLite did not run the automatic extension")
		}
	})
	return api, err
}
