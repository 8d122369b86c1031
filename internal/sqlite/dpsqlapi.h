// dpsqlapi.h: SQLite's routines called through an extension API table
// (sqlite3_api_routines), the only way dpsql's C code reaches SQLite. In the
// loadable extension the table is the host's; in Go programs it is the table of
// the SQLite go-sqlite3 links in (captured by package sqlite's automatic
// extension). Either way one copy of SQLite serves the process, which POSIX
// file locking requires. It includes SQLite's sqlite3ext.h, vendored in
// third_party/sqlite.
//
// Its users (package internal/sqlite, and dp0's entry point cmd/dp0/dp0.c) each
// define their own table variable (a C global is not visible across Go
// packages) and include this header with DPSQL_API naming it:
//
//	#define DPSQL_API dpsql_api
//	#include "dpsqlapi.h"
//
// and exactly one of their C files defines it: DPSQL_API_DEFINE.
#ifndef DPSQL_API
#error "define DPSQL_API to the package's API table variable before including dpsqlapi.h"
#endif
#ifndef DPSQL_SQLITEH_DPSQLAPI_H
#define DPSQL_SQLITEH_DPSQLAPI_H
#define sqlite3_api DPSQL_API
#include "sqlite3ext.h"
extern const sqlite3_api_routines *DPSQL_API;
#define DPSQL_API_DEFINE const sqlite3_api_routines *DPSQL_API = 0

// DPSQL_HAS(v) reports whether the table's SQLite is at least version v
// (e.g. 3041000): the table only grows, so a routine newer than the host is
// past its end and must not be called.
#define DPSQL_HAS(v) (sqlite3_api != 0 && sqlite3_api->libversion_number() >= (v))
#endif
