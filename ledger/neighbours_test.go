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

// A per-row (replace-one) release has no add/remove guarantee: the old code
// charged it into any scope and composed it with add/remove entries.
func TestReplaceOneRefusedInAddRemoveScope(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 5, 0, 1e-5))
	c := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Sensitivity: 2, Sigma: 4, Neighbours: mechanism.ReplaceOne}}
	_, err := l.Charge(ctx, c, nil)
	if !errors.Is(err, accountant.ErrNeighbours) {
		t.Fatalf("replace-one entry in an add/remove scope: %v, want ErrNeighbours", err)
	}
	for _, want := range []string{`scope "default" protects add/remove neighbours`, "private only for replace-one neighbours", "nothing was charged", "dp_init(1.0, 1e-5, 'rows', 'replace_one')", "--neighbours replace_one"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n)
	if n != 0 {
		t.Errorf("%d charges after the refusal", n)
	}
	// The same release goes into a replace-one scope, as stated.
	rb := mustBudget(t, "rows", 1, 0, 1e-5)
	rb.Neighbours = mechanism.ReplaceOne
	if err := l.Init(ctx, rb); err != nil {
		t.Fatal(err)
	}
	c.Scope = "rows"
	if r, err := l.Charge(ctx, c, nil); err != nil || r.Mu != 0.5 {
		t.Errorf("replace-one entry in a replace-one scope: %+v, %v; want mu 0.5", r, err)
	}
	if st, err := ReadStatus(ctx, db, "rows"); err != nil || st.Neighbours != mechanism.ReplaceOne {
		t.Errorf("status of a replace-one scope: %+v, %v", st, err)
	}
	bad := mustBudget(t, "x", 1, 0, 1e-5)
	bad.Neighbours = "swap"
	if err := l.Init(ctx, bad); err == nil || !strings.Contains(err.Error(), "unknown neighbours") {
		t.Errorf("unknown relation: %v", err)
	}
}

func TestAddRemoveEntriesConvertIntoReplaceOneScope(t *testing.T) {
	sub := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.8, Steps: 50}
	subR := sub
	subR.Neighbours = mechanism.ReplaceOne
	for _, tc := range []struct {
		name string
		m    mechanism.Mechanism
		want mechanism.Mechanism // what it costs in a replace-one scope
	}{
		{"gaussian 2 mu", mechanism.Mechanism{Kind: mechanism.KindGaussian, Sensitivity: 1, Sigma: 4, Steps: 4}, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 1}},
		{"external 2 mu", mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: 0.3}, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.6}},
		{"laplace 2 epsilon", mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.2}, mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.4}},
		{"subsampled: the replace-one pair", sub, subR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := mustBudget(t, "rows", 50, 0, 1e-5)
			b.Neighbours = mechanism.ReplaceOne
			l, _, _ := newLedger(t, b)
			r, err := l.Charge(ctx, Charge{Scope: "rows", Mechanism: tc.m}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := accountant.RigorousEpsilon([]mechanism.Mechanism{tc.want}, 1e-5)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Epsilon/want-1) > 1e-6 {
				t.Errorf("epsilon %v, want %v (the converted entry's)", r.Epsilon, want)
			}
			asStated, _ := accountant.RigorousEpsilon([]mechanism.Mechanism{tc.m}, 1e-5)
			if !(r.Epsilon > asStated) {
				t.Errorf("epsilon %v not above the add/remove figure %v", r.Epsilon, asStated)
			}
		})
	}
	// Budget decisions use the converted figure: mu 0.5 add/remove is 1 in
	// a replace-one scope of budget 1, so nothing more fits.
	ctx := context.Background()
	b := mustBudget(t, "rows", 1, 0, 1e-5)
	b.Neighbours = mechanism.ReplaceOne
	l, _, _ := newLedger(t, b)
	c := Charge{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5}}
	if r, err := l.Charge(ctx, c, nil); err != nil || r.MuSpent != 1 {
		t.Fatalf("mu 0.5 in a replace-one scope: %+v %v, want mu_spent 1", r, err)
	}
	c.Mechanism.Mu = 0.01
	if _, err := l.Charge(ctx, c, nil); !errors.Is(err, accountant.ErrBudget) {
		t.Errorf("past the converted budget: %v", err)
	}
}
