// Package sqliteh holds dpsqlapi.h, dpsql's own header for its cgo packages
// that call SQLite through an extension API table instead of linking SQLite's
// symbols. It includes SQLite's sqlite3ext.h, vendored in third_party/sqlite;
// include both folders:
//
//	#cgo CFLAGS: -I${SRCDIR}/<path to>/internal/sqliteh -I${SRCDIR}/<path to>/third_party/sqlite
//
// The headers declare the newest routines; whether the running SQLite has one is
// asked at run time (DPSQL_HAS in dpsqlapi.h), never assumed from the headers.
// The package has no Go code of its own.
package sqliteh
