// See aggregate_shim.h. SQLite's symbols resolve at the final link against the
// copy go-sqlite3 links in (see handle.go).
#include <stdlib.h>
#include "aggregate_shim.h"
#include "_cgo_export.h"

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_context sqlite3_context;
typedef struct sqlite3_value sqlite3_value;
extern int sqlite3_create_function_v2(sqlite3*, const char*, int, int, void*,
	void (*)(sqlite3_context*, int, sqlite3_value**),
	void (*)(sqlite3_context*, int, sqlite3_value**),
	void (*)(sqlite3_context*), void (*)(void*));
extern void *sqlite3_user_data(sqlite3_context*);
extern void *sqlite3_aggregate_context(sqlite3_context*, int);
extern int sqlite3_value_type(sqlite3_value*);
extern const void *sqlite3_value_blob(sqlite3_value*);
extern const unsigned char *sqlite3_value_text(sqlite3_value*);
extern int sqlite3_value_bytes(sqlite3_value*);
extern long long sqlite3_value_int64(sqlite3_value*);
extern double sqlite3_value_double(sqlite3_value*);
extern void sqlite3_result_text(sqlite3_context*, const char*, int, void (*)(void*));
extern void sqlite3_result_error(sqlite3_context*, const char*, int);
extern void sqlite3_result_error_nomem(sqlite3_context*);

static void dpsql_agg_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
	uintptr_t *agg = sqlite3_aggregate_context(ctx, sizeof(uintptr_t));
	if (!agg) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	dpsql_arg a[DPSQL_MAX_ARGS];
	if (argc > DPSQL_MAX_ARGS) argc = DPSQL_MAX_ARGS;
	for (int i = 0; i < argc; i++) {
		a[i].type = sqlite3_value_type(argv[i]);
		a[i].p = 0; a[i].n = 0; a[i].i = 0; a[i].f = 0;
		switch (a[i].type) {
		case 1: a[i].i = sqlite3_value_int64(argv[i]); break;
		case 2: a[i].f = sqlite3_value_double(argv[i]); break;
		case 3: a[i].p = sqlite3_value_text(argv[i]); a[i].n = sqlite3_value_bytes(argv[i]); break;
		case 4: a[i].p = sqlite3_value_blob(argv[i]); a[i].n = sqlite3_value_bytes(argv[i]); break;
		}
	}
	char *err = dpsqlAggStep((uintptr_t)sqlite3_user_data(ctx), agg, argc, a);
	if (err) {
		sqlite3_result_error(ctx, err, -1);
		free(err);
	}
}

static void dpsql_agg_final(sqlite3_context *ctx) {
	uintptr_t *agg = sqlite3_aggregate_context(ctx, 0); // NULL when no row was stepped
	char *res = 0;
	char *err = dpsqlAggFinal((uintptr_t)sqlite3_user_data(ctx), agg ? *agg : 0, &res);
	if (err) {
		sqlite3_result_error(ctx, err, -1);
		free(err);
		return;
	}
	sqlite3_result_text(ctx, res ? res : "", -1, res ? free : 0);
}

static void dpsql_agg_destroy(void *app) { dpsqlAggDestroy((uintptr_t)app); }

int dpsql_create_aggregate(void *db, const char *name, int nargs, uintptr_t app) {
	// SQLITE_UTF8 (1), not SQLITE_DETERMINISTIC: a release is never folded or reused.
	return sqlite3_create_function_v2((sqlite3*)db, name, nargs, 1, (void*)app,
		0, dpsql_agg_step, dpsql_agg_final, dpsql_agg_destroy);
}
