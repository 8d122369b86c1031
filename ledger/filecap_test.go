package ledger

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// Scopes all protect the same people: the file's total composes every charge,
// and the owner's cap on it binds every scope.
func TestFileTotalAndCap(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "a", 1, 0, 1e-5))
	if err := l.Init(ctx, mustBudget(t, "b", 1, 0, 1e-6)); err != nil {
		t.Fatal(err)
	}
	charge := func(scope string, mu float64) error {
		_, err := l.Charge(ctx, Charge{Scope: scope, Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu}}, nil)
		return err
	}
	if err := charge("a", 0.6); err != nil {
		t.Fatal(err)
	}
	// Without a cap the total is shown, not enforced.
	st, err := ReadStatus(ctx, db, accountant.FileScope)
	if err != nil {
		t.Fatal(err)
	}
	if st.MuSpent != 0.6 || !math.IsInf(st.MuBudget, 1) || st.Entries != 1 || st.Delta != 1e-6 {
		t.Errorf("uncapped total: %+v", st)
	}
	if _, err := l.Charge(ctx, Charge{Scope: accountant.FileScope, Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.1}}, nil); err == nil {
		t.Error("a charge to the file's total itself was accepted")
	}
	// The owner caps the total at mu = 1: 0.6 and 0.8 fit, nothing more.
	if err := l.Init(ctx, mustBudget(t, accountant.FileScope, 1, 0, 1e-5)); err != nil {
		t.Fatal(err)
	}
	if err := l.Init(ctx, mustBudget(t, accountant.FileScope, 5, 0, 1e-5)); err == nil || !strings.Contains(err.Error(), "already has a budget") {
		t.Errorf("a second cap: %v", err)
	}
	if err := charge("b", 0.8); err != nil {
		t.Fatalf("0.8 in b after 0.6 in a, cap 1: %v", err)
	}
	err = charge("b", 0.1) // b alone has room (sqrt(1 - 0.64) = 0.6), the file has none
	var be *accountant.BudgetError
	if !errors.As(err, &be) || be.Scope != accountant.FileScope || !strings.Contains(err.Error(), "whole file") {
		t.Fatalf("past the file's cap: %v", err)
	}
	st, _ = ReadStatus(ctx, db, accountant.FileScope)
	if math.Abs(st.MuSpent-1) > 1e-12 || st.MuBudget != 1 || st.Entries != 2 {
		t.Errorf("capped total: %+v", st)
	}
	r, err := VerifyAt(ctx, db, nil)
	if err != nil || r.Scopes != 3 || r.Budgets != 3 {
		t.Fatalf("Verify: %+v, %v", r, err)
	}
	// The cap is a chain event: raising it in dp_budget changes nothing, and
	// a charge refuses the file whose dp_budget disagrees with the chain.
	for _, q := range []string{`DROP TRIGGER dp_budget_no_update`, `UPDATE dp_budget SET mu_budget = 100 WHERE scope = '*'`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	l.forget()
	if err := charge("b", 0.1); !errors.Is(err, ErrMismatch) {
		t.Errorf("after raising the cap in dp_budget: %v, want a refusal wrapping ErrMismatch", err)
	}
}

// A replace-one scope in a file whose cap protects add/remove neighbours
// cannot charge: the cap has no guarantee for it.
func TestAddRemoveCapRefusesReplaceOne(t *testing.T) {
	ctx := context.Background()
	l, _, _ := newLedger(t, mustBudget(t, accountant.FileScope, 3, 0, 1e-5))
	rb := mustBudget(t, "rows", 1, 0, 1e-5)
	rb.Neighbours = mechanism.ReplaceOne
	if err := l.Init(ctx, rb); err != nil {
		t.Fatal(err)
	}
	_, err := l.Charge(ctx, Charge{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.1, Neighbours: mechanism.ReplaceOne}}, nil)
	if !errors.Is(err, accountant.ErrNeighbours) {
		t.Errorf("replace-one charge under an add/remove cap: %v", err)
	}
}

// A new scope or cap can change the total's relation or budget: its derived
// row follows, so the file still verifies.
func TestNewScopeKeepsTotalVerifiable(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "a", 1, 0, 1e-5))
	if _, err := l.Charge(ctx, Charge{Scope: "a", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.3}}, nil); err != nil {
		t.Fatal(err)
	}
	rb := mustBudget(t, "rows", 1, 0, 1e-5)
	rb.Neighbours = mechanism.ReplaceOne
	if err := l.Init(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, db); err != nil {
		t.Errorf("after a replace-one scope joined: %v", err)
	}
	st, _ := ReadStatus(ctx, db, accountant.FileScope)
	if st.Neighbours != mechanism.ReplaceOne || math.Abs(st.MuSpent-0.6) > 1e-12 {
		t.Errorf("total after a replace-one scope joined: %+v, want mu_spent 0.6 (0.3 counted twice)", st)
	}
	if err := l.Init(ctx, mustBudget(t, accountant.FileScope, 2, 0, 1e-5)); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, db); err != nil {
		t.Errorf("after the cap: %v", err)
	}
}
