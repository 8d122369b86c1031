package sqlite

/*
#cgo CFLAGS: -I${SRCDIR}/../../third_party/sqlite
#include <stdlib.h>
#define DPSQL_API dpsql_api
#include "dpsqlapi.h"
#include "func.h"

typedef const sqlite3_api_routines api_t;

// dpsql_min_version is the oldest SQLite dpsql runs on: sqlite3_txn_state
// (Conn.Writing) came in 3.34.0; every other routine called here is older
// (create_function_v2 3.7.3, db_filename and stmt_busy 3.7.10, trace_v2
// 3.14.0, SQLITE_STMTSTATUS_RUN 3.20.0, result_text64 3.8.7), except
// sqlite3_is_interrupted (3.41.0), which is called only when present.
#define DPSQL_MIN_VERSION 3034000

static int dpsql_has_is_interrupted;

static int dpsql_table_version(api_t *a) { return a->libversion_number(); }
static int dpsql_table_threadsafe(api_t *a) { return a->xthreadsafe(); }
static api_t *dpsql_table(void) { return __atomic_load_n(&dpsql_api, __ATOMIC_ACQUIRE); }

// dpsql_set_api makes api the package's table: 0 on success (or when it is
// the table already set), 1 when another table is set (a second SQLite
// library in the process).
static int dpsql_set_api(api_t *api) {
	api_t *want = 0;
	if (!__atomic_compare_exchange_n(&dpsql_api, &want, api, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
			&& want != api) {
		return 1;
	}
	__atomic_store_n(&dpsql_has_is_interrupted, api->libversion_number() >= 3041000, __ATOMIC_RELEASE);
	return 0;
}

static int dpsql_open(api_t *a, const char *name, sqlite3 **db, int flags, const char *vfs) {
	return a->open_v2(name, db, flags, vfs);
}
static int dpsql_close(api_t *a, sqlite3 *db) { return a->close_v2(db); }
static int dpsql_extended_errcode(api_t *a, sqlite3 *db) { return a->extended_errcode(db); }
static const char *dpsql_errmsg(api_t *a, sqlite3 *db) { return a->errmsg(db); }
static const char *dpsql_errstr(api_t *a, int rc) { return a->errstr(rc); }
static void dpsql_extended_result_codes(api_t *a, sqlite3 *db) { a->extended_result_codes(db, 1); }
static int dpsql_busy_timeout(api_t *a, sqlite3 *db, int ms) { return a->busy_timeout(db, ms); }
static void dpsql_interrupt(api_t *a, sqlite3 *db) { a->interruptx(db); }
static int dpsql_autocommit(api_t *a, sqlite3 *db) { return a->get_autocommit(db); }
static int dpsql_txn_state(api_t *a, sqlite3 *db) { return a->txn_state(db, 0); }
static sqlite3_int64 dpsql_last_insert_rowid(api_t *a, sqlite3 *db) { return a->last_insert_rowid(db); }
// changes64 is 3.37; older hosts count in an int.
static sqlite3_int64 dpsql_changes(api_t *a, sqlite3 *db) {
	if (a->libversion_number() >= 3037000) return a->changes64(db);
	return a->changes(db);
}
static const char *dpsql_filename(api_t *a, sqlite3 *db) { return a->db_filename(db, "main"); }

// dpsql_vfs_name is the name of the VFS the main database of db is opened
// through (the top one of a stack of shims), or NULL.
static const char *dpsql_vfs_name(api_t *a, sqlite3 *db, int *rc) {
	sqlite3_vfs *v = 0;
	*rc = a->file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &v);
	return (*rc == SQLITE_OK && v) ? v->zName : 0;
}

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
static int dpsql_interrupted(api_t *a, sqlite3 *db) {
	if (dpsql_can_poll()) return a->is_interrupted(db);
	sqlite3_stmt *s = 0;
	int rc = a->prepare_v2(db, "SELECT 0", -1, &s, 0);
	if (rc == SQLITE_INTERRUPT) return 1;
	if (rc != SQLITE_OK || !s) return 0;
	dpsql_probe = s;
	rc = a->step(s);
	dpsql_probe = 0;
	a->finalize(s);
	return rc == SQLITE_INTERRUPT;
}

static const char *dpsql_busy_sql(api_t *a, sqlite3 *db) {
	sqlite3_stmt *s = 0;
	while ((s = a->next_stmt(db, s)) != 0) {
		if (a->stmt_busy(s)) return a->sql(s);
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
static int dpsql_count_runs(api_t *a, sqlite3 *db, unsigned long long *counter) {
	return a->trace_v2(db, counter ? SQLITE_TRACE_STMT : 0, counter ? dpsql_count_run : 0, counter);
}
static unsigned long long *dpsql_new_counter(void) { return calloc(1, sizeof(unsigned long long)); }

// dpsql_busy_run identifies the running execution of the busy statement: its
// address and how many times it has started running (SQLITE_STMTSTATUS_RUN,
// counted when each run begins).
static void dpsql_busy_run(api_t *a, sqlite3 *db, void **stmt, int *run) {
	sqlite3_stmt *s = 0;
	*stmt = 0; *run = 0;
	while ((s = a->next_stmt(db, s)) != 0) {
		if (a->stmt_busy(s)) {
			*stmt = (void*)s;
			*run = a->stmt_status(s, SQLITE_STMTSTATUS_RUN, 0);
			return;
		}
	}
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// MinVersion is the oldest SQLite dpsql runs on, as its version number and
// its name.
const (
	MinVersion     = C.DPSQL_MIN_VERSION
	MinVersionName = "3.34.0"
)

// SetAPI checks the SQLite behind the API table api (a const
// sqlite3_api_routines*) and makes it the process's table, the one
// [ConnOf] and the function shim call through. It refuses a SQLite older
// than [MinVersion], and a table other than the one already set (a second
// SQLite library in the process).
func SetAPI(api unsafe.Pointer) error {
	if api == nil {
		return fmt.Errorf("dpsql: no SQLite API table")
	}
	if err := CheckVersion(TableVersion(api)); err != nil {
		return err
	}
	if C.dpsql_set_api((*C.api_t)(api)) != 0 {
		return fmt.Errorf("dpsql: a second SQLite library in one process (a different API table): every connection must come from the same SQLite, or their file locks break each other")
	}
	return nil
}

// CheckVersion refuses a SQLite older than dpsql needs; v is its version
// number.
func CheckVersion(v int) error {
	if v < MinVersion {
		return fmt.Errorf("dpsql: this SQLite is version %s; dpsql needs SQLite %s or later (for sqlite3_txn_state): upgrade the SQLite library the program or the host application uses", VersionName(v), MinVersionName)
	}
	return nil
}

// TableVersion is the version number of the SQLite behind the API table api
// (3041000 for 3.41.0).
func TableVersion(api unsafe.Pointer) int { return int(C.dpsql_table_version((*C.api_t)(api))) }

// TableThreadsafe reports whether the SQLite behind api is built thread-safe
// (SQLITE_THREADSAFE not 0).
func TableThreadsafe(api unsafe.Pointer) bool { return C.dpsql_table_threadsafe((*C.api_t)(api)) != 0 }

// VersionName spells a SQLite version number (3041000 is "3.41.0").
func VersionName(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// processTable is the table SetAPI set, or nil.
func processTable() unsafe.Pointer { return unsafe.Pointer(C.dpsql_table()) }

// CanPollInterrupts reports whether the SQLite in use tells any goroutine
// that a statement is being interrupted (sqlite3_is_interrupted, 3.41).
func CanPollInterrupts() bool { return C.dpsql_can_poll() != 0 }

// ProbeOnly makes Interrupted probe as it must before SQLite 3.41 (a
// statement run on the connection, only from the statement's own goroutine),
// whatever the SQLite, while on: tests of that path use it.
func ProbeOnly(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.dpsql_set_probe_only(v)
}

// Conn is a SQLite connection handle (a sqlite3*) and the API table it is
// reached through. Its zero value is no connection: its methods report
// nothing (false, "", zero values) and its calls fail.
type Conn struct {
	api *C.api_t
	db  *C.sqlite3
}

// ConnOf returns the connection db (a sqlite3*) reached through the table
// [SetAPI] set; a Conn of no connection when none is set or db is nil.
func ConnOf(db unsafe.Pointer) Conn {
	api := C.dpsql_table()
	if api == nil || db == nil {
		return Conn{}
	}
	return Conn{api: api, db: (*C.sqlite3)(db)}
}

// NewConn returns the connection db (a sqlite3*) reached through the table
// api, such as a connection a host hands a loadable extension with its
// table before [SetAPI] has run.
func NewConn(api, db unsafe.Pointer) Conn {
	if api == nil || db == nil {
		return Conn{}
	}
	return Conn{api: (*C.api_t)(api), db: (*C.sqlite3)(db)}
}

// Flags of [Open] (sqlite3_open_v2's).
const (
	OpenReadWrite = C.SQLITE_OPEN_READWRITE
	OpenCreate    = C.SQLITE_OPEN_CREATE
	OpenURI       = C.SQLITE_OPEN_URI
	OpenFullMutex = C.SQLITE_OPEN_FULLMUTEX
)

// Open opens a connection to the database name (sqlite3_open_v2 through the
// table api) with flags, through the VFS named vfs ("" for the default), with
// extended result codes on.
func Open(api unsafe.Pointer, name string, flags int, vfs string) (Conn, error) {
	if api == nil {
		return Conn{}, errors.New("no SQLite API table")
	}
	a := (*C.api_t)(api)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cvfs *C.char
	if vfs != "" {
		cvfs = C.CString(vfs)
		defer C.free(unsafe.Pointer(cvfs))
	}
	var db *C.sqlite3
	rc := C.dpsql_open(a, cname, &db, C.int(flags), cvfs)
	if rc != C.SQLITE_OK {
		if db == nil {
			return Conn{}, &Error{Code: int(rc) & 0xff, ExtendedCode: int(rc), Msg: C.GoString(C.dpsql_errstr(a, rc))}
		}
		c := Conn{api: a, db: db}
		err := c.Error(int(rc))
		c.Close()
		return Conn{}, err
	}
	c := Conn{api: a, db: db}
	C.dpsql_extended_result_codes(a, db)
	return c, nil
}

// Valid reports whether c is a connection.
func (c Conn) Valid() bool { return c.db != nil }

// Handle returns the connection's sqlite3*.
func (c Conn) Handle() unsafe.Pointer { return unsafe.Pointer(c.db) }

// Close closes the connection (close_v2: statements still open are
// finalized when they are closed).
func (c Conn) Close() error {
	if c.db == nil {
		return nil
	}
	if rc := C.dpsql_close(c.api, c.db); rc != C.SQLITE_OK {
		return c.Error(int(rc))
	}
	return nil
}

// Error is the *Error for the result code rc of a call on the connection:
// SQLite's message for it and its extended code.
func (c Conn) Error(rc int) error {
	e := &Error{Code: rc & 0xff, ExtendedCode: rc}
	if c.db != nil {
		e.Msg = C.GoString(C.dpsql_errmsg(c.api, c.db))
		if x := int(C.dpsql_extended_errcode(c.api, c.db)); x&0xff == e.Code {
			e.ExtendedCode = x
		}
	}
	if (e.Msg == "" || e.Msg == "not an error") && c.api != nil {
		e.Msg = C.GoString(C.dpsql_errstr(c.api, C.int(rc)))
	}
	return e
}

// SetBusyTimeout makes a statement wait up to ms milliseconds for a lock
// another connection holds.
func (c Conn) SetBusyTimeout(ms int) error {
	if rc := C.dpsql_busy_timeout(c.api, c.db, C.int(ms)); rc != C.SQLITE_OK {
		return c.Error(int(rc))
	}
	return nil
}

// Interrupt interrupts the connection's running statement
// (sqlite3_interrupt); any goroutine may call it.
func (c Conn) Interrupt() {
	if c.db != nil {
		C.dpsql_interrupt(c.api, c.db)
	}
}

// Autocommit reports whether the connection is outside BEGIN ... COMMIT.
func (c Conn) Autocommit() bool { return c.db != nil && C.dpsql_autocommit(c.api, c.db) != 0 }

// Writing reports whether the connection holds a write transaction on any
// schema (sqlite3_txn_state).
func (c Conn) Writing() bool {
	return c.db != nil && C.dpsql_txn_state(c.api, c.db) == C.SQLITE_TXN_WRITE
}

// LastInsertRowid is the rowid of the connection's last INSERT.
func (c Conn) LastInsertRowid() int64 { return int64(C.dpsql_last_insert_rowid(c.api, c.db)) }

// Changes is the number of rows the connection's last statement changed.
func (c Conn) Changes() int64 { return int64(C.dpsql_changes(c.api, c.db)) }

// Filename returns the file of the connection's main database: "" for an
// in-memory or temporary database.
func (c Conn) Filename() string {
	if c.db == nil {
		return ""
	}
	return C.GoString(C.dpsql_filename(c.api, c.db))
}

// VFSName returns the name of the VFS the connection's main database is
// opened through, asked with SQLITE_FCNTL_VFS_POINTER: a second connection
// opened through it locks the file as this one does.
func (c Conn) VFSName() (string, error) {
	var rc C.int
	p := C.dpsql_vfs_name(c.api, c.db, &rc)
	if p == nil {
		return "", fmt.Errorf("the connection's VFS is unknown (file_control SQLITE_FCNTL_VFS_POINTER: %w)", &Error{Code: int(rc) & 0xff, ExtendedCode: int(rc), Msg: C.GoString(C.dpsql_errstr(c.api, rc))})
	}
	return C.GoString(p), nil
}

// Interrupted reports whether the connection's running statement is being
// interrupted (context cancelled, Ctrl-C). Call it from the statement's own
// function calls (their goroutine), never from another goroutine: before
// SQLite 3.41 it runs a probe statement on the connection (see
// InterruptedFromAnywhere).
func (c Conn) Interrupted() bool { return c.db != nil && C.dpsql_interrupted(c.api, c.db) != 0 }

// InterruptedFromAnywhere is Interrupted for a goroutine other than the
// statement's: true when the statement is being interrupted and SQLite (3.41
// or later) can tell without running a statement; always false with older
// SQLite, where only the statement's own calls can find out.
func (c Conn) InterruptedFromAnywhere() bool {
	return c.db != nil && C.dpsql_can_poll() != 0 && C.dpsql_interrupted(c.api, c.db) != 0
}

// RunningSQL returns the text of the statement running on the connection.
func (c Conn) RunningSQL() string {
	if c.db == nil {
		return ""
	}
	return C.GoString(C.dpsql_busy_sql(c.api, c.db))
}

// RunCounter counts the statement runs that start on a connection, through
// SQLite's statement trace (which an application's own sqlite3_trace_v2, e.g.
// go-sqlite3's SetTrace or the sqlite3 shell's .trace, would replace; the
// statement address and run count in an Execution still tell most runs apart
// then).
type RunCounter struct {
	c Conn
	n *C.ulonglong
}

// CountRuns starts counting the statement runs of the connection.
func (c Conn) CountRuns() RunCounter {
	if c.db == nil {
		return RunCounter{}
	}
	n := C.dpsql_new_counter()
	if n == nil || C.dpsql_count_runs(c.api, c.db, n) != 0 {
		C.free(unsafe.Pointer(n))
		return RunCounter{}
	}
	return RunCounter{c: c, n: n}
}

// Stop ends counting and frees the counter.
func (r RunCounter) Stop() {
	if r.n != nil {
		C.dpsql_count_runs(r.c.api, r.c.db, nil)
		C.free(unsafe.Pointer(r.n))
	}
}

// Value is the number of statement runs counted so far.
func (r RunCounter) Value() uint64 {
	if r.n == nil {
		return 0
	}
	return uint64(*r.n)
}

// Execution identifies one run of one statement: the connection's run count
// when it started, the statement's address, its own run count, and its SQL
// text.
type Execution struct {
	Seq  uint64
	Stmt uintptr
	Run  int
	SQL  string
}

// RunningExecution returns the execution of the statement running on the
// connection, counted by runs; the zero value when none is running.
func (c Conn) RunningExecution(runs RunCounter) Execution {
	if c.db == nil {
		return Execution{}
	}
	var stmt unsafe.Pointer
	var run C.int
	C.dpsql_busy_run(c.api, c.db, &stmt, &run)
	if stmt == nil {
		return Execution{}
	}
	return Execution{Seq: runs.Value(), Stmt: uintptr(stmt), Run: int(run), SQL: c.RunningSQL()}
}
