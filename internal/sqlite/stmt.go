package sqlite

/*
#include <stdlib.h>
#define DPSQL_API dpsql_api
#include "dpsqlapi.h"
#include "func.h"

typedef const sqlite3_api_routines api_t;

static int dpsql_prepare(api_t *a, sqlite3 *db, const char *sql, int n, sqlite3_stmt **st, int *tail) {
	const char *t = 0;
	int rc = a->prepare_v2(db, sql, n, st, &t);
	*tail = t ? (int)(t - sql) : n;
	return rc;
}
static int dpsql_finalize(api_t *a, sqlite3_stmt *s) { return a->finalize(s); }
static int dpsql_reset(api_t *a, sqlite3_stmt *s) { return a->reset(s); }
static int dpsql_step(api_t *a, sqlite3_stmt *s) { return a->step(s); }
static int dpsql_clear_bindings(api_t *a, sqlite3_stmt *s) { return a->clear_bindings(s); }
static int dpsql_bind_index(api_t *a, sqlite3_stmt *s, const char *name) { return a->bind_parameter_index(s, name); }
static int dpsql_bind_count(api_t *a, sqlite3_stmt *s) { return a->bind_parameter_count(s); }
static int dpsql_column_count(api_t *a, sqlite3_stmt *s) { return a->column_count(s); }
static const char *dpsql_column_name(api_t *a, sqlite3_stmt *s, int i) { return a->column_name(s, i); }
static const char *dpsql_column_decltype(api_t *a, sqlite3_stmt *s, int i) { return a->column_decltype(s, i); }

// dpsql_bind binds one value; p points into Go memory for the call only
// (SQLITE_TRANSIENT: SQLite copies it). An empty BLOB is a zero-length one,
// never NULL.
static int dpsql_bind(api_t *a, sqlite3_stmt *s, int i, int type, sqlite3_int64 n, double f, const void *p) {
	switch (type) {
	case SQLITE_INTEGER: return a->bind_int64(s, i, n);
	case SQLITE_FLOAT: return a->bind_double(s, i, f);
	case SQLITE_TEXT: return a->bind_text64(s, i, n ? p : "", (sqlite3_uint64)n, SQLITE_TRANSIENT, SQLITE_UTF8);
	case SQLITE_BLOB:
		if (n == 0) return a->bind_zeroblob(s, i, 0);
		return a->bind_blob64(s, i, p, (sqlite3_uint64)n, SQLITE_TRANSIENT);
	}
	return a->bind_null(s, i);
}

// dpsql_row reads the first n columns of the current row into v, in one
// call: TEXT and BLOB point into SQLite's memory until the next step.
static void dpsql_row(api_t *a, sqlite3_stmt *s, int n, dpsql_arg *v) {
	for (int i = 0; i < n; i++) {
		v[i].type = a->column_type(s, i);
		v[i].p = 0; v[i].n = 0; v[i].i = 0; v[i].f = 0;
		switch (v[i].type) {
		case SQLITE_INTEGER: v[i].i = a->column_int64(s, i); break;
		case SQLITE_FLOAT: v[i].f = a->column_double(s, i); break;
		// The pointer first, then its length (SQLite's documented order).
		case SQLITE_TEXT: v[i].p = a->column_text(s, i); v[i].n = a->column_bytes(s, i); break;
		case SQLITE_BLOB: v[i].p = a->column_blob(s, i); v[i].n = a->column_bytes(s, i); break;
		}
	}
}
*/
import "C"

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// Stmt is a prepared statement of a [Conn]: one for every use, the driver's
// statements and the queries functions nest in a running statement.
type Stmt struct {
	c    Conn
	s    *C.sqlite3_stmt
	cols []C.dpsql_arg // Row's buffer
}

