// Package hostsql is a database/sql driver that calls SQLite only through an
// extension API table (a const sqlite3_api_routines*): in the loadable
// extension dp0 the host's, so that the ledger's own connection is opened by
// the host's SQLite, through the host's VFS, on the host's file. Two copies of
// SQLite in one process break each other's POSIX locks; one copy reached
// through its table does not.
//
// A connection is opened with sqlite3_open_v2 (SQLITE_OPEN_URI, the
// configured VFS) and runs statements with prepare_v2, bind, step, column and
// finalize: package sqlite's connection and statement helpers, the same that
// dpsql's SQL functions use for their nested queries; this package has no C
// of its own. Its DSN is go-sqlite3's for the settings the accountant's ledger
// uses (see [ParseDSN]): _txlock=immediate makes every transaction a BEGIN
// IMMEDIATE, _busy_timeout waits for another connection's lock, and
// _foreign_keys, _journal_mode and _synchronous set their pragmas. A
// context's cancellation interrupts the running statement
// (sqlite3_interrupt). SQLite's failures are [*Error] values carrying its
// message and result codes.
//
// Every routine called is in SQLite 3.8.7's table; newer ones are called only
// after asking the table's version, which only grows.
package hostsql
