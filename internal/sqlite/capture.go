package sqlite

/*
#include <stdint.h>
#define DPSQL_API dpsql_api
#include "dpsqlapi.h"

int dpsql_register_capture(void);

static const sqlite3_api_routines *dpsql_captured;
static sqlite3_int64 dpsql_nonce;

static void dpsql_set_nonce(sqlite3_int64 n) { dpsql_nonce = n; }

// dpsql_handle(nonce) returns the connection's sqlite3* to the Go code that
// knows the process's random nonce, once, right after the open (HandleOf
// drops it); SQL cannot call it usefully, and DIRECTONLY keeps it out of
// triggers and views. It calls SQLite through the table it was registered
// with.
static void dpsql_handle_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
	const sqlite3_api_routines *a = __atomic_load_n(&dpsql_captured, __ATOMIC_ACQUIRE);
	if (argc != 1 || a->value_type(argv[0]) != SQLITE_INTEGER || a->value_int64(argv[0]) != dpsql_nonce) {
		a->result_error(ctx, "dpsql_handle: internal to dpsql", -1);
		return;
	}
	a->result_int64(ctx, (sqlite3_int64)(intptr_t)a->user_data(ctx));
}

// dpsql_capture is the automatic extension: SQLite calls it on every new
// connection of the process with its API table.
int dpsql_capture(sqlite3 *db, char **err, const void *p) {
	const sqlite3_api_routines *api = p;
	__atomic_store_n(&dpsql_captured, api, __ATOMIC_RELEASE);
	return api->create_function_v2(db, "dpsql_handle", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, db, dpsql_handle_fn, 0, 0, 0);
}

static const void *dpsql_captured_table(void) { return __atomic_load_n(&dpsql_captured, __ATOMIC_ACQUIRE); }

static int dpsql_forget_handle(void *db) {
	const sqlite3_api_routines *a = __atomic_load_n(&dpsql_captured, __ATOMIC_ACQUIRE);
	return a->create_function_v2((sqlite3*)db, "dpsql_handle", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, 0, 0, 0, 0, 0);
}

static void *dpsql_pointer(sqlite3_int64 h) { return (void*)(intptr_t)h; }
*/
import "C"

import (
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"
)

// How a Go program's SQLite hands its table over: go-sqlite3 links SQLite
// into the program and never shows its sqlite3* handles, so an automatic
// extension (sqlite3_auto_extension) receives the table on every new
// connection and adds to it dpsql_handle(nonce), which returns the
// connection's handle to the code that knows the process's random nonce,
// once ([HandleOf]).

var (
	captureOnce sync.Once
	captureErr  error
	nonce       int64
)

// RegisterCapture registers the automatic extension that captures the table
// of the SQLite the program links, on every connection opened afterwards;
// calling it again does nothing. It fails in a program that links no SQLite
// (the loadable extension, whose host hands its table over instead).
func RegisterCapture() error {
	captureOnce.Do(func() {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			captureErr = fmt.Errorf("dpsql: no randomness for the handle nonce: %w", err)
			return
		}
		nonce = int64(binary.LittleEndian.Uint64(b[:]) | 1)
		C.dpsql_set_nonce(C.sqlite3_int64(nonce))
		switch rc := C.dpsql_register_capture(); rc {
		case 0:
		case -1:
			captureErr = errors.New("dpsql: this program links no SQLite to capture")
		default:
			captureErr = fmt.Errorf("dpsql: sqlite3_auto_extension failed with code %d", int(rc))
		}
	})
	return captureErr
}

// CapturedAPI returns the table the automatic extension last received (nil
// before a connection was opened after [RegisterCapture]).
func CapturedAPI() unsafe.Pointer { return unsafe.Pointer(C.dpsql_captured_table()) }

// Queryer is a driver connection that runs a query, such as go-sqlite3's
// *SQLiteConn.
type Queryer interface {
	Query(query string, args []driver.Value) (driver.Rows, error)
}

// HandleOf returns the API table and the sqlite3* handle of a connection
// opened after [RegisterCapture], read through dpsql_handle, which it then
// drops from the connection: a second call fails.
func HandleOf(q Queryer) (api, db unsafe.Pointer, err error) {
	if err := RegisterCapture(); err != nil {
		return nil, nil, err
	}
	rows, err := q.Query("SELECT dpsql_handle(?)", []driver.Value{nonce})
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
	db = C.dpsql_pointer(C.sqlite3_int64(h))
	if rc := C.dpsql_forget_handle(db); rc != 0 {
		return nil, nil, fmt.Errorf("dpsql: dropping dpsql_handle: code %d", int(rc))
	}
	return CapturedAPI(), db, nil
}
