package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// jobsSchema is the append-only record of Beam jobs' outcomes, beside the
// ledger. The ledger has no zero-cost entry kind yet, so a job's charge is a
// ledger row (its params carry "job") and its events live here: 'charged' is
// written in the charge's own transaction, then exactly one of 'released'
// (in the transaction that writes the release table) or 'failed'.
const jobsSchema = `
CREATE TABLE IF NOT EXISTS dp_beam_jobs (
  id         INTEGER PRIMARY KEY,
  job        TEXT NOT NULL,
  at         TEXT NOT NULL,
  event      TEXT NOT NULL CHECK (event IN ('charged', 'released', 'failed')),
  ledger_id  INTEGER,
  into_table TEXT NOT NULL,
  detail     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS dp_beam_jobs_job ON dp_beam_jobs(job);
CREATE TRIGGER IF NOT EXISTS dp_beam_jobs_no_update BEFORE UPDATE ON dp_beam_jobs
BEGIN SELECT RAISE(ABORT, 'dp_beam_jobs is append-only: rows cannot be updated'); END;
CREATE TRIGGER IF NOT EXISTS dp_beam_jobs_no_delete BEFORE DELETE ON dp_beam_jobs
BEGIN SELECT RAISE(ABORT, 'dp_beam_jobs is append-only: rows cannot be deleted'); END;
`

// Job events.
const (
	eventCharged  = "charged"
	eventReleased = "released"
	eventFailed   = "failed"
)

// appendJobEvent records one event of a job in tx. ledgerID 0 is recorded as
// NULL (the charge's own row has no id yet when its event is written).
func appendJobEvent(ctx context.Context, tx *sql.Tx, job, event string, ledgerID int64, into, detail string) error {
	if _, err := tx.ExecContext(ctx, jobsSchema); err != nil {
		return fmt.Errorf("creating dp_beam_jobs: %w", err)
	}
	var lid any
	if ledgerID > 0 {
		lid = ledgerID
	}
	at := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	if _, err := tx.ExecContext(ctx, `INSERT INTO dp_beam_jobs(job, at, event, ledger_id, into_table, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		job, at, event, lid, into, detail); err != nil {
		return fmt.Errorf("recording job %s as %s: %w", job, event, err)
	}
	return nil
}

// recordOutcome appends an outcome event in its own transaction.
func recordOutcome(ctx context.Context, db *sql.DB, job, event string, ledgerID int64, into, detail string) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := appendJobEvent(ctx, tx, job, event, ledgerID, into, detail); err != nil {
		return err
	}
	return tx.Commit()
}
