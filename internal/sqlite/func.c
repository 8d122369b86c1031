// See func.h. SQLite is reached only through the API table dpsql_api
// (conn.go's SetAPI sets it).
#include <stdlib.h>
#define DPSQL_API dpsql_api
#include "dpsqlapi.h"
#include "func.h"
#include "_cgo_export.h"

DPSQL_API_DEFINE;

// dpsql_args converts SQLite's arguments into a; a holds argc entries.
static void dpsql_args(int argc, sqlite3_value **argv, dpsql_arg *a) {
	for (int i = 0; i < argc; i++) {
		a[i].type = sqlite3_value_type(argv[i]);
		a[i].p = 0; a[i].n = 0; a[i].i = 0; a[i].f = 0;
		switch (a[i].type) {
		case SQLITE_INTEGER: a[i].i = sqlite3_value_int64(argv[i]); break;
		case SQLITE_FLOAT: a[i].f = sqlite3_value_double(argv[i]); break;
		// The pointer first, then its length (SQLite's documented order).
		case SQLITE_TEXT: a[i].p = sqlite3_value_text(argv[i]); a[i].n = sqlite3_value_bytes(argv[i]); break;
		case SQLITE_BLOB: a[i].p = sqlite3_value_blob(argv[i]); a[i].n = sqlite3_value_bytes(argv[i]); break;
		}
	}
}

static void dpsql_set(sqlite3_context *ctx, const dpsql_res *r) {
	switch (r->type) {
	case SQLITE_INTEGER: sqlite3_result_int64(ctx, r->i); break;
	case SQLITE_FLOAT: sqlite3_result_double(ctx, r->f); break;
	case SQLITE_NULL: sqlite3_result_null(ctx); break;
	}
}

static void dpsql_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
	dpsql_arg stack[DPSQL_MAX_ARGS], *a = stack;
	if (argc > DPSQL_MAX_ARGS && !(a = malloc(sizeof(dpsql_arg) * (size_t)argc))) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	dpsql_args(argc, argv, a);
	dpsql_res r = {0};
	dpsqlFunc((uintptr_t)sqlite3_user_data(ctx), ctx, argc, a, &r);
	if (a != stack) free(a);
	dpsql_set(ctx, &r);
}

static void dpsql_agg_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
	uintptr_t *agg = sqlite3_aggregate_context(ctx, sizeof(uintptr_t));
	if (!agg) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	dpsql_arg stack[DPSQL_MAX_ARGS], *a = stack;
	if (argc > DPSQL_MAX_ARGS && !(a = malloc(sizeof(dpsql_arg) * (size_t)argc))) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	dpsql_args(argc, argv, a);
	dpsqlStep((uintptr_t)sqlite3_user_data(ctx), ctx, agg, argc, a);
	if (a != stack) free(a);
}

static void dpsql_agg_final(sqlite3_context *ctx) {
	uintptr_t *agg = sqlite3_aggregate_context(ctx, 0); // NULL when no row was stepped
	dpsql_res r = {0};
	dpsqlFinal((uintptr_t)sqlite3_user_data(ctx), ctx, agg ? *agg : 0, &r);
	dpsql_set(ctx, &r);
}

static void dpsql_destroy(void *app) { dpsqlDestroy((uintptr_t)app); }

int dpsql_create_function(void *db, const char *name, int nargs, int flags, uintptr_t app, int aggregate) {
	return sqlite3_create_function_v2((sqlite3*)db, name, nargs, SQLITE_UTF8 | flags, (void*)app,
		aggregate ? 0 : dpsql_func, aggregate ? dpsql_agg_step : 0, aggregate ? dpsql_agg_final : 0,
		dpsql_destroy);
}

void dpsql_result_text(void *ctx, const char *p, long long n) {
	sqlite3_result_text64((sqlite3_context*)ctx, n ? p : "", (sqlite3_uint64)n, SQLITE_TRANSIENT, SQLITE_UTF8);
}

void dpsql_result_blob(void *ctx, const void *p, long long n) {
	sqlite3_result_blob64((sqlite3_context*)ctx, p, (sqlite3_uint64)n, SQLITE_TRANSIENT);
}

void dpsql_result_error(void *ctx, const char *p, int n) {
	sqlite3_result_error((sqlite3_context*)ctx, p, n);
}
