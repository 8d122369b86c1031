package sqlite

import "fmt"

// Error is an error SQLite reported: its message (sqlite3_errmsg at the
// time), its primary result code and its extended result code.
type Error struct {
	Code         int // primary result code (SQLITE_BUSY = 5, ...)
	ExtendedCode int // extended result code (SQLITE_BUSY_SNAPSHOT = 517, ...)
	Msg          string
}

func (e *Error) Error() string {
	name := codeNames[e.Code]
	if name == "" {
		name = fmt.Sprintf("code %d", e.Code)
	}
	if e.ExtendedCode != e.Code && e.ExtendedCode != 0 {
		return fmt.Sprintf("%s (%s, extended code %d)", e.Msg, name, e.ExtendedCode)
	}
	return fmt.Sprintf("%s (%s)", e.Msg, name)
}

// Is makes errors.Is(err, sqlite.ErrBusy) and the like match by primary
// code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && int(c) == e.Code
}

// Code is a primary SQLite result code, usable as an errors.Is target.
type Code int

func (c Code) Error() string {
	if n := codeNames[int(c)]; n != "" {
		return n
	}
	return fmt.Sprintf("SQLite result code %d", int(c))
}

// Result codes an application tells apart.
const (
	ErrBusy       Code = 5  // SQLITE_BUSY: another connection holds the lock
	ErrLocked     Code = 6  // SQLITE_LOCKED: a conflict within this connection's cache
	ErrReadOnly   Code = 8  // SQLITE_READONLY
	ErrInterrupt  Code = 9  // SQLITE_INTERRUPT
	ErrCantOpen   Code = 14 // SQLITE_CANTOPEN
	ErrConstraint Code = 19 // SQLITE_CONSTRAINT
)

// Codes of a step's outcome that are not errors.
const (
	codeRow  = 100 // SQLITE_ROW
	codeDone = 101 // SQLITE_DONE
)

var codeNames = map[int]string{
	1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT",
	5: "SQLITE_BUSY", 6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY",
	9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR", 11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND",
	13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL", 16: "SQLITE_EMPTY",
	17: "SQLITE_SCHEMA", 18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH",
	21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS", 23: "SQLITE_AUTH", 24: "SQLITE_FORMAT",
	25: "SQLITE_RANGE", 26: "SQLITE_NOTADB", 27: "SQLITE_NOTICE", 28: "SQLITE_WARNING",
}

// messageError is an error whose text is SQLite's message alone, as nested
// queries report it to a function's caller; it unwraps to the *Error.
type messageError struct{ e *Error }

func (m messageError) Error() string { return m.e.Msg }
func (m messageError) Unwrap() error { return m.e }
