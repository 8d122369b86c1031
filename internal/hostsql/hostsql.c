// C side of package hostsql: each routine it calls, through an API table.
#include "hostsql.h"


int dpsql_hs_libversion(api_t *a) { return a->libversion_number(); }
int dpsql_hs_threadsafe(api_t *a) { return a->xthreadsafe(); }

int dpsql_hs_open(api_t *a, const char *name, sqlite3 **db, int flags, const char *vfs) {
	return a->open_v2(name, db, flags, vfs);
}
int dpsql_hs_close(api_t *a, sqlite3 *db) { return a->close_v2(db); }
int dpsql_hs_errcode(api_t *a, sqlite3 *db) { return a->errcode(db); }
int dpsql_hs_extended_errcode(api_t *a, sqlite3 *db) { return a->extended_errcode(db); }
const char *dpsql_hs_errmsg(api_t *a, sqlite3 *db) { return a->errmsg(db); }
const char *dpsql_hs_errstr(api_t *a, int rc) { return a->errstr(rc); }
int dpsql_hs_extended_result_codes(api_t *a, sqlite3 *db) { return a->extended_result_codes(db, 1); }
int dpsql_hs_busy_timeout(api_t *a, sqlite3 *db, int ms) { return a->busy_timeout(db, ms); }
void dpsql_hs_interrupt(api_t *a, sqlite3 *db) { a->interruptx(db); }
int dpsql_hs_get_autocommit(api_t *a, sqlite3 *db) { return a->get_autocommit(db); }
sqlite3_int64 dpsql_hs_last_insert_rowid(api_t *a, sqlite3 *db) { return a->last_insert_rowid(db); }
// changes64 is 3.37; older hosts count in an int.
sqlite3_int64 dpsql_hs_changes(api_t *a, sqlite3 *db) {
	if (a->libversion_number() >= 3037000) return a->changes64(db);
	return a->changes(db);
}

int dpsql_hs_prepare(api_t *a, sqlite3 *db, const char *sql, int n, sqlite3_stmt **st, int *tail) {
	const char *t = 0;
	int rc = a->prepare_v2(db, sql, n, st, &t);
	*tail = t ? (int)(t - sql) : n;
	return rc;
}
int dpsql_hs_finalize(api_t *a, sqlite3_stmt *s) { return a->finalize(s); }
int dpsql_hs_reset(api_t *a, sqlite3_stmt *s) { return a->reset(s); }
int dpsql_hs_step(api_t *a, sqlite3_stmt *s) { return a->step(s); }
int dpsql_hs_clear_bindings(api_t *a, sqlite3_stmt *s) { return a->clear_bindings(s); }
int dpsql_hs_bind_index(api_t *a, sqlite3_stmt *s, const char *name) { return a->bind_parameter_index(s, name); }
int dpsql_hs_bind_count(api_t *a, sqlite3_stmt *s) { return a->bind_parameter_count(s); }
const char *dpsql_hs_bind_name(api_t *a, sqlite3_stmt *s, int i) { return a->bind_parameter_name(s, i); }
int dpsql_hs_bind_null(api_t *a, sqlite3_stmt *s, int i) { return a->bind_null(s, i); }
int dpsql_hs_bind_int64(api_t *a, sqlite3_stmt *s, int i, sqlite3_int64 v) { return a->bind_int64(s, i, v); }
int dpsql_hs_bind_double(api_t *a, sqlite3_stmt *s, int i, double v) { return a->bind_double(s, i, v); }
int dpsql_hs_bind_text(api_t *a, sqlite3_stmt *s, int i, const char *p, sqlite3_int64 n) {
	return a->bind_text64(s, i, n ? p : "", (sqlite3_uint64)n, SQLITE_TRANSIENT, SQLITE_UTF8);
}
int dpsql_hs_bind_blob(api_t *a, sqlite3_stmt *s, int i, const void *p, sqlite3_int64 n) {
	if (n == 0) return a->bind_zeroblob(s, i, 0);
	return a->bind_blob64(s, i, p, (sqlite3_uint64)n, SQLITE_TRANSIENT);
}
int dpsql_hs_column_count(api_t *a, sqlite3_stmt *s) { return a->column_count(s); }
const char *dpsql_hs_column_name(api_t *a, sqlite3_stmt *s, int i) { return a->column_name(s, i); }
const char *dpsql_hs_column_decltype(api_t *a, sqlite3_stmt *s, int i) { return a->column_decltype(s, i); }
int dpsql_hs_column_type(api_t *a, sqlite3_stmt *s, int i) { return a->column_type(s, i); }
sqlite3_int64 dpsql_hs_column_int64(api_t *a, sqlite3_stmt *s, int i) { return a->column_int64(s, i); }
double dpsql_hs_column_double(api_t *a, sqlite3_stmt *s, int i) { return a->column_double(s, i); }
const void *dpsql_hs_column_text(api_t *a, sqlite3_stmt *s, int i, int *n) {
	const void *p = a->column_text(s, i);
	*n = a->column_bytes(s, i);
	return p;
}
const void *dpsql_hs_column_blob(api_t *a, sqlite3_stmt *s, int i, int *n) {
	const void *p = a->column_blob(s, i);
	*n = a->column_bytes(s, i);
	return p;
}

// dpsql_hs_vfs_name is the name of the VFS the main database of db is opened
// through (the top one of a stack of shims), or NULL.
const char *dpsql_hs_vfs_name(api_t *a, sqlite3 *db, int *rc) {
	sqlite3_vfs *v = 0;
	*rc = a->file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &v);
	return (*rc == SQLITE_OK && v) ? v->zName : 0;
}
const char *dpsql_hs_db_filename(api_t *a, sqlite3 *db) { return a->db_filename(db, "main"); }
