package hostsql

import (
	"errors"

	"github.com/dpsql/dpsql/internal/sqlite"
)

// minVersion is the oldest SQLite whose API table has every routine the
// driver calls (bind_text64 and bind_blob64 came in 3.8.7; changes64, 3.37,
// is called only when present).
const minVersion = 3008007

// Error is an error SQLite reported: its message, primary and extended
// result codes (package sqlite's).
type Error = sqlite.Error

// Code is a primary SQLite result code, usable as an errors.Is target.
type Code = sqlite.Code

// Result codes an application tells apart.
const (
	ErrBusy       = sqlite.ErrBusy       // SQLITE_BUSY: another connection holds the lock
	ErrLocked     = sqlite.ErrLocked     // SQLITE_LOCKED: a conflict within this connection's cache
	ErrReadOnly   = sqlite.ErrReadOnly   // SQLITE_READONLY
	ErrInterrupt  = sqlite.ErrInterrupt  // SQLITE_INTERRUPT
	ErrCantOpen   = sqlite.ErrCantOpen   // SQLITE_CANTOPEN
	ErrConstraint = sqlite.ErrConstraint // SQLITE_CONSTRAINT
)

// ErrNotWAL is wrapped by the error of opening a connection with RequireWAL
// set on a file that is not in WAL mode.
var ErrNotWAL = errors.New("the database file is not in WAL mode")
