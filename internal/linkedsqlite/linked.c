// The automatic extension that captures the API table of the SQLite
// go-sqlite3 links (sqlite3_auto_extension, which SQLite has had since 3.3.8,
// resolves at the final link against that SQLite).
#include "sqlite3.h"

static const void *dpsql_linked_api;

static int dpsql_linked_capture(sqlite3 *db, char **err, const void *api) {
	__atomic_store_n(&dpsql_linked_api, api, __ATOMIC_RELEASE);
	return SQLITE_OK;
}

int dpsql_linked_register(void) {
	return sqlite3_auto_extension((void (*)(void))dpsql_linked_capture);
}

const void *dpsql_linked_table(void) { return __atomic_load_n(&dpsql_linked_api, __ATOMIC_ACQUIRE); }
