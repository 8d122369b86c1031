// Declarations of hostsql.c.
#ifndef DPSQL_HOSTSQL_H
#define DPSQL_HOSTSQL_H
#include <stdint.h>
#include <stdlib.h>
#include "sqlite3ext.h"
typedef const sqlite3_api_routines api_t;
int dpsql_hs_libversion(api_t *a);
int dpsql_hs_threadsafe(api_t *a);
int dpsql_hs_open(api_t *a, const char *name, sqlite3 **db, int flags, const char *vfs);
int dpsql_hs_close(api_t *a, sqlite3 *db);
int dpsql_hs_errcode(api_t *a, sqlite3 *db);
int dpsql_hs_extended_errcode(api_t *a, sqlite3 *db);
const char *dpsql_hs_errmsg(api_t *a, sqlite3 *db);
const char *dpsql_hs_errstr(api_t *a, int rc);
int dpsql_hs_extended_result_codes(api_t *a, sqlite3 *db);
int dpsql_hs_busy_timeout(api_t *a, sqlite3 *db, int ms);
void dpsql_hs_interrupt(api_t *a, sqlite3 *db);
int dpsql_hs_get_autocommit(api_t *a, sqlite3 *db);
sqlite3_int64 dpsql_hs_last_insert_rowid(api_t *a, sqlite3 *db);
sqlite3_int64 dpsql_hs_changes(api_t *a, sqlite3 *db);
int dpsql_hs_prepare(api_t *a, sqlite3 *db, const char *sql, int n, sqlite3_stmt **st, int *tail);
int dpsql_hs_finalize(api_t *a, sqlite3_stmt *s);
int dpsql_hs_reset(api_t *a, sqlite3_stmt *s);
int dpsql_hs_step(api_t *a, sqlite3_stmt *s);
int dpsql_hs_clear_bindings(api_t *a, sqlite3_stmt *s);
int dpsql_hs_bind_index(api_t *a, sqlite3_stmt *s, const char *name);
int dpsql_hs_bind_count(api_t *a, sqlite3_stmt *s);
const char *dpsql_hs_bind_name(api_t *a, sqlite3_stmt *s, int i);
int dpsql_hs_bind_null(api_t *a, sqlite3_stmt *s, int i);
int dpsql_hs_bind_int64(api_t *a, sqlite3_stmt *s, int i, sqlite3_int64 v);
int dpsql_hs_bind_double(api_t *a, sqlite3_stmt *s, int i, double v);
int dpsql_hs_bind_text(api_t *a, sqlite3_stmt *s, int i, const char *p, sqlite3_int64 n);
int dpsql_hs_bind_blob(api_t *a, sqlite3_stmt *s, int i, const void *p, sqlite3_int64 n);
int dpsql_hs_column_count(api_t *a, sqlite3_stmt *s);
const char *dpsql_hs_column_name(api_t *a, sqlite3_stmt *s, int i);
const char *dpsql_hs_column_decltype(api_t *a, sqlite3_stmt *s, int i);
int dpsql_hs_column_type(api_t *a, sqlite3_stmt *s, int i);
sqlite3_int64 dpsql_hs_column_int64(api_t *a, sqlite3_stmt *s, int i);
double dpsql_hs_column_double(api_t *a, sqlite3_stmt *s, int i);
const void *dpsql_hs_column_text(api_t *a, sqlite3_stmt *s, int i, int *n);
const void *dpsql_hs_column_blob(api_t *a, sqlite3_stmt *s, int i, int *n);
const char *dpsql_hs_vfs_name(api_t *a, sqlite3 *db, int *rc);
const char *dpsql_hs_db_filename(api_t *a, sqlite3 *db);
#endif
