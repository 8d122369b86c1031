// The C side of dpsql's SQL functions (func.go): SQLite calls dpsql_func
// (scalars) or dpsql_agg_step and dpsql_agg_final (aggregates), which hand a
// call's arguments to Go in one cgo call, without go-sqlite3's reflective
// callbacks, and set the result Go returns. Every call into SQLite goes
// through the package's API table (conn.go, dpsqlapi.h), never through
// SQLite's symbols. dpsql_arg also carries a row's columns (stmt.go).
#ifndef DPSQL_FUNC_H
#define DPSQL_FUNC_H
#include <stdint.h>

typedef struct {
	int type;          // SQLITE_INTEGER 1, SQLITE_FLOAT 2, SQLITE_TEXT 3, SQLITE_BLOB 4, SQLITE_NULL 5
	const void *p;     // TEXT or BLOB bytes (valid during the call only)
	int n;             // their length
	long long i;       // INTEGER value
	double f;          // FLOAT value
} dpsql_arg;

// dpsql_res is a result Go hands back: type 1 INTEGER i, 2 FLOAT f, 5 NULL;
// 0 when Go has already set the result (TEXT, BLOB, an error) through the
// dpsql_result_* calls below.
typedef struct {
	int type;
	long long i;
	double f;
} dpsql_res;

// DPSQL_MAX_ARGS arguments are passed on the stack; more are allocated.
#define DPSQL_MAX_ARGS 8

// dpsql_create_function registers a scalar (aggregate 0) or aggregate SQL
// function of nargs arguments (-1: any number) with the flags of
// sqlite3_create_function_v2 (SQLITE_UTF8 is added); app is the Go handle
// passed back on every call, deleted by dpsqlDestroy (also when registering
// fails).
int dpsql_create_function(void *db, const char *name, int nargs, int flags, uintptr_t app, int aggregate);

void dpsql_result_text(void *ctx, const char *p, long long n);
void dpsql_result_blob(void *ctx, const void *p, long long n);
void dpsql_result_error(void *ctx, const char *p, int n);
#endif
