package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// An owner of a copy of the file appends a second, well-hashed budget event
// for a spent scope: no charge may follow it, and Verify must fail even at
// a head the auditor kept before the forgery.
func TestSecondBudgetEventRefused(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 0.5, 0, 1e-5))
	if _, err := l.Charge(ctx, gauss(0.4), nil); err != nil {
		t.Fatal(err)
	}
	kept, err := ReadHead(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"default", accountant.FileScope} {
		if scope == accountant.FileScope { // a cap, then a second one that raises it
			if _, err := appendRow(ctx, db, Row{Kind: EventBudget, Scope: accountant.FileScope, Mechanism: EventBudget, Mu: 0.6, Params: `{"mu_budget":0.6,"delta":0.00001,"neighbours":"add_remove"}`}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := appendRow(ctx, db, Row{Kind: EventBudget, Scope: scope, Mechanism: EventBudget, Mu: 100, Params: `{"mu_budget":100,"delta":0.00001,"neighbours":"add_remove"}`}); err != nil {
			t.Fatal(err)
		}
		l.forget()
		if _, err := l.Charge(ctx, gauss(5), nil); err == nil || !strings.Contains(err.Error(), "second budget event") {
			t.Errorf("%s: a charge after a forged second budget event: %v, want a refusal naming it", scope, err)
		}
		if _, err := VerifyAt(ctx, db, &kept); err == nil || !strings.Contains(err.Error(), "second budget event") {
			t.Errorf("%s: Verify at the kept head after a forged budget event: %v", scope, err)
		}
		if _, err := db.Exec(`DROP TRIGGER dp_ledger_no_delete`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`DELETE FROM dp_ledger WHERE id > ?`, kept.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE TRIGGER dp_ledger_no_delete BEFORE DELETE ON dp_ledger\nBEGIN SELECT RAISE(ABORT, 'dp_ledger is append-only: rows cannot be deleted'); END"); err != nil {
			t.Fatal(err)
		}
	}
}

// A composite whose parts are stated for replace-one neighbours has no
// add/remove guarantee: it is refused in an add/remove scope, as a bare
// replace-one entry is.
func TestCompositeOfReplaceOnePartsRefusedInAddRemoveScope(t *testing.T) {
	ctx := context.Background()
	l, _, _ := newLedger(t, mustBudget(t, "default", 5, 0, 1e-5))
	part := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.9, Neighbours: mechanism.ReplaceOne}
	comp, err := mechanism.Composite(part)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: comp}, nil); !errors.Is(err, accountant.ErrNeighbours) {
		t.Errorf("a composite of a replace-one part in an add/remove scope: %v, want ErrNeighbours", err)
	}
}

// A detail whose key names a mechanism field (in any letter case, as JSON
// decoding matches) would make later processes account the row differently
// from the charge: such a charge is refused.
func TestDetailsCannotChangeTheAccounting(t *testing.T) {
	ctx := context.Background()
	l, _, _ := newLedger(t, mustBudget(t, "default", 5, 0, 1e-5))
	for _, details := range []map[string]any{
		{"Neighbours": "replace_one"},
		{"steps": 50},
		{"parts": []any{}},
		{"MU": 0.001, "note": "x"},
	} {
		c := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 10}, Details: details}
		if details["MU"] != nil || details["steps"] != nil {
			c.Mechanism = mechanism.Mechanism{Kind: mechanism.KindGaussian, Sensitivity: 1, Sigma: 2} // no Mu, one step: details could fill them
		}
		if _, err := l.Charge(ctx, c, nil); err == nil || !strings.Contains(err.Error(), "re-account") {
			t.Errorf("details %v: %v, want a refusal", details, err)
		}
	}
	// Informational details that repeat or sit beside the fields are fine.
	ok := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 10}, Details: map[string]any{"delta": 1e-5, "q": 0.01, "n": 100}}
	if _, err := l.Charge(ctx, ok, nil); err != nil {
		t.Errorf("informational details: %v", err)
	}
}

// PRAGMA user_version is the file's writer's to set: setting it back to 0
// must not switch Verify's budget checks off.
func TestVersionSetBackFailsVerify(t *testing.T) {
	ctx := context.Background()
	_, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if _, err := db.Exec(`PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, db); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "set back") {
		t.Errorf("Verify after user_version = 0: %v", err)
	}
}
