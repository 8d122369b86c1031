package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// A charge commits through the ledger's own connection while the statement
// that made it reads the file (design.md, "Charge before release"), which
// SQLite allows in WAL mode only. Reading a file never switches it: the
// switch is made when a charge is about to be written (here, or by package
// ext just before a statement that charges runs), and said once.

// ErrNotWAL reports a file that a charge needs in WAL mode and that could
// not be switched (another connection was reading it).
var ErrNotWAL = errors.New("the file is not in WAL mode")

// WALNotice, when not nil, is told in words when this process switches a
// file to WAL mode for a charge (once: the mode then stays with the file). It prints the message on standard error; programs with a
// place of their own for messages replace it.
var WALNotice = func(message string) {
	fmt.Fprintf(os.Stderr, "dpsql: %s\n", message)
}

// NoteWAL tells WALNotice that path was just switched to WAL mode.
func NoteWAL(path string) {
	if WALNotice != nil {
		WALNotice(fmt.Sprintf("switched %s to WAL mode, which charges need (a charge commits while its statement still reads the file); the file stays in WAL mode", path))
	}
}

// switchToWAL puts the file x opens (x has no open transaction) in WAL mode
// if it is not, without waiting for other connections, and says so (a new,
// empty file is switched without a word); it fails with an error wrapping
// ErrNotWAL when SQLite cannot switch now.
func switchToWAL(ctx context.Context, x ledgerConn, path string) error {
	var mode string
	if err := x.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return err
	}
	if strings.EqualFold(mode, "wal") {
		return nil
	}
	var objects int
	if err := x.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&objects); err != nil {
		return err
	}
	// No waiting: a reader in this process (the statement that makes the
	// charge) holds its lock for as long as this would wait.
	var timeout int
	if err := x.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return err
	}
	if _, err := x.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		return err
	}
	var now string
	err := x.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&now)
	if _, rerr := x.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA busy_timeout = %d`, timeout)); rerr != nil && err == nil {
		err = rerr
	}
	if err == nil && strings.EqualFold(now, "wal") {
		if objects > 0 {
			NoteWAL(path)
		}
		return nil
	}
	why := "another connection is reading it"
	if err != nil {
		why = err.Error()
	}
	return fmt.Errorf("%w: %s is in journal mode %q and cannot be switched now (%s): a charge commits through a connection of its own while "+
		"the statement reads the file, which needs WAL mode; switch the file once with PRAGMA journal_mode=WAL (the mode stays with the file) "+
		"and run the statement again; nothing was charged", ErrNotWAL, path, mode, why)
}

// fileOf returns the path of the file q's main database is.
func fileOf(ctx context.Context, q Queryer) string {
	var f string
	if err := q.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&f); err != nil || f == "" {
		return "the database"
	}
	return f
}

// ensureWAL is switchToWAL on the ledger's connection, before a charge's
// transaction, once the refusals that need no write passed
// (checkBeforeSwitch; d is the charge, decided there).
// Once found in WAL mode the file is not asked again: it stays so unless
// someone switches it back, and a charge in another mode is refused by
// SQLite's locks (the reading statement's), not allowed.
func (l *Ledger) ensureWAL(ctx context.Context, d *Decision) error {
	if l.wal.Load() {
		return nil
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return l.lockError(err)
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return l.lockError(err)
	}
	if !strings.EqualFold(mode, "wal") {
		if err := l.checkBeforeSwitch(ctx, conn, d, false); err != nil {
			return err
		}
	}
	if err := switchToWAL(ctx, conn, l.path); err != nil {
		return err
	}
	l.wal.Store(true)
	return nil
}
