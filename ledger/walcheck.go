package ledger

import (
	"context"
	"database/sql"
	"fmt"
)

// A file is switched to WAL mode only for a charge that will be written
// (issue 23, part 4): the refusals that need no write lock run first, on a
// read of the file that changes nothing, so that a charge refused for them
// leaves the file as it was (its bytes, and no -wal or -shm file).

// checkBeforeSwitch runs on conn (no open transaction) the refusals a
// charge's transaction would make that need no write lock: no ledger
// (unless creates: dp_init makes one), a newer dpsql's file, objects that
// are not dpsql's, derived tables that disagree with the chain, and, for a
// charge d (nil for none), its budget decision at the chain's head now.
// Each is the error the charge's transaction returns for it. A refusal made
// here, outside the write lock, is right at the moment of the read (a later
// head only adds spend). A file of an earlier schema version is checked for
// its version and objects only: its upgrade, and the other checks, run in
// the charge's transaction after the switch.
func (l *Ledger) checkBeforeSwitch(ctx context.Context, conn *sql.Conn, d *Decision, creates bool) error {
	// One snapshot for every read (BEGIN is deferred: a read lock only).
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		return l.lockError(err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
	v, has, err := schemaVersion(ctx, conn)
	if err != nil {
		return err
	}
	if !has {
		if creates {
			return nil
		}
		return ErrNoLedger
	}
	if v > SchemaVersion {
		return fmt.Errorf("refusing to write to this ledger; nothing was written: %w", newerSchema(v))
	}
	file, err := readMaster(ctx, conn)
	if err != nil {
		return fmt.Errorf("reading the file's schema: %w", err)
	}
	oc, err := checkObjectsIn(file, v)
	if err != nil {
		return fmt.Errorf("refusing to write to this ledger (run `dpsql audit verify`); nothing was written: %w", err)
	}
	if v < SchemaVersion {
		return nil
	}
	fs, err := l.state(ctx, conn)
	if err != nil {
		return err
	}
	if err := checkDerived(ctx, conn, fs, oc.linked); err != nil {
		return fmt.Errorf("refusing to charge (run `dpsql audit verify`); nothing was charged: %w", err)
	}
	if d != nil && (d.fs == nil || d.fs.head != fs.head) {
		d.fs = nil
		if err := d.decideAt(ctx, fs); err != nil {
			return err
		}
	}
	return nil
}

// CheckBeforeWAL runs, on the ledger's connection to the file at path, the
// refusals of a charge that need no write (see checkBeforeSwitch; creates
// when the statement may create the ledger, as dp_init does). Package ext
// calls it before it switches a file to WAL mode for a statement that
// charges, and leaves the file as it is when it fails: the statement's
// charge then refuses with the same error.
func CheckBeforeWAL(ctx context.Context, path string, creates bool) error {
	l, err := OpenLedger(path)
	if err != nil {
		return err
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return l.lockError(err)
	}
	defer conn.Close()
	return l.checkBeforeSwitch(ctx, conn, nil, creates)
}
