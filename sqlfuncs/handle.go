package sqlfuncs

/*
// Every call into SQLite goes through the API table (a const
// sqlite3_api_routines*, the host's in the loadable extension, the one of the
// SQLite go-sqlite3 links in Go programs): no SQLite symbol is linked, so one
// copy of SQLite serves the process, as POSIX file locking requires.
#cgo CFLAGS: -I${SRCDIR}/../internal/sqliteh -I${SRCDIR}/../third_party/sqlite
#include <stdlib.h>
#define DPSQL_API dpsql_sqlfuncs_api
#include "dpsqlapi.h"
#include "aggregate_shim.h"

// dpsql_min_version is the oldest SQLite dpsql runs on: sqlite3_txn_state
// (canWriteLedger) came in 3.34.0; every other routine called here is older
// (create_function_v2 3.7.3, db_filename and stmt_busy 3.7.10, trace_v2
// 3.14.0, SQLITE_STMTSTATUS_RUN 3.20.0, result_text64 3.8.7), except
// sqlite3_is_interrupted (3.41.0), which is called only when present.
#define DPSQL_MIN_VERSION 3034000

static int dpsql_has_is_interrupted;

static int dpsql_table_version(const void *api) {
	return ((const sqlite3_api_routines*)api)->libversion_number();
}

// dpsql_set_api makes api the package's table: 0 on success (or when it is
// the table already set), 1 when another table is set (a second SQLite
// library in the process).
static int dpsql_set_api(const void *api) {
	const sqlite3_api_routines *want = 0;
	if (!__atomic_compare_exchange_n(&dpsql_sqlfuncs_api, &want, (const sqlite3_api_routines*)api, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
			&& want != api) {
		return 1;
	}
	__atomic_store_n(&dpsql_has_is_interrupted, DPSQL_HAS(3041000), __ATOMIC_RELEASE);
	return 0;
}

static const char *dpsql_filename(void *db) { return sqlite3_db_filename((sqlite3*)db, "main"); }
static int dpsql_txn_state(void *db) { return sqlite3_txn_state((sqlite3*)db, 0); }
static int dpsql_autocommit(void *db) { return sqlite3_get_autocommit((sqlite3*)db); }
static const char *dpsql_errmsg(void *db) { return sqlite3_errmsg((sqlite3*)db); }

// dpsql_probe is the statement dpsql_interrupted runs on this thread, which
// the run counter does not count.
static __thread void *dpsql_probe;

// dpsql_probe_only makes dpsql_interrupted probe as before 3.41 with any
// SQLite (tests of that path; the probe works with every version).
static int dpsql_probe_only;
static void dpsql_set_probe_only(int on) { __atomic_store_n(&dpsql_probe_only, on, __ATOMIC_RELEASE); }

// dpsql_can_poll reports whether dpsql_interrupted may be called from a
// thread other than the one running the connection's statement.
static int dpsql_can_poll(void) {
	return __atomic_load_n(&dpsql_has_is_interrupted, __ATOMIC_ACQUIRE) && !__atomic_load_n(&dpsql_probe_only, __ATOMIC_ACQUIRE);
}

// dpsql_interrupted reports whether the connection's running statement is
// being interrupted. SQLite has said so since 3.41.0 (sqlite3_is_interrupted);
// before, a statement started on the connection from inside the running one
// fails at once with SQLITE_INTERRUPT when it is (its interrupt flag is
// cleared only when no statement runs). That probe must run on the thread of
// the running statement, inside one of its function calls.
static int dpsql_interrupted(void *db) {
	if (dpsql_can_poll()) return sqlite3_is_interrupted((sqlite3*)db);
	sqlite3_stmt *s = 0;
	int rc = sqlite3_prepare_v2((sqlite3*)db, "SELECT 0", -1, &s, 0);
	if (rc == SQLITE_INTERRUPT) return 1;
	if (rc != SQLITE_OK || !s) return 0;
	dpsql_probe = s;
	rc = sqlite3_step(s);
	dpsql_probe = 0;
	sqlite3_finalize(s);
	return rc == SQLITE_INTERRUPT;
}

static const char *dpsql_busy_sql(void *db) {
	sqlite3_stmt *s = 0;
	while ((s = sqlite3_next_stmt((sqlite3*)db, s)) != 0) {
		if (sqlite3_stmt_busy(s)) return sqlite3_sql(s);
	}
	return 0;
}
// dpsql_count_runs counts in *counter the statement runs that start on the
// connection (SQLITE_TRACE_STMT), dpsql_interrupted's probes excepted; a NULL
// counter stops counting.
static int dpsql_count_run(unsigned t, void *ctx, void *p, void *x) {
	if (p != dpsql_probe) (*(unsigned long long*)ctx)++;
	return 0;
}
static int dpsql_count_runs(void *db, unsigned long long *counter) {
	return sqlite3_trace_v2((sqlite3*)db, counter ? SQLITE_TRACE_STMT : 0, counter ? dpsql_count_run : 0, counter);
}
static unsigned long long *dpsql_new_counter(void) { return calloc(1, sizeof(unsigned long long)); }

// dpsql_busy_run identifies the running execution of the busy statement: its
// address and how many times it has started running (SQLITE_STMTSTATUS_RUN,
// counted when each run begins).
static void dpsql_busy_run(void *db, void **stmt, int *run) {
	sqlite3_stmt *s = 0;
	*stmt = 0; *run = 0;
	while ((s = sqlite3_next_stmt((sqlite3*)db, s)) != 0) {
		if (sqlite3_stmt_busy(s)) {
			*stmt = (void*)s;
			*run = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_RUN, 0);
			return;
		}
	}
}

// Nested queries (tables.go): prepared, bound, stepped and read through the
// table.
static int dpsql_prepare(void *db, const char *sql, int n, void **stmt) {
	return sqlite3_prepare_v2((sqlite3*)db, sql, n, (sqlite3_stmt**)stmt, 0);
}
static int dpsql_bind(void *stmt, int i, const dpsql_arg *a) {
	sqlite3_stmt *s = stmt;
	switch (a->type) {
	case SQLITE_INTEGER: return sqlite3_bind_int64(s, i, a->i);
	case SQLITE_FLOAT: return sqlite3_bind_double(s, i, a->f);
	case SQLITE_TEXT: return sqlite3_bind_text64(s, i, a->n ? a->p : "", (sqlite3_uint64)a->n, SQLITE_TRANSIENT, SQLITE_UTF8);
	case SQLITE_BLOB: return sqlite3_bind_blob64(s, i, a->n ? a->p : "", (sqlite3_uint64)a->n, SQLITE_TRANSIENT);
	}
	return sqlite3_bind_null(s, i);
}
static int dpsql_step(void *stmt) { return sqlite3_step((sqlite3_stmt*)stmt); }
static int dpsql_column_count(void *stmt) { return sqlite3_column_count((sqlite3_stmt*)stmt); }
static void dpsql_row(void *stmt, int n, dpsql_arg *a) {
	sqlite3_stmt *s = stmt;
	for (int i = 0; i < n; i++) {
		a[i].type = sqlite3_column_type(s, i);
		a[i].p = 0; a[i].n = 0; a[i].i = 0; a[i].f = 0;
		switch (a[i].type) {
		case SQLITE_INTEGER: a[i].i = sqlite3_column_int64(s, i); break;
		case SQLITE_FLOAT: a[i].f = sqlite3_column_double(s, i); break;
		case SQLITE_TEXT: a[i].p = sqlite3_column_text(s, i); a[i].n = sqlite3_column_bytes(s, i); break;
		case SQLITE_BLOB: a[i].p = sqlite3_column_blob(s, i); a[i].n = sqlite3_column_bytes(s, i); break;
		}
	}
}
static int dpsql_finalize(void *stmt) { return sqlite3_finalize((sqlite3_stmt*)stmt); }
*/
import "C"

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"unsafe"
)