// Prepare prepares the first statement of query, skipping empty ones (blank
// text, comments, lone semicolons); s is nil when there is none. rest is the
// text after it.
func (c Conn) Prepare(query string) (s *Stmt, rest string, err error) {
	if c.db == nil {
		return nil, "", errors.New("no SQLite connection")
	}
	for len(query) > 0 {
		if len(query) > math.MaxInt32 {
			return nil, "", errors.New("statement text longer than 2 GiB")
		}
		var st *C.sqlite3_stmt
		var tail C.int
		p := (*C.char)(unsafe.Pointer(unsafe.StringData(query)))
		rc := C.dpsql_prepare(c.api, c.db, p, C.int(len(query)), &st, &tail)
		if rc != C.SQLITE_OK {
			return nil, "", c.Error(int(rc))
		}
		rest = query[int(tail):]
		if st != nil {
			return &Stmt{c: c, s: st}, rest, nil
		}
		if int(tail) == 0 {
			break
		}
		query = rest
	}
	return nil, "", nil
}

// Conn returns the statement's connection.
func (s *Stmt) Conn() Conn { return s.c }

// Finalize destroys the statement; its result is the last step's error,
// already reported, so it returns nothing. It may be called again.
func (s *Stmt) Finalize() {
	if s.s != nil {
		C.dpsql_finalize(s.c.api, s.s)
		s.s = nil
	}
}

// Finalized reports whether Finalize has run.
func (s *Stmt) Finalized() bool { return s.s == nil }

// Reset makes the statement ready to run again (its bindings stay).
func (s *Stmt) Reset() { C.dpsql_reset(s.c.api, s.s) }

// ClearBindings sets every parameter to NULL.
func (s *Stmt) ClearBindings() { C.dpsql_clear_bindings(s.c.api, s.s) }

// NumInput is the statement's number of parameters (the largest index).
func (s *Stmt) NumInput() int { return int(C.dpsql_bind_count(s.c.api, s.s)) }

// ParamIndex is the index of the parameter named name (with its prefix, as
// ":x"), 0 when there is none.
func (s *Stmt) ParamIndex(name string) int {
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	return int(C.dpsql_bind_index(s.c.api, s.s, n))
}

// TimeFormat is how a time.Time argument is stored (go-sqlite3's first
// format, which SQLite's date functions read).
const TimeFormat = "2006-01-02 15:04:05.999999999-07:00"

// Bind binds v to parameter i (from 1): nil and a nil []byte are NULL,
// int64, float64, bool (0 or 1), string (TEXT), []byte (BLOB, an empty one
// zero-length) and time.Time (TEXT in TimeFormat). SQLite copies what it
// binds.
func (s *Stmt) Bind(i int, v driver.Value) error {
	var (
		typ C.int = C.SQLITE_NULL
		n   C.sqlite3_int64
		f   C.double
		p   unsafe.Pointer
	)
	switch x := v.(type) {
	case nil:
	case int64:
		typ, n = C.SQLITE_INTEGER, C.sqlite3_int64(x)
	case float64:
		typ, f = C.SQLITE_FLOAT, C.double(x)
	case bool:
		typ = C.SQLITE_INTEGER
		if x {
			n = 1
		}
	case string:
		typ, n, p = C.SQLITE_TEXT, C.sqlite3_int64(len(x)), unsafe.Pointer(unsafe.StringData(x))
	case []byte:
		if x != nil {
			typ, n, p = C.SQLITE_BLOB, C.sqlite3_int64(len(x)), unsafe.Pointer(unsafe.SliceData(x))
		}
	case time.Time:
		t := x.Format(TimeFormat)
		typ, n, p = C.SQLITE_TEXT, C.sqlite3_int64(len(t)), unsafe.Pointer(unsafe.StringData(t))
	default:
		return fmt.Errorf("cannot bind argument %d of type %T (want nil, int64, float64, bool, string, []byte or time.Time)", i, v)
	}
	if rc := C.dpsql_bind(s.c.api, s.s, C.int(i), typ, n, f, p); rc != C.SQLITE_OK {
		return fmt.Errorf("binding argument %d: %w", i, s.c.Error(int(rc)))
	}
	return nil
}

