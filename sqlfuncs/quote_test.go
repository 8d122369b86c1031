package sqlfuncs

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
	"github.com/dpsql/dpsql/release/dfs"
)

// chargedRow charges q to a fresh ledger's scope "default" (mu 3, delta
// 1e-5, relation rel) and returns the receipt and the row's params as a
// later process reads them.
func chargedRow(t *testing.T, q mechanism.Quote, rel string) (ledger.Receipt, map[string]any) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	l, err := ledger.OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.ReleaseLedger(path) })
	b, err := accountant.NewBudget("default", 3, 0, q.Delta)
	if err != nil {
		t.Fatal(err)
	}
	b.Neighbours = rel
	if err := l.Init(ctx, b); err != nil {
		t.Fatal(err)
	}
	receipt, err := l.Charge(ctx, ledger.Charge{Scope: "default", Quote: &q, Query: "SELECT test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := ledger.ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// The receipt names the charge's row (a checkpoint row may follow it:
	// one follows every subsampled charge).
	var last ledger.Row
	for _, r := range rows {
		if r.ID == receipt.ID {
			last = r
		}
	}
	if last.ID == 0 || (last.Kind != ledger.EventCharge && last.Kind != "") {
		t.Fatalf("the receipt names row %d, which is not a charge row of the ledger (%+v)", receipt.ID, last)
	}
	var params map[string]any
	if err := json.Unmarshal([]byte(last.Params), &params); err != nil {
		t.Fatal(err)
	}
	m, err := mechanism.Parse([]byte(last.Params))
	if err != nil {
		t.Fatal(err)
	}
	// The row re-accounts as the quoted mechanism.
	if eps, err := accountant.Price(m, q.Delta); err != nil || eps != q.Epsilon {
		t.Errorf("the row re-prices at epsilon %v (%v), the quote said %v", eps, err, q.Epsilon)
	}
	return receipt, params
}

// agree checks that every key the summary shares with the row has the same
// value, and that the keys in want are shared.
func agree(t *testing.T, summary any, row map[string]any, want ...string) map[string]any {
	t.Helper()
	b, err := json.Marshal(summary)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for k, v := range s {
		if rv, ok := row[k]; ok {
			rb, _ := json.Marshal(rv)
			sb, _ := json.Marshal(v)
			if string(rb) != string(sb) {
				t.Errorf("key %q: summary %s, ledger row %s", k, sb, rb)
			}
		}
	}
	for _, k := range want {
		if _, ok := row[k]; !ok {
			t.Errorf("the ledger row lacks %q", k)
		}
		if _, ok := s[k]; !ok {
			t.Errorf("the summary lacks %q", k)
		}
	}
	return s
}

// dp_avgmix's summary and ledger row come from one quote and agree: the
// params record's keys, the quoted epsilon (summary epsilon_rigorous, row
// quote_epsilon) and the subsampled part's q and steps.
func TestAvgmixSummaryAgreesWithLedgerRow(t *testing.T) {
	for _, count := range []bool{false, true} {
		p := avgmix.Params{T: 500, Mu: 1, Calibrate: func(q float64, steps int) (float64, error) {
			eps, _ := accountant.Epsilon(1, 1e-5)
			return accountant.CalibrateSubsampledSigma(q, steps, eps, 1e-5)
		}}
		plan, err := avgmix.NewPlan(release.NewNoise(), 1000, 4, 2, p)
		if err != nil {
			t.Fatal(err)
		}
		rec := mechanism.Avgmix{Into: "mixed", N: 1000, NSource: mechanism.NAsserted, TargetEpsilon: 4.4, TargetDelta: 1e-5}
		var prior *mechanism.Mechanism
		if count {
			v := 1003.2
			rec.NSource, rec.NNoisy, rec.MuN = mechanism.NNoisyCount, &v, 0.05
			prior = &mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05, Sensitivity: 1, Sigma: 20}
		}
		q, err := plan.Quote(prior, rec, 1e-5, accountant.Price)
		if err != nil {
			t.Fatal(err)
		}
		receipt, row := chargedRow(t, q, mechanism.AddRemove)
		s := agree(t, avgmixSummaryOf(q, receipt), row, "into", "n", "n_source", "d", "K", "T", "m", "sigma_x", "sigma_y", "sigma_applied", "mu_clt", "noise_tv", "target_epsilon")
		if s["epsilon_rigorous"] != row[mechanism.KeyQuoteEpsilon] || s["delta"] != row[mechanism.KeyQuoteDelta] {
			t.Errorf("summary epsilon_rigorous %v at delta %v, row quote_epsilon %v at %v", s["epsilon_rigorous"], s["delta"], row[mechanism.KeyQuoteEpsilon], row[mechanism.KeyQuoteDelta])
		}
		if !(s["sigma"].(float64) <= row["sigma_applied"].(float64)) || s["rows"] != row["T"] || s["ledger_id"] != float64(receipt.ID) {
			t.Errorf("summary sigma %v rows %v ledger_id %v; row sigma_applied %v T %v, receipt %d", s["sigma"], s["rows"], s["ledger_id"], row["sigma_applied"], row["T"], receipt.ID)
		}
		sub := row
		if count {
			if row["mechanism"] != mechanism.KindComposite || row["n_noisy"] != 1003.2 {
				t.Fatalf("row of the noisy-count path: %v", row)
			}
			sub = row["parts"].([]any)[1].(map[string]any)
		}
		if s["q"] != sub["q"] || s["steps"] != sub["steps"] || s["sigma"] != sub["sigma"] {
			t.Errorf("summary q %v steps %v, charged subsampled part %v", s["q"], s["steps"], sub)
		}
		if e := s["epsilon_rigorous"].(float64); !(e > 0 && e <= 4.4) {
			t.Errorf("quoted epsilon %v", e)
		}
	}
}

// The same for dp_select_topm.
func TestSelectTopmSummaryAgreesWithLedgerRow(t *testing.T) {
	in := &topmInput{rows: vectorRows{fn: "dp_select_topm"}}
	for i := range 20 {
		if err := in.rows.add(vector.AppendEncoded(nil, []float32{float32(i), 1, -1}), int64(i%2), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		in.rowids = append(in.rowids, int64(i+1))
	}
	m, two, one, c, eps := 2, 2, 1.0, 1.0, 1.0
	o := selectTopmOptions{Into: "sel", M: &m, Classes: &two, MuSelect: &one, MuRelease: &one, C: &c, EpsLabels: &eps, Features: "x", Label: "y"}
	pl, err := planSelectTopm(in, o)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pl.p.Quote(3, 20, pl.rec, 1e-5, accountant.Price)
	if err != nil {
		t.Fatal(err)
	}
	receipt, row := chargedRow(t, q, mechanism.ReplaceOne)
	want, _ := accountant.Epsilon(q.Mechanism.Mu, 1e-5)
	if math.Abs(q.Epsilon-want) > 1e-12 {
		t.Errorf("quoted epsilon %v, exact conversion %v", q.Epsilon, want)
	}
	s := agree(t, selectTopmSummaryOf(q, dfs.Selection{}, receipt, 0), row, "into", "n", "mu_select", "mu_release", "mu_labels", "sigma_release", "components", "noise_tv")
	if s["epsilon"] != row[mechanism.KeyQuoteEpsilon] || s["mu"] != row["mu"] || s["neighbours"] != row["neighbours"] {
		t.Errorf("summary epsilon %v mu %v %v; row %v %v %v", s["epsilon"], s["mu"], s["neighbours"], row[mechanism.KeyQuoteEpsilon], row["mu"], row["neighbours"])
	}
}