const txnWrite = 2 // SQLITE_TXN_WRITE

// minVersion is the oldest SQLite dpsql runs on, as its version number and
// its name.
const (
	minVersion     = C.DPSQL_MIN_VERSION
	minVersionName = "3.34.0"
)

// setAPI checks the SQLite behind the API table api and makes api the
// package's table.
func setAPI(api unsafe.Pointer) error {
	if api == nil {
		return fmt.Errorf("dpsql: no SQLite API table")
	}
	if err := checkVersion(int(C.dpsql_table_version(api))); err != nil {
		return err
	}
	if C.dpsql_set_api(api) != 0 {
		return fmt.Errorf("dpsql: a second SQLite library in one process (a different API table): every connection must come from the same SQLite, or their file locks break each other")
	}
	return nil
}

// checkVersion refuses a SQLite older than dpsql needs; v is its version
// number.
func checkVersion(v int) error {
	if v < minVersion {
		return fmt.Errorf("dpsql: this SQLite is version %s; dpsql needs SQLite %s or later (for sqlite3_txn_state): upgrade the SQLite library the program or the host application uses", versionName(v), minVersionName)
	}
	return nil
}

// canPollInterrupts reports whether the SQLite in use tells any goroutine
// that a statement is being interrupted (sqlite3_is_interrupted, 3.41).
func canPollInterrupts() bool { return C.dpsql_can_poll() != 0 }

