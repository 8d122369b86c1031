// Package sqliteh holds SQLite's public C headers (sqlite3.h and
// sqlite3ext.h of SQLite 3.54.1, in the public domain, as go-sqlite3 v1.14.53
// ships them) and dpsqlapi.h, for dpsql's cgo packages that call SQLite through
// an extension API table instead of linking SQLite's symbols. Include them with
//
//	#cgo CFLAGS: -I${SRCDIR}/<path to>/internal/sqliteh
//
// The headers declare the newest routines; whether the running SQLite has one is
// asked at run time (DPSQL_HAS in dpsqlapi.h), never assumed from the headers.
// The package has no Go code of its own.
package sqliteh
