// The C side of dpsql's row aggregates (aggregate.go): SQLite calls
// dpsql_agg_step once a row, which hands the row's values to Go in one cgo
// call, without go-sqlite3's reflective callback and without copying BLOBs.
#ifndef DPSQL_AGGREGATE_SHIM_H
#define DPSQL_AGGREGATE_SHIM_H
#include <stdint.h>

typedef struct {
	int type;          // SQLITE_INTEGER 1, SQLITE_FLOAT 2, SQLITE_TEXT 3, SQLITE_BLOB 4, SQLITE_NULL 5
	const void *p;     // TEXT or BLOB bytes (valid during the call only)
	int n;             // their length
	long long i;       // INTEGER value
	double f;          // FLOAT value
} dpsql_arg;

#define DPSQL_MAX_ARGS 8

int dpsql_create_aggregate(void *db, const char *name, int nargs, uintptr_t app);
#endif
