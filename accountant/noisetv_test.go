package accountant

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

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
	c := Charge{Scope: "default", Mechanism: Mechanism{Kind: KindGaussian, Mu: 0.9}, Details: mechanism.Gaussian{Dim: 1, NoiseTV: 5e-7}}
	_, err := l.Charge(ctx, c, nil)
	var be *BudgetError
	if !errors.As(err, &be) || be.NoiseTV != 5e-7 || !strings.Contains(err.Error(), "noise_tv") {
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

func TestCertifiedEpsilon(t *testing.T) {
	comp, err := (Composition{}).Add(Mechanism{Kind: KindGaussian, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	e0, _ := certifiedEpsilon(comp, 1e-5, 0)
	if want, _ := Epsilon(1, 1e-5); math.Abs(e0/want-1) > 1e-12 {
		t.Errorf("tv = 0: %v, want %v", e0, want)
	}
	for _, tv := range []float64{1e-12, 1e-10, 1e-8} {
		e, err := certifiedEpsilon(comp, 1e-5, tv)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := Delta(1, e)
		if got := d + (1+math.Exp(e))*tv; !(e > e0) || got > 1e-5*(1+1e-9) || got < 1e-5*(1-1e-6) {
			t.Errorf("tv %g: epsilon %v, delta(eps) + (1+e^eps) tv = %v, want 1e-5 just reached", tv, e, got)
		}
	}
	if e, _ := certifiedEpsilon(comp, 1e-5, 1e-5); !math.IsInf(e, 1) {
		t.Errorf("a sampler error of all of delta: %v, want +Inf", e)
	}
}

// dp_budget_remaining never shows more than one more Gaussian call can
// spend: the old figure sqrt(budget^2 - mu_spent^2) ignored the rigorous
// check of mixed scopes and the conversion of replace-one scopes.
func TestGaussianRoomIsSpendable(t *testing.T) {
	ctx := context.Background()
	rb := mustBudget(t, "rows", 2, 0, 1e-5)
	rb.Neighbours = ReplaceOne
	for _, tc := range []struct {
		name  string
		b     Budget
		prior []Mechanism
	}{
		{"gaussian", mustBudget(t, "s", 1, 0, 1e-5), []Mechanism{{Kind: KindGaussian, Mu: 0.6}}},
		{"mixed", mustBudget(t, "s", 0, 3, 1e-5), []Mechanism{{Kind: KindSubsampledGaussian, Q: 0.01, Sigma: 0.8, Steps: 100}}},
		{"replace-one", func() Budget { b := rb; b.Scope = "s"; return b }(), []Mechanism{{Kind: KindGaussian, Mu: 0.5}}},
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
			over := Charge{Scope: "s", Mechanism: Mechanism{Kind: KindGaussian, Mu: room * 1.01}}
			if _, err := l.Charge(ctx, over, nil); !errors.Is(err, ErrBudget) {
				t.Errorf("1.01 times the room %v: %v, want a refusal", room, err)
			}
			if _, err := l.Charge(ctx, Charge{Scope: "s", Mechanism: Mechanism{Kind: KindGaussian, Mu: room}}, nil); err != nil {
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
	if g := guarantee(); g != "(epsilon, delta)" || st.Guarantee() != g {
		t.Errorf("mixed scope: guarantee %q, Status.Guarantee %q", g, st.Guarantee())
	}
}