// Step runs the statement to its next row: row is true when one is ready
// (SQLITE_ROW), false when the statement is done (SQLITE_DONE); rc is
// SQLite's result code, and any other is an error (see [Conn.Error]).
func (s *Stmt) Step() (row bool, rc int) {
	rc = int(C.dpsql_step(s.c.api, s.s))
	return rc == codeRow, rc
}

// Done reports whether rc, a result of Step, says the statement finished
// without error.
func Done(rc int) bool { return rc == codeDone }

// ColumnCount is the number of columns of the statement's rows.
func (s *Stmt) ColumnCount() int { return int(C.dpsql_column_count(s.c.api, s.s)) }

// ColumnName is the name of column i (from 0).
func (s *Stmt) ColumnName(i int) string {
	return C.GoString(C.dpsql_column_name(s.c.api, s.s, C.int(i)))
}

// ColumnDecltype is the declared type of column i, as written in the schema
// ("" for an expression).
func (s *Stmt) ColumnDecltype(i int) string {
	return C.GoString(C.dpsql_column_decltype(s.c.api, s.s, C.int(i)))
}

// Row reads the current row into dest (its first len(dest) columns):
// int64, float64, string, []byte (an empty BLOB is an empty, non-nil slice)
// or nil for NULL. BLOBs are copies with copyBlobs; without, they point
// into SQLite's memory, valid until the next Step, Reset or Finalize.
func (s *Stmt) Row(dest []driver.Value, copyBlobs bool) {
	if len(dest) == 0 {
		return
	}
	if cap(s.cols) < len(dest) {
		s.cols = make([]C.dpsql_arg, len(dest))
	}
	cols := s.cols[:len(dest)]
	C.dpsql_row(s.c.api, s.s, C.int(len(dest)), &cols[0])
	for i := range dest {
		switch a := &cols[i]; a._type {
		case C.SQLITE_INTEGER:
			dest[i] = int64(a.i)
		case C.SQLITE_FLOAT:
			dest[i] = float64(a.f)
		case C.SQLITE_TEXT:
			dest[i] = C.GoStringN((*C.char)(a.p), a.n)
		case C.SQLITE_BLOB:
			switch {
			case a.n == 0:
				dest[i] = []byte{}
			case copyBlobs:
				dest[i] = C.GoBytes(a.p, a.n)
			default:
				dest[i] = unsafe.Slice((*byte)(a.p), int(a.n))
			}
		default:
			dest[i] = nil
		}
	}
}

// Query runs query (its first statement) with args on the connection, from
// inside a statement running on it if need be (SQLite allows nested
// statements), and calls row for each result row: int64, float64, string,
// []byte or nil for NULL. The values passed to row are valid only during the
// call ([]byte ones point into SQLite's memory). An error's text is
// SQLite's message alone; it unwraps to the *Error.
func (c Conn) Query(query string, args []driver.Value, row func(vals []driver.Value) error) error {
	if c.db == nil {
		return errors.New("no SQLite handle")
	}
	s, _, err := c.Prepare(query)
	if err != nil {
		return plain(err)
	}
	if s == nil {
		return nil // only comments or white space
	}
	defer s.Finalize()
	for i, v := range args {
		if err := s.Bind(i+1, v); err != nil {
			return err
		}
	}
	vals := make([]driver.Value, s.ColumnCount())
	for {
		ok, rc := s.Step()
		if !ok {
			if Done(rc) {
				return nil
			}
			return plain(c.Error(rc))
		}
		s.Row(vals, false)
		err := row(vals)
		clear(vals) // drop the references to SQLite's memory
		if err != nil {
			return err
		}
	}
}

// plain makes a SQLite *Error a messageError.
func plain(err error) error {
	if e, ok := err.(*Error); ok {
		return messageError{e}
	}
	return err
}
