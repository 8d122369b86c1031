// The entry point of the loadable extension dp0: SQLite derives its name,
// sqlite3_dp_init, from the file name dp0.so. It keeps the host's API table,
// through which every call into SQLite goes (one SQLite in the process), and
// hands the connection to the Go side.
#include <stdlib.h>
#define DPSQL_API dpsql_dp0_api
#include "dpsqlapi.h"
DPSQL_API_DEFINE;

extern char *dp0Init(void *db, void *api, int *again);
extern void dp0Forget(void *db);

// dp0_loaded() names what is loaded; dropping it, which SQLite does when the
// connection closes, drops dpsql's state of the connection.
static void dp0_loaded(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
	sqlite3_result_text(ctx, "dp0: dpsql's functions in curator mode", -1, SQLITE_STATIC);
}

static void dp0_closed(void *db) { dp0Forget(db); }

int sqlite3_dp_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
	SQLITE_EXTENSION_INIT2(pApi);
	// sqlfuncs needs 3.34 (sqlite3_txn_state); the ledger's connection, 3.15
	// (SQLITE_FCNTL_VFS_POINTER, to open the file through the host's VFS).
	if (sqlite3_libversion_number() < 3034000) {
		*pzErrMsg = sqlite3_mprintf("dp0 needs SQLite 3.34 or later, and this host runs %s", sqlite3_libversion());
		return SQLITE_ERROR;
	}
	int again = 0;
	char *err = dp0Init(db, (void *)pApi, &again);
	if (err) {
		*pzErrMsg = sqlite3_mprintf("%s", err);
		free(err);
		return SQLITE_ERROR;
	}
	if (again) // loaded twice on one connection: already registered
		return SQLITE_OK_LOAD_PERMANENTLY;
	int rc = sqlite3_create_function_v2(db, "dp0_loaded", 0, SQLITE_UTF8 | SQLITE_DETERMINISTIC, db, dp0_loaded, 0, 0, dp0_closed);
	if (rc != SQLITE_OK) {
		dp0Forget(db);
		*pzErrMsg = sqlite3_mprintf("dp0: registering dp0_loaded: %s", sqlite3_errstr(rc));
		return rc;
	}
	// The Go runtime cannot be unloaded.
	return SQLITE_OK_LOAD_PERMANENTLY;
}
