// The one direct call into SQLite's symbols package ext makes (see
// hostapi.go): registering an automatic extension, which SQLite has had since
// 3.3.8. The symbol resolves at the final link against the SQLite go-sqlite3
// links in (its own copy, or the system's with -tags libsqlite3).
#include "sqlite3.h"

extern int dpsql_ext_capture(sqlite3 *db, char **err, const void *api);

int dpsql_ext_register(void) {
	return sqlite3_auto_extension((void (*)(void))dpsql_ext_capture);
}
