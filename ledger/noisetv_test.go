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

// The samplers' recorded error (noise_tv) is paid from delta: the old code
// recorded it and never used it.
func TestNoiseTVIsPaidFromDelta(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	// mu = 0.9 fits a budget of 1 by GDP; with noise_tv = 1e-7 the release
	// is only (epsilon, delta' + (1 + e^epsilon) 1e-7)-DP, and at
	// any epsilon up to the budget's 4.38 that term, up to 4e-5, leaves too
	// little of delta = 1e-5.
	c := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.9}, Details: mechanism.Gaussian{Dim: 1, NoiseTV: 5e-7}}
	_, err := l.Charge(ctx, c, nil)
	var be *accountant.BudgetError
	if !errors.As(err, &be) || be.NoiseTV != 5e-7 || !strings.Contains(err.Error(), "noise samplers") {
		t.Fatalf("charge whose sampler error takes delta: %v", err)
	}
	// A negligible sampler error changes nothing.
	c.Details = mechanism.Gaussian{Dim: 1, NoiseTV: 1e-14}
	r, err := l.Charge(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The figures it reports include the term: epsilon at 1e-5 with
	// noise_tv paid is the smallest root of delta(eps) + (1+e^eps) tv = 1e-5.
	st, err := l.Remaining(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, db); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if r.Rigorous || st.EpsilonRigorous.Valid {
		t.Errorf("a Gaussian-only scope reports a rigorous figure: %+v %+v", r, st)
	}
	// An embedder's record may hold anything: a bad noise_tv is refused.
	for _, bad := range []any{-1.0, math.Inf(1), "small"} {
		c.Details = map[string]any{"noise_tv": bad}
		want := "noise_tv"
		if _, ok := bad.(float64); ok && math.IsInf(bad.(float64), 0) {
			want = "infinite" // JSON has no infinity: the record cannot be encoded
		}
		if _, err := l.Charge(ctx, c, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("noise_tv %v: %v", bad, err)
		}
	}
}

// dp_budget_remaining never shows more than one more Gaussian call can
// spend: the old figure sqrt(budget^2 - mu_spent^2) ignored the rigorous
// check of mixed scopes and the conversion of replace-one scopes.
func TestGaussianRoomIsSpendable(t *testing.T) {
	ctx := context.Background()
	rb := mustBudget(t, "rows", 2, 0, 1e-5)
	rb.Neighbours = mechanism.ReplaceOne
	for _, tc := range []struct {
		name  string
		b     accountant.Budget
		prior []mechanism.Mechanism
	}{
		{"gaussian", mustBudget(t, "s", 1, 0, 1e-5), []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.6}}},
		{"mixed", mustBudget(t, "s", 0, 3, 1e-5), []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.8, Steps: 100}}},
		{"replace-one", func() accountant.Budget { b := rb; b.Scope = "s"; return b }(), []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, db, _ := newLedger(t, tc.b)
			for _, m := range tc.prior {
				if _, err := l.Charge(ctx, Charge{Scope: "s", Mechanism: m}, nil); err != nil {
					t.Fatal(err)
				}
			}
			st, err := l.Remaining(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			room := st.MuRemaining
			old, _ := ReadStatus(ctx, db, "s") // the GDP figure dp_scope_state keeps
			if !(room > 0) || room > old.MuRemaining {
				t.Errorf("room %v, GDP figure %v", room, old.MuRemaining)
			}
			over := Charge{Scope: "s", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: room * 1.01}}
			if _, err := l.Charge(ctx, over, nil); !errors.Is(err, accountant.ErrBudget) {
				t.Errorf("1.01 times the room %v: %v, want a refusal", room, err)
			}
			if _, err := l.Charge(ctx, Charge{Scope: "s", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: room}}, nil); err != nil {
				t.Errorf("exactly the room %v: %v", room, err)
			}
			t.Logf("room %v, GDP figure %v", room, old.MuRemaining)
		})
	}
}

// Once a scope holds a non-Gaussian entry its guarantee is (epsilon, delta),
// not a mu curve: dp_budget_status says so.
func TestGuaranteeColumn(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 2, 0, 1e-5))
	guarantee := func() string {
		var g string
		if err := db.QueryRow(`SELECT guarantee FROM dp_budget_status WHERE scope = 'default'`).Scan(&g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	if _, err := l.Charge(ctx, gauss(0.5), nil); err != nil {
		t.Fatal(err)
	}
	if g := guarantee(); g != "mu-GDP" {
		t.Errorf("Gaussian-only scope: guarantee %q", g)
	}
	if _, err := l.Charge(ctx, subsampled(0.01, 1, 10), nil); err != nil {
		t.Fatal(err)
	}
	st, _ := ReadStatus(ctx, db, "default")
	if g := guarantee(); g != "(epsilon, delta)" || !st.EpsilonRigorous.Valid {
		t.Errorf("mixed scope: guarantee %q, Status.EpsilonRigorous %v", g, st.EpsilonRigorous)
	}
}
