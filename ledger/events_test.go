package ledger

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
)

func TestAppendRecords(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if _, err := l.Charge(ctx, gauss(0.6), nil); err != nil {
		t.Fatal(err)
	}
	// A record of the whole file in an uncapped file (dp_budget has no '*').
	pol, err := l.Append(ctx, Record{Kind: EventPolicy, Scope: accountant.FileScope, Subject: "patients", Params: map[string]any{"action": "protect", "privacy_unit": "pid"}, Query: "dpsql protect"}, func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE side(x)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Mu != 0 || pol.Kind != EventPolicy || pol.Mechanism != "patients" {
		t.Errorf("record written as %+v", pol)
	}
	if _, err := l.Append(ctx, Record{Kind: EventAccount, Scope: "default", Subject: "alice", Params: struct {
		Action string `json:"action"`
	}{"add"}}, nil); err != nil {
		t.Fatal(err)
	}
	// The ledger connection enforces foreign keys again after the record.
	if _, err := l.Append(ctx, Record{Kind: EventOutcome, Scope: "nosuch", Subject: "job-1", Params: map[string]any{}}, nil); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a record of a scope without a budget: %v, want a refusal naming it", err)
	}
	var fk int
	if err := l.db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("ledger connection after a file record: foreign_keys = %d (%v), want 1", fk, err)
	}
	// Records spend nothing: the scope's room is what the charge left.
	l.forget()
	st, err := l.Remaining(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if d := st.MuRemaining - 0.8; d > 1e-9 || d < -1e-9 {
		t.Errorf("mu remaining %g after a charge of 0.6 and two records, want 0.8", st.MuRemaining)
	}
	rep, err := VerifyAt(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 2 || rep.Charges != 1 || rep.Budgets != 1 {
		t.Errorf("verify counted %+v, want 2 records, 1 charge, 1 budget", rep)
	}
	got, err := ReadRecords(ctx, db, EventPolicy)
	if err != nil || len(got) != 1 || got[0].Hash != pol.Hash {
		t.Errorf("ReadRecords(policy) = %v, %v; want the one policy row", got, err)
	}
}

func TestAppendRefusals(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	for _, tc := range []struct {
		name string
		rec  Record
		want string
	}{
		{"charge kind", Record{Kind: EventCharge, Scope: "default", Subject: "x", Params: map[string]any{}}, "not a kind of record"},
		{"budget kind", Record{Kind: EventBudget, Scope: "default", Subject: "x", Params: map[string]any{}}, "not a kind of record"},
		{"no subject", Record{Kind: EventPolicy, Scope: accountant.FileScope, Params: map[string]any{}}, "needs a subject"},
		{"array params", Record{Kind: EventPolicy, Scope: accountant.FileScope, Subject: "t", Params: []int{1}}, "JSON object"},
		{"null params", Record{Kind: EventPolicy, Scope: accountant.FileScope, Subject: "t"}, "JSON object"},
		{"unmarshalable", Record{Kind: EventPolicy, Scope: accountant.FileScope, Subject: "t", Params: map[string]any{"f": func() {}}}, "content"},
	} {
		if _, err := l.Append(ctx, tc.rec, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A failing side write leaves no record.
	boom := errors.New("boom")
	if _, err := l.Append(ctx, Record{Kind: EventPolicy, Scope: accountant.FileScope, Subject: "t", Params: map[string]any{}}, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("failing side write: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind <> 'budget'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows besides the budget after refusals (%v), want 0", n, err)
	}
}

// Someone who writes the file cannot pass a spend off as a record: a
// well-hashed record row with mu > 0, or one whose params are not an
// object, breaks the chain for Verify and for the next charge.
func TestForgedRecordBreaksTheChain(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		row  Row
		want string
	}{
		{"mu", Row{Kind: EventPolicy, Scope: "default", Mechanism: "t", Mu: 0.5, Params: `{}`}, "spends nothing"},
		{"params", Row{Kind: EventOutcome, Scope: "default", Mechanism: "t", Params: `[1]`}, "JSON object"},
		{"subject", Row{Kind: EventAccount, Scope: "default", Params: `{}`}, "no subject"},
		{"kind", Row{Kind: "grant", Scope: "default", Mechanism: "t", Params: `{}`}, "unknown event kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
			if _, err := appendRow(ctx, db, tc.row); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(ctx, db); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify: %v, want %q", err, tc.want)
			}
			l.forget()
			if _, err := l.Charge(ctx, gauss(0.1), nil); err == nil {
				t.Error("a charge after a forged record went through")
			}
		})
	}
}
