package sqlfuncs

/*
// The shim calls SQLite through the copy go-sqlite3 links into the program (one
// copy of SQLite per process is required for correct file locking), so its
// symbols are resolved at the final link, not when cgo links this package alone.
#cgo linux LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#cgo darwin LDFLAGS: -Wl,-undefined,dynamic_lookup
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
extern int sqlite3_txn_state(sqlite3*, const char*);
extern sqlite3_stmt *sqlite3_next_stmt(sqlite3*, sqlite3_stmt*);
extern int sqlite3_stmt_busy(sqlite3_stmt*);
extern const char *sqlite3_sql(sqlite3_stmt*);
extern int sqlite3_is_interrupted(sqlite3*);
extern int sqlite3_stmt_status(sqlite3_stmt*, int, int);

static int dpsql_txn_state(void *db) { return sqlite3_txn_state((sqlite3*)db, 0); }
static int dpsql_interrupted(void *db) { return sqlite3_is_interrupted((sqlite3*)db); }
static const char *dpsql_busy_sql(void *db) {
	sqlite3_stmt *s = 0;
	while ((s = sqlite3_next_stmt((sqlite3*)db, s)) != 0) {
		if (sqlite3_stmt_busy(s)) return sqlite3_sql(s);
	}
	return 0;
}
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

import (
	"reflect"
	"unsafe"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// dbHandle returns the sqlite3* behind a go-sqlite3 connection. go-sqlite3 does
// not export it; the field is read by name so a layout change fails loudly in
// the tests rather than silently.
func dbHandle(c *sqlite3.SQLiteConn) unsafe.Pointer {
	f, ok := reflect.TypeOf(c).Elem().FieldByName("db")
	if !ok || f.Type.Kind() != reflect.Pointer {
		return nil
	}
	return *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(c), f.Offset))
}

const txnWrite = 2 // SQLITE_TXN_WRITE

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

// execution identifies one run of one statement: the statement's address, its
// run count, and its SQL text (a statement prepared anew at a freed address
// starts counting again, usually for other SQL).
type execution struct {
	stmt uintptr
	run  int
	sql  string
}

// runningExecution returns the execution of the statement running on the
// connection; the zero value when none is running.
func runningExecution(h unsafe.Pointer) execution {
	if h == nil {
		return execution{}
	}
	var stmt unsafe.Pointer
	var run C.int
	C.dpsql_busy_run(h, &stmt, &run)
	if stmt == nil {
		return execution{}
	}
	return execution{stmt: uintptr(stmt), run: int(run), sql: runningSQL(h)}
}
