package sqlfuncs

/*
// The shim calls SQLite through the copy go-sqlite3 links into the program (one
// copy of SQLite per process is required for correct file locking), so its
// symbols are resolved at the final link, not when cgo links this package alone.
#cgo linux LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#cgo darwin LDFLAGS: -Wl,-undefined,dynamic_lookup
#include <stdlib.h>
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
extern int sqlite3_txn_state(sqlite3*, const char*);
extern sqlite3_stmt *sqlite3_next_stmt(sqlite3*, sqlite3_stmt*);
extern int sqlite3_stmt_busy(sqlite3_stmt*);
extern const char *sqlite3_sql(sqlite3_stmt*);
extern int sqlite3_is_interrupted(sqlite3*);
extern int sqlite3_stmt_status(sqlite3_stmt*, int, int);
extern const char *sqlite3_db_filename(sqlite3*, const char*);
extern int sqlite3_trace_v2(sqlite3*, unsigned, int(*)(unsigned, void*, void*, void*), void*);

static const char *dpsql_filename(void *db) { return sqlite3_db_filename((sqlite3*)db, "main"); }
static int dpsql_txn_state(void *db) { return sqlite3_txn_state((sqlite3*)db, 0); }
static int dpsql_interrupted(void *db) { return sqlite3_is_interrupted((sqlite3*)db); }
static const char *dpsql_busy_sql(void *db) {
	sqlite3_stmt *s = 0;
	while ((s = sqlite3_next_stmt((sqlite3*)db, s)) != 0) {
		if (sqlite3_stmt_busy(s)) return sqlite3_sql(s);
	}
	return 0;
}
// dpsql_count_runs counts in *counter the statement runs that start on the
// connection (SQLITE_TRACE_STMT, 0x01); a NULL counter stops counting.
static int dpsql_count_run(unsigned t, void *ctx, void *p, void *x) {
	(*(unsigned long long*)ctx)++;
	return 0;
}
static int dpsql_count_runs(void *db, unsigned long long *counter) {
	return sqlite3_trace_v2((sqlite3*)db, counter ? 0x01 : 0, counter ? dpsql_count_run : 0, counter);
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
			*run = sqlite3_stmt_status(s, 7, 0); // 7: SQLITE_STMTSTATUS_RUN
			return;
		}
	}
}
*/
import "C"

import "unsafe"

const txnWrite = 2 // SQLITE_TXN_WRITE

// handleFilename returns the file of the main database of the connection h
// (the tests check dbHandle with it).
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

// interrupted reports whether the connection's running statement is being
// interrupted (context cancelled, Ctrl-C).
func interrupted(h unsafe.Pointer) bool {
	return h != nil && C.dpsql_interrupted(h) != 0
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
// go-sqlite3's SetTrace, would replace; the statement address and run count
// in an execution still tell most runs apart then).
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