// probeOnly makes interrupted probe as it must before SQLite 3.41 (a
// statement run on the connection, only from the statement's own goroutine),
// whatever the SQLite, while on: tests of that path use it.
func probeOnly(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.dpsql_set_probe_only(v)
}

// versionName spells a SQLite version number (3041000 is "3.41.0").
func versionName(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// handleFilename returns the file of the main database of the connection h.
func handleFilename(h unsafe.Pointer) string {
	if h == nil {
		return ""
	}
	return C.GoString(C.dpsql_filename(h))
}

// writing reports whether the connection holds a write transaction on any schema.
func writing(h unsafe.Pointer) bool {
	return h != nil && C.dpsql_txn_state(h) == txnWrite
}

// autocommit reports whether the connection is outside BEGIN ... COMMIT.
func autocommit(h unsafe.Pointer) bool {
	return h != nil && C.dpsql_autocommit(h) != 0
}

// interrupted reports whether the connection's running statement is being
// interrupted (context cancelled, Ctrl-C). Call it from the statement's own
// function calls (their goroutine), never from another goroutine: before
// SQLite 3.41 it runs a probe statement on the connection (see
// interruptedFromAnywhere).
func interrupted(h unsafe.Pointer) bool {
	return h != nil && C.dpsql_interrupted(h) != 0
}

// interruptedFromAnywhere is interrupted for a goroutine other than the
// statement's: true when the statement is being interrupted and SQLite (3.41
// or later) can tell without running a statement; always false with older
// SQLite, where only the statement's own calls can find out.
func interruptedFromAnywhere(h unsafe.Pointer) bool {
	return h != nil && C.dpsql_can_poll() != 0 && C.dpsql_interrupted(h) != 0
}

// runningSQL returns the text of the statement running on the connection.
func runningSQL(h unsafe.Pointer) string {
	if h == nil {
		return ""
	}
	return C.GoString(C.dpsql_busy_sql(h))
}

// runCounter counts the statement runs that start on a connection, through
// SQLite's statement trace (which an application's own sqlite3_trace_v2, e.g.
// go-sqlite3's SetTrace or the sqlite3 shell's .trace, would replace; the
// statement address and run count in an execution still tell most runs apart
// then).
type runCounter struct{ n *C.ulonglong }

// countRuns starts counting on the connection h.
func countRuns(h unsafe.Pointer) runCounter {
	n := C.dpsql_new_counter()
	if n == nil || C.dpsql_count_runs(h, n) != 0 {
		C.free(unsafe.Pointer(n))
		return runCounter{}
	}
	return runCounter{n}
}

// stop ends counting on h and frees the counter.
func (r runCounter) stop(h unsafe.Pointer) {
	if r.n != nil {
		C.dpsql_count_runs(h, nil)
		C.free(unsafe.Pointer(r.n))
	}
}

func (r runCounter) value() uint64 {
	if r.n == nil {
		return 0
	}
	return uint64(*r.n)
}

// execution identifies one run of one statement: the connection's run count
// when it started, the statement's address, its own run count, and its SQL
// text.
type execution struct {
	seq  uint64
	stmt uintptr
	run  int
	sql  string
}

// runningExecution returns the execution of the statement running on the
// connection h; the zero value when none is running.
func runningExecution(h unsafe.Pointer, runs runCounter) execution {
	if h == nil {
		return execution{}
	}
	var stmt unsafe.Pointer
	var run C.int
	C.dpsql_busy_run(h, &stmt, &run)
	if stmt == nil {
		return execution{}
	}
	return execution{seq: runs.value(), stmt: uintptr(stmt), run: int(run), sql: runningSQL(h)}
}

// queryRows runs query with args on the connection h through the API table
// and calls row for each result row (see Conn.queryConn).
func queryRows(h unsafe.Pointer, query string, args []driver.Value, row func(vals []driver.Value) error) error {
	if h == nil {
		return errors.New("no SQLite handle")
	}
	cq := C.CString(query)
	defer C.free(unsafe.Pointer(cq))
	var stmt unsafe.Pointer
	if rc := C.dpsql_prepare(h, cq, -1, &stmt); rc != 0 {
		return sqliteError(h, rc)
	}
	if stmt == nil {
		return nil // only comments or white space
	}
	defer C.dpsql_finalize(stmt)
	for i, v := range args {
		var a C.dpsql_arg
		var pin []byte
		switch x := v.(type) {
		case nil:
			a._type = 5
		case int64:
			a._type, a.i = 1, C.longlong(x)
		case float64:
			a._type, a.f = 2, C.double(x)
		case bool:
			a._type = 1
			if x {
				a.i = 1
			}
		case string:
			a._type, pin = 3, []byte(x)
		case []byte:
			a._type, pin = 4, x
		default:
			return fmt.Errorf("internal error: cannot bind a %T", v)
		}
		// The bytes are C copies: a C struct may not hold Go pointers.
		if len(pin) > 0 {
			a.p = C.CBytes(pin)
			a.n = C.int(len(pin))
		}
		rc := C.dpsql_bind(stmt, C.int(i+1), &a)
		C.free(a.p)
		if rc != 0 {
			return sqliteError(h, rc)
		}
	}
	n := int(C.dpsql_column_count(stmt))
	cols := make([]C.dpsql_arg, max(n, 1))
	vals := make([]driver.Value, n)
	for {
		switch rc := C.dpsql_step(stmt); rc {
		case 101: // SQLITE_DONE
			return nil
		case 100: // SQLITE_ROW
		default:
			return sqliteError(h, rc)
		}
		C.dpsql_row(stmt, C.int(n), &cols[0])
		for i := range vals {
			switch a := &cols[i]; a._type {
			case 1:
				vals[i] = int64(a.i)
			case 2:
				vals[i] = float64(a.f)
			case 3:
				vals[i] = C.GoStringN((*C.char)(a.p), a.n)
			case 4:
				if a.n == 0 {
					vals[i] = []byte{}
				} else {
					vals[i] = unsafe.Slice((*byte)(a.p), int(a.n))
				}
			default:
				vals[i] = nil
			}
		}
		err := row(vals)
		clear(vals) // drop the references to SQLite's memory
		if err != nil {
			return err
		}
	}
}

// sqliteError is the error of a failed call on the connection h: SQLite's
// message for it.
func sqliteError(h unsafe.Pointer, rc C.int) error {
	if msg := C.GoString(C.dpsql_errmsg(h)); msg != "" {
		return errors.New(msg)
	}
	return fmt.Errorf("SQLite error %d", int(rc))
}
