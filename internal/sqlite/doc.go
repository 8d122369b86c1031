// Package sqlite is dpsql's one door to SQLite's C API. Every call dpsql
// makes into SQLite goes through an extension API table (a const
// sqlite3_api_routines*), never through SQLite's symbols, so that one copy of
// SQLite serves the process, as POSIX file locking requires: in the loadable
// extension dp0 the table is the host's, which it hands over in its entry
// point (cmd/dp0/dp0.c, then [SetAPI]); in Go programs it is the table of the
// SQLite go-sqlite3 links, handed over to an automatic extension on every
// new connection ([RegisterCapture], [HandleOf]; package linked opens a
// connection to capture it).
//
// The package holds:
//   - the table and its checks: [SetAPI] refuses a SQLite older than dpsql
//     needs (3.34.0) and a second SQLite in the process; newer routines are
//     called only after asking the table's version, which only grows;
//   - [Conn], a connection handle with the table it is reached through: its
//     file, its transaction state, whether its statement is being
//     interrupted ([Conn.Interrupted]), the statement it runs;
//   - the statement helpers, one set for every use: [Conn.Prepare], [Stmt]
//     (bind, step, read a row), and [Conn.Query] for a query nested in a
//     running statement; the database/sql driver over them is package
//     hostsql, beneath this one;
//   - the function shim ([Conn.CreateFunction], func.c): SQLite calls a
//     scalar or an aggregate's step and final in C, which hands a call's
//     arguments to Go in one cgo call and sets the result Go returns;
//   - [Arena], the mmap'd buffers a release aggregate fills with its rows,
//     and [Writeback], Linux's early writeback of the growing WAL.
//
// Its C code includes SQLite's headers, vendored in third_party/sqlite, and
// dpsqlapi.h, dpsql's own. Its one reference to a SQLite symbol,
// sqlite3_auto_extension (capture_link.c), is weak: it resolves against the
// SQLite a Go program links and stays unresolved (and unused) in dp0.
package sqlite
