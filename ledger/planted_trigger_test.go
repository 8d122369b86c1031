package ledger

import (
	"context"
	"errors"
	"testing"
)

// The attack of whoever wrote the file's schema on the budget: the guard that
// keeps dp_ledger append-only replaced by a harmless trigger of the same name
// (which CREATE TRIGGER IF NOT EXISTS keeps), and a trigger that deletes each
// charge row as it is appended. Each process then finds a chain that verifies
// and no spend in it, and charges again: unlimited spending in a budget of
// mu = 1. A charge must refuse a file whose protecting triggers are not the
// ones dpsql created, and charge nothing.
func TestChargeRefusesPlantedTriggers(t *testing.T) {
	ctx := context.Background()
	_, db, path := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	for _, q := range []string{
		`DROP TRIGGER dp_ledger_no_delete`,
		`CREATE TRIGGER dp_ledger_no_delete BEFORE DELETE ON dp_ledger WHEN 0 BEGIN SELECT 1; END`,
		`CREATE TRIGGER eat AFTER INSERT ON dp_ledger WHEN NEW.kind = 'charge' BEGIN DELETE FROM dp_ledger WHERE id = NEW.id; END`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	granted := 0
	for range 3 { // three processes, each charging mu = 0.9
		_, err := otherProcess(t, path).Charge(ctx, gauss(0.9), nil)
		if err == nil {
			granted++
			continue
		}
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("charge on a file with a replaced guard trigger: %v, want an error wrapping ErrMismatch", err)
		}
	}
	if granted > 0 {
		t.Errorf("%d charges of mu = 0.9 granted in a budget of mu = 1 whose guard trigger was replaced", granted)
	}
}

// The same attack without touching dpsql's triggers: a BEFORE INSERT trigger
// whose RAISE(IGNORE) silently drops each charge row, so the statement
// succeeds and the transaction commits without the spend.
func TestChargeRefusesSwallowedRow(t *testing.T) {
	ctx := context.Background()
	_, db, path := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if _, err := db.Exec(`CREATE TRIGGER swallow BEFORE INSERT ON dp_ledger WHEN NEW.kind = 'charge' BEGIN SELECT RAISE(IGNORE); END`); err != nil {
		t.Fatal(err)
	}
	granted := 0
	for range 3 {
		if _, err := otherProcess(t, path).Charge(ctx, gauss(0.9), nil); err == nil {
			granted++
		}
	}
	if granted > 0 {
		t.Errorf("%d charges of mu = 0.9 granted in a budget of mu = 1 whose charge rows a trigger swallows", granted)
	}
}
