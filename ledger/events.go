package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/accountant"
)

// Records: ledger events that spend nothing. They share the hash chain with
// charges and budgets so that an auditor sees, in one ordered and
// tamper-evident history, who changed what the charges rely on: the owner's
// protection policies, the analyst accounts of `dpsql serve`, the outcomes of
// jobs charged before they ran (Beam). The ledger knows their kinds (a
// file holding a kind this code does not know is refused, the safe
// direction), checks that they carry mu = 0 and a JSON object, and skips them
// when it accounts a scope; the packages that write them check their content.

// Kinds of record (dp_ledger.kind), beside EventCharge and EventBudget.
const (
	EventPolicy  = "policy"  // the owner protected, changed or unprotected a table (package protect)
	EventAccount = "account" // an analyst account was added or revoked (dpsql serve)
	EventOutcome = "outcome" // the outcome of a job whose charge was committed before it ran (dpsql-beam)
)

// recordKinds are the kinds Append accepts and the chain check knows.
var recordKinds = map[string]bool{EventPolicy: true, EventAccount: true, EventOutcome: true}

// IsRecordKind reports whether kind is a kind of record (an event that spends
// nothing).
func IsRecordKind(kind string) bool { return recordKinds[kind] }

// Record is a ledger event that spends nothing.
type Record struct {
	Kind    string // EventPolicy, EventAccount or EventOutcome
	Scope   string // the scope it concerns; FileScope for the whole file
	Subject string // what it is about, kept in dp_ledger.mechanism: a table, an account, a job
	Params  any    // its content, recorded as a JSON object in dp_ledger.params
	Query   string // the statement or command that made it, if any
}

// Append appends rec to the ledger and runs also (may be nil) in the same
// IMMEDIATE transaction, committed before Append returns: a table derived
// from records (dp_policy, say) changes exactly when its record is chained,
// or neither does. A record of a scope needs the scope's budget; a record of
// FileScope needs none.
func (l *Ledger) Append(ctx context.Context, rec Record, also func(tx *sql.Tx) error) (Row, error) {
	if !recordKinds[rec.Kind] {
		return Row{}, fmt.Errorf("ledger: %q is not a kind of record (want %q, %q or %q)", rec.Kind, EventPolicy, EventAccount, EventOutcome)
	}
	if rec.Subject == "" {
		return Row{}, fmt.Errorf("ledger: a %s record needs a subject (the table, account or job it is about)", rec.Kind)
	}
	params, err := json.Marshal(rec.Params)
	if err != nil {
		return Row{}, fmt.Errorf("ledger: recording the %s record's content: %w", rec.Kind, err)
	}
	if err := checkRecordParams(params); err != nil {
		return Row{}, fmt.Errorf("ledger: %s record: %w", rec.Kind, err)
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return Row{}, err
	}
	defer conn.Close()
	if rec.Scope == accountant.FileScope {
		// dp_ledger.scope references dp_budget, which holds FileScope only
		// when the file is capped: a record of the whole file is appended
		// with this connection's foreign-key enforcement off for the insert.
		if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return Row{}, err
		}
		defer func() {
			if _, err := conn.ExecContext(context.Background(), `PRAGMA foreign_keys = ON`); err != nil {
				// Never hand the pool a connection without enforcement.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return Row{}, l.lockError(err)
	}
	defer tx.Rollback()
	oc, err := ensureSchema(ctx, tx, false)
	if err != nil {
		return Row{}, err
	}
	if rec.Scope != accountant.FileScope {
		if _, err := LoadBudget(ctx, tx, rec.Scope); err != nil {
			return Row{}, err
		}
	}
	row, err := appendRow(ctx, tx, Row{Kind: rec.Kind, Scope: rec.Scope, Mechanism: rec.Subject, Params: string(params), Query: rec.Query})
	if err != nil {
		return Row{}, err
	}
	if also != nil {
		if err := also(tx); err != nil {
			return Row{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Row{}, fmt.Errorf("committing the %s record: %w", rec.Kind, err)
	}
	oc.note(l.path)
	return row, nil
}

// checkRecordParams checks that a record's params are one JSON object.
func checkRecordParams(params []byte) error {
	dec := json.NewDecoder(bytes.NewReader(params))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return fmt.Errorf("params must be a JSON object, got %.40s", params)
	}
	if dec.More() {
		return fmt.Errorf("params must be one JSON object, got %.40s", params)
	}
	return nil
}

// checkRecord checks a record row of the chain: mu 0 and a JSON object.
func checkRecord(r Row) error {
	if r.Mu != 0 || math.Signbit(r.Mu) {
		return fmt.Errorf("row %d: a %s record spends nothing, but records mu %g", r.ID, r.Kind, r.Mu)
	}
	if r.Mechanism == "" {
		return fmt.Errorf("row %d: a %s record has no subject", r.ID, r.Kind)
	}
	if err := checkRecordParams([]byte(r.Params)); err != nil {
		return fmt.Errorf("row %d: %s record: %w", r.ID, r.Kind, err)
	}
	return nil
}

// ReadRecords returns the rows of one kind of record in id order, after
// checking the whole chain (ErrChainBroken if it does not hold).
func ReadRecords(ctx context.Context, q Queryer, kind string) ([]Row, error) {
	if !recordKinds[kind] {
		return nil, fmt.Errorf("ledger: %q is not a kind of record", kind)
	}
	rows, err := ReadLedger(ctx, q)
	if err != nil {
		return nil, err
	}
	if _, err := checkChain(rows); err != nil {
		return nil, err
	}
	var out []Row
	for _, r := range rows {
		if r.kind() == kind {
			out = append(out, r)
		}
	}
	return out, nil
}
