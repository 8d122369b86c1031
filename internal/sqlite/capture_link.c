// The one reference to a SQLite symbol in dpsql (see capture.go):
// registering an automatic extension, which SQLite has had since 3.3.8. The
// symbol is weak: in a Go program it resolves at the final link against the
// SQLite go-sqlite3 links in (its own copy, or the system's with -tags
// libsqlite3); in the loadable extension dp0, which links no SQLite and
// never registers one, it stays unresolved and unused.
#include "sqlite3.h"
#pragma weak sqlite3_auto_extension

extern int dpsql_capture(sqlite3 *db, char **err, const void *api);

// dpsql_register_capture registers dpsql_capture: 0 on success, -1 when the
// program links no SQLite, else SQLite's code.
int dpsql_register_capture(void) {
	if (!sqlite3_auto_extension) return -1;
	return sqlite3_auto_extension((void (*)(void))dpsql_capture);
}
