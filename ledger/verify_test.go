package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// forget drops the ledger's memo, as a fresh process starts without one.
func (l *Ledger) forget() { l.remember(nil) }

// The attack of issue 8 §3: an owner of the file copies a cheaper
// composition into dp_scope_state. The old code trusted it whenever its
// through_id matched the scope's last charge.
func TestCopiedInCheaperStateCannotLetAChargeThrough(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 0, 3, 1e-5))
	for _, c := range []Charge{gauss(0.3), subsampled(0.01, 0.7, 120)} { // epsilon 2.46 alone
		if _, err := l.Charge(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Charge(ctx, subsampled(0.01, 0.7, 120), nil); !errors.Is(err, accountant.ErrBudget) {
		t.Fatalf("second release: %v, want a refusal", err)
	}
	if _, err := Verify(ctx, db); err != nil {
		t.Fatalf("intact ledger: %v", err)
	}
	// A composition of one tiny Gaussian, bound to the real last row.
	cheap, err := (accountant.Composition{}).Add(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := cheap.MarshalBinary()
	if _, err := db.Exec(`UPDATE dp_scope_state SET pld = ?, mu_spent = 0.01, mu_remaining = 0.7, epsilon_spent = 0.05, epsilon_rigorous = 0.05`, blob); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{false, true} {
		if fresh {
			l.forget() // another process, which never saw this scope
		}
		if _, err := l.Charge(ctx, subsampled(0.01, 0.7, 120), nil); !errors.Is(err, ErrMismatch) {
			t.Errorf("after copying in a cheaper state (fresh process %v): %v, want a refusal wrapping ErrMismatch", fresh, err)
		}
	}
	if _, err := Verify(ctx, db); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "dp_scope_state") {
		t.Errorf("Verify of a forged dp_scope_state: %v, want ErrMismatch", err)
	}
}

// The attack of issue 8 §3 on budgets: DROP TRIGGER, then raise the budget.
func TestRaisedBudgetCannotLetAChargeThrough(t *testing.T) {
	for _, restore := range []bool{false, true} {
		ctx := context.Background()
		l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
		if _, err := l.Charge(ctx, gauss(0.5), nil); err != nil {
			t.Fatal(err)
		}
		tamper := []string{`DROP TRIGGER dp_budget_no_update`, `UPDATE dp_budget SET mu_budget = 100`}
		if restore { // and put the trigger back, to hide the edit
			tamper = append(tamper, "CREATE TRIGGER dp_budget_no_update "+protectingTriggers[2].body)
		}
		for _, q := range tamper {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		l.forget()
		if _, err := l.Charge(ctx, gauss(5), nil); !errors.Is(err, ErrMismatch) {
			t.Errorf("mu = 5 against a budget of 1 raised to 100 in dp_budget: %v, want a refusal wrapping ErrMismatch", err)
		}
		_, err := Verify(ctx, db)
		want := "trigger dp_budget_no_update is missing"
		if restore {
			want = "dp_budget says scope \"default\" has mu 100"
		}
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify after raising the budget (trigger restored %v): %v, want %q", restore, err, want)
		}
	}
}

func TestVerifyHead(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	empty, err := ReadHead(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if empty.ID != 1 { // the budget event
		t.Errorf("head of a fresh ledger: %v, want row 1 (the budget event)", empty)
	}
	for _, mu := range []float64{0.1, 0.2, 0.3} {
		if _, err := l.Charge(ctx, gauss(mu), nil); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := ReadHead(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	s := kept.String()
	if back, err := ParseHead(s); err != nil || back != kept || kept.ID != 4 || len(kept.Hash) != 64 {
		t.Fatalf("head %q: parsed %v, %v", s, back, err)
	}
	for _, bad := range []string{"", "4", "4:", "x:" + kept.Hash, "-1:" + kept.Hash, "4:" + strings.ToUpper(kept.Hash), "4:" + kept.Hash[:63], "04:" + kept.Hash} {
		if _, err := ParseHead(bad); err == nil {
			t.Errorf("ParseHead(%q) accepted", bad)
		}
	}
	if _, err := VerifyAt(ctx, db, &kept); err != nil {
		t.Fatalf("intact: %v", err)
	}
	if _, err := VerifyAt(ctx, db, &empty); err != nil {
		t.Fatalf("an earlier head: %v", err)
	}
	wrong := kept
	wrong.Hash = strings.Repeat("a", 64)
	if _, err := VerifyAt(ctx, db, &wrong); !errors.Is(err, ErrChainBroken) {
		t.Errorf("a head the chain never had: %v", err)
	}
	// Delete the tail and put the trigger back: the chain still links, but
	// the kept head is gone.
	for _, q := range []string{`DROP TRIGGER dp_ledger_no_delete`, `DELETE FROM dp_ledger WHERE id = 4`,
		"CREATE TRIGGER dp_ledger_no_delete " + protectingTriggers[1].body} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := VerifyAt(ctx, db, &kept); !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), "kept head") {
		t.Errorf("deleted tail: %v, want the kept head missing", err)
	}
	// This process saw row 4: it refuses to charge on the shortened chain.
	if _, err := l.Charge(ctx, gauss(0.1), nil); !errors.Is(err, ErrChainBroken) {
		t.Errorf("charge after the tail this process wrote was deleted: %v", err)
	}
}

// A trigger that is gone is reported even if nothing was edited yet.
func TestVerifyChecksTriggers(t *testing.T) {
	for _, tr := range protectingTriggers {
		t.Run(tr.name, func(t *testing.T) {
			_, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
			if _, err := db.Exec(`DROP TRIGGER ` + tr.name); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(context.Background(), db); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tr.name) {
				t.Errorf("Verify without %s: %v", tr.name, err)
			}
		})
	}
}

// ParseHead reads user input (dpsql audit verify --head): it never panics,
// and what it accepts prints back exactly.
func FuzzParseHead(f *testing.F) {
	f.Add("0:" + GenesisHash)
	f.Add("12:" + strings.Repeat("ab", 32))
	f.Add("1:xyz")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHead(s)
		if err != nil {
			return
		}
		if h.String() != strings.TrimSpace(s) {
			t.Errorf("ParseHead(%q) = %v, prints %q", s, h, h.String())
		}
	})
}
