package ext

/*
#cgo CFLAGS: -I${SRCDIR}/../internal/sqliteh -I${SRCDIR}/../third_party/sqlite
#cgo linux LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#cgo darwin LDFLAGS: -Wl,-undefined,dynamic_lookup
#include <stdint.h>
#define DPSQL_API dpsql_ext_api
#include "dpsqlapi.h"
DPSQL_API_DEFINE;

int dpsql_ext_register(void);
static sqlite3_int64 dpsql_ext_nonce;

static void dpsql_ext_set_nonce(sqlite3_int64 n) { dpsql_ext_nonce = n; }

// dpsql_handle(nonce) returns the connection's sqlite3* to the Go code that
// knows the process's random nonce, once, right after the open (handleOf
// drops it); SQL cannot call it usefully, and DIRECTONLY keeps it out of
// triggers and views.
static void dpsql_handle_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
	if (argc != 1 || sqlite3_value_type(argv[0]) != SQLITE_INTEGER || sqlite3_value_int64(argv[0]) != dpsql_ext_nonce) {
		sqlite3_result_error(ctx, "dpsql_handle: internal to dpsql", -1);
		return;
	}
	sqlite3_result_int64(ctx, (sqlite3_int64)(intptr_t)sqlite3_user_data(ctx));
}

// dpsql_ext_capture is the automatic extension: SQLite calls it on every new
// connection of the process with its API table.
int dpsql_ext_capture(sqlite3 *db, char **err, const void *p) {
	const sqlite3_api_routines *api = p;
	__atomic_store_n(&dpsql_ext_api, api, __ATOMIC_RELEASE);
	return api->create_function_v2(db, "dpsql_handle", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, db, dpsql_handle_fn, 0, 0, 0);
}

static const void *dpsql_ext_table(void) { return __atomic_load_n(&dpsql_ext_api, __ATOMIC_ACQUIRE); }

static int dpsql_ext_forget(void *db) {
	return dpsql_ext_api->create_function_v2((sqlite3*)db, "dpsql_handle", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, 0, 0, 0, 0, 0);
}

static const char *dpsql_ext_filename(void *db) { return dpsql_ext_api->db_filename((sqlite3*)db, "main"); }
static void *dpsql_ext_pointer(sqlite3_int64 h) { return (void*)(intptr_t)h; }
static int dpsql_ext_libversion(void) { return dpsql_ext_api->libversion_number(); }
*/
import "C"

import (
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/dpsql/dpsql/internal/linkedsqlite"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// nonce is the random argument dpsql_handle requires.
var nonce int64

// registerErr is the error of registering the automatic extension, reported by
// every open.
var registerErr error

func init() {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		registerErr = fmt.Errorf("dpsql: no randomness for the handle nonce: %w", err)
		return
	}
	nonce = int64(binary.LittleEndian.Uint64(b[:]) | 1)
	C.dpsql_ext_set_nonce(C.sqlite3_int64(nonce))
	if rc := C.dpsql_ext_register(); rc != 0 {
		registerErr = fmt.Errorf("dpsql: sqlite3_auto_extension failed with code %d", int(rc))
	}
}

// SQLiteAPI returns the extension API table (a const sqlite3_api_routines*)
// of the SQLite this program links through go-sqlite3, for packages that call
// SQLite through the table (the same table a loadable extension gets from its
// host).
func SQLiteAPI() (unsafe.Pointer, error) {
	if registerErr != nil {
		return nil, registerErr
	}
	return linkedsqlite.API()
}

// hostHandle is a connection's SQLite handle and the API table to call it
// through.
type hostHandle struct{ api, db unsafe.Pointer }

// handles maps each open connection of the driver to its hostHandle.
var handles sync.Map // *sqlite3.SQLiteConn -> hostHandle

// handleOf returns the API table and the sqlite3* handle of a go-sqlite3
// connection opened after this package's init, read through dpsql_handle,
// which it then drops from the connection.
func handleOf(sc *sqlite3.SQLiteConn) (api, db unsafe.Pointer, err error) {
	if registerErr != nil {
		return nil, nil, registerErr
	}
	rows, err := sc.Query("SELECT dpsql_handle(?)", []driver.Value{nonce})
	if err != nil {
		return nil, nil, fmt.Errorf("dpsql: reading the connection's SQLite handle: %w", err)
	}
	v := make([]driver.Value, 1)
	err = rows.Next(v)
	rows.Close()
	if err == io.EOF {
		err = sql.ErrNoRows
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dpsql: reading the connection's SQLite handle: %w", err)
	}
	h, ok := v[0].(int64)
	if !ok || h == 0 {
		return nil, nil, fmt.Errorf("dpsql: the connection's SQLite handle read as %v", v[0])
	}
	db = C.dpsql_ext_pointer(C.sqlite3_int64(h))
	if rc := C.dpsql_ext_forget(db); rc != 0 {
		return nil, nil, fmt.Errorf("dpsql: dropping dpsql_handle: code %d", int(rc))
	}
	return unsafe.Pointer(C.dpsql_ext_table()), db, nil
}

// handleFilename is the main database file of db, read through the API table
// (the tests check handleOf with it).
func handleFilename(db unsafe.Pointer) string { return C.GoString(C.dpsql_ext_filename(db)) }

// libVersion is the version number of the SQLite behind the API table.
func libVersion() int { return int(C.dpsql_ext_libversion()) }
