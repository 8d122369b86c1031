package ledger

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// A quote is charged exactly: a quote priced at another delta than the
// scope's, or a charge naming another mechanism than its quote, is refused
// and charges nothing; an accepted one records the quote's figures, and its
// noise_tv is paid from delta.
func TestChargeQuote(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 100}
	type rec struct {
		Into string `json:"into"`
	}
	wrong, err := mechanism.NewQuote(m, 1e-6, accountant.Price, 0, rec{"t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, Charge{Scope: "default", Quote: &wrong, Query: "q"}, nil); err == nil || !strings.Contains(err.Error(), "quoted at delta") {
		t.Errorf("a quote at delta 1e-6 in a scope of delta 1e-5: %v", err)
	}
	q, err := mechanism.NewQuote(m, 1e-5, accountant.Price, 1e-10, rec{"t"})
	if err != nil {
		t.Fatal(err)
	}
	other := Charge{Scope: "default", Quote: &q, Query: "q"}
	other.Mechanism = mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.01}
	if _, err := l.Charge(ctx, other, nil); err == nil || !strings.Contains(err.Error(), "another mechanism") {
		t.Errorf("a charge naming another mechanism than its quote: %v", err)
	}
	if st, _ := ReadStatus(ctx, db, "default"); st.Entries != 0 {
		t.Fatalf("refused quotes charged %d entries", st.Entries)
	}
	if _, err := l.Charge(ctx, Charge{Scope: "default", Quote: &q, Query: "q"}, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// A subsampled charge is followed by a checkpoint that covers it
	// (replayWeight): the charge is the row before.
	if n := len(rows); n < 2 || rows[n-1].kind() != EventCheckpoint || rows[n-2].kind() != EventCharge {
		t.Fatalf("the last two rows are not the charge and its checkpoint: %+v", rows[max(len(rows)-2, 0):])
	}
	if rec, err := parseCheckpoint(rows[len(rows)-1]); err != nil || rec.Through != rows[len(rows)-2].ID {
		t.Errorf("the checkpoint after the subsampled charge covers row %d, want %d (%v)", rec.Through, rows[len(rows)-2].ID, err)
	}
	var params map[string]any
	if err := json.Unmarshal([]byte(rows[len(rows)-2].Params), &params); err != nil {
		t.Fatal(err)
	}
	if params["into"] != "t" || params[mechanism.KeyQuoteEpsilon] != q.Epsilon || params[mechanism.KeyQuoteDelta] != 1e-5 ||
		params[mechanism.KeyNoiseTV] != 1e-10 || params["mechanism"] != mechanism.KindSubsampledGaussian {
		t.Errorf("row params %v", params)
	}
	// The scope's epsilon (one entry) is the quote's with its noise_tv paid
	// from delta: at least the quoted epsilon.
	eps, err := l.ScopeEpsilon(ctx, "default", 1e-5)
	if err != nil || eps != q.Epsilon {
		t.Errorf("scope epsilon %v (%v), quoted %v", eps, err, q.Epsilon)
	}
	st, _ := ReadStatus(ctx, db, "default")
	if !st.EpsilonRigorous.Valid || st.EpsilonRigorous.Float64 < q.Epsilon {
		t.Errorf("recorded epsilon_rigorous %v below the quote's %v", st.EpsilonRigorous, q.Epsilon)
	}
}
