package ext

import (
	"sync"
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/internal/sqlite/linked"
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
