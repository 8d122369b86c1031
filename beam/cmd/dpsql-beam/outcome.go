package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dpsql/dpsql/ledger"
)

// A job's life in the ledger. The charge is a ledger row of kind "charge"
// whose params carry "job" (the job id) and "engine": "beam"; it commits
// before the pipeline runs. Exactly one record of kind "outcome"
// (ledger.EventOutcome, subject the job id) follows it: "released",
// appended in the same IMMEDIATE transaction that creates and fills the
// release table, or "failed", appended alone. A charge with no outcome is a
// job whose driver died before it could say (its budget is spent either way).
//
// Files written by earlier versions keep their dp_beam_jobs table (append-only
// by its own triggers, so it is left as it is, readable, and no longer
// written): outcomes of the jobs charged since are ledger records, in the hash
// chain that `dpsql audit verify` checks.

// Job statuses, as an outcome record's "status".
const (
	statusReleased = "released"
	statusFailed   = "failed"
)

// Outcome is the content (params) of a job's outcome record.
type Outcome struct {
	Status string `json:"status"` // statusReleased or statusFailed
	// Charge is the ledger id of the job's charge, the row this outcome
	// belongs to.
	Charge int64  `json:"charge_id"`
	Into   string `json:"into"`         // the release table
	Rows   int    `json:"rows_written"` // rows written to Into; 0 when the job failed
	Error  string `json:"error,omitempty"`
}

// appendOutcome appends the job's outcome record to the ledger and runs also
// (may be nil; the release table's import) in the same transaction, so the
// release exists exactly when its "released" record does.
func appendOutcome(ctx context.Context, l *ledger.Ledger, scope, job, command string, o Outcome, also func(tx *sql.Tx) error) error {
	_, err := l.Append(ctx, ledger.Record{Kind: ledger.EventOutcome, Scope: scope, Subject: job, Params: o, Query: command}, also)
	if err != nil {
		return fmt.Errorf("recording job %s as %s: %w", job, o.Status, err)
	}
	return nil
}

// recordFailure appends a "failed" outcome, even after ctx is cancelled
// (an interrupted job's charge stays, and says why).
func recordFailure(ctx context.Context, l *ledger.Ledger, scope, job, command string, chargeID int64, into string, cause error) error {
	return appendOutcome(context.WithoutCancel(ctx), l, scope, job, command,
		Outcome{Status: statusFailed, Charge: chargeID, Into: into, Error: cause.Error()}, nil)
}
