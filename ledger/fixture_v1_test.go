package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// The fixtures testdata/ledger_v1*.db were written
// (before the mechanism descriptions moved to package mechanism) with rows of
// every mechanism kind, two scopes of each neighbour relation, a scope of a
// larger delta and the file's cap; testdata/ledger_v1.json holds the figures
// that code computed from it. Rows written then must keep verifying and
// re-accounting to the same figures. Regenerate (only on purpose, when the
// format changes) with
//
//	DPSQL_WRITE_LEDGER_FIXTURE=1 go test ./ledger -run TestLedgerV1Fixture
const fixtureFigures = "testdata/ledger_v1.json"

// fixtureFigures is what the fixture's accounting gave when it was written.
type fixtureGolden struct {
	Scopes map[string]fixtureScope `json:"scopes"`
	Rows   []fixtureRow            `json:"rows"`
}

type fixtureScope struct {
	MuSpent      jsonFloat `json:"mu_spent"`
	EpsilonSpent jsonFloat `json:"epsilon_spent"` // ScopeEpsilon at the scope's delta
	MuRemaining  jsonFloat `json:"mu_remaining"`
	Entries      int64     `json:"entries"`
}

type fixtureRow struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	GDPMu   jsonFloat `json:"gdp_mu"`
	Epsilon jsonFloat `json:"epsilon_1e-2"` // RigorousEpsilon of the row's mechanism alone at delta 1e-2
}

// jsonFloat is a float64 whose JSON form also holds +Inf (as "+Inf").
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return json.Marshal(strconv.FormatFloat(float64(f), 'g', -1, 64))
	}
	return json.Marshal(float64(f))
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		x, err := strconv.ParseFloat(s, 64)
		*f = jsonFloat(x)
		return err
	}
	return json.Unmarshal(b, (*float64)(f))
}

// fixtureFiles are the fixtures and what wrote them: ledger_v1.db holds a
// row of every kind in add/remove scopes, ledger_v1_rows.db a replace-one
// scope (one file's total has one relation, which refuses the other's
// per-row kinds) and ledger_v1_cap.db add/remove scopes under the file's cap.
var fixtureFiles = map[string]func(t *testing.T) ([]accountant.Budget, []Charge){
	"ledger_v1.db": func(t *testing.T) ([]accountant.Budget, []Charge) {
		a := math.Log1p(math.Expm1(1)/(2*1e-8)) * (1 + 1e-6)
		ws, sha := mechanism.EncodeGridWeights(uniformWeights(100))
		count := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05, Sensitivity: 1, Sigma: 20}
		comp, err := mechanism.Composite(count, mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 64.0 / 60000, Sigma: 0.9, Steps: 2000})
		if err != nil {
			t.Fatal(err)
		}
		return []accountant.Budget{mustBudget(t, "default", 6, 0, 1e-5), mustBudget(t, "eps", 0, 8, 1e-6), mustBudget(t, "grid", 3, 0, 0.05)},
			[]Charge{
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5}, Details: map[string]any{"noise_tv": 1e-12, "dim": 3}},
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Sensitivity: 2, Sigma: 8, Steps: 3}},
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: 0.3}, Details: map[string]any{"note": "training run 7"}},
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1.2, Steps: 500}},
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.2},
					Details: map[string]any{"grid": 1.0 / 1024, "sensitivity_requested": 1, "noise_tv": 1e-13}},
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 1, Sigma: 1, Support: a, Epsilon: 1, Delta: 1e-8},
					Details: map[string]any{"grid": 1.0 / 1024, "sensitivity_requested": 1, "delta_requested": 1e-8}},
				{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: 0.4, Delta: 1e-7}, Details: map[string]any{"table": "t", "privacy_unit": "uid"}},
				{Scope: "default", Mechanism: comp, Details: map[string]any{
					"into": "mixed", "n": 60000, "n_source": "noisy_count", "d": 784, "K": 10, "T": 2000, "m": 64,
					"sampling": "poisson", "lambda": 1, "cx": 1, "cy": 1, "sigma_x": 0.9, "sigma_y": 0.9, "sigma_applied": 0.9,
					"mu_clt": 1.1, "target_epsilon": 4, "target_delta": 1e-5, "noise_tv": 1e-9, "n_noisy": 60001.3, "mu_n": 0.05}},
				{Scope: "eps", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.7}},
				{Scope: "eps", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.02, Sigma: 1.5, Steps: 100, Neighbours: mechanism.AddRemove}},
				{Scope: "grid", Mechanism: mechanism.Mechanism{Kind: mechanism.KindOptNoise, Weights: ws, WeightsSHA256: sha, Shifts: 1, Delta: 0.01}},
				{Scope: "grid", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5}},
			}
	},
	"ledger_v1_rows.db": func(t *testing.T) ([]accountant.Budget, []Charge) {
		ro := mustBudget(t, "rows", 4, 0, 1e-6)
		ro.Neighbours = mechanism.ReplaceOne
		return []accountant.Budget{ro}, []Charge{
			{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 1.2, Neighbours: mechanism.ReplaceOne},
				Details: map[string]any{"into": "selected", "mu_select": 0.3, "mu_release": 1, "sigma_release": 2}},
			{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 2, Steps: 200, Neighbours: mechanism.ReplaceOne}},
			{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.2}}, // add/remove, converted
			{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.1}},
			{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.02, Sigma: 1.5, Steps: 50}}, // add/remove, accounted replace-one
		}
	},
	"ledger_v1_cap.db": func(t *testing.T) ([]accountant.Budget, []Charge) {
		return []accountant.Budget{mustBudget(t, "a", 2, 0, 1e-5), mustBudget(t, "b", 0, 3, 1e-6), mustBudget(t, accountant.FileScope, 1.5, 0, 1e-5)},
			[]Charge{
				{Scope: "a", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.6}},
				{Scope: "b", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1.1, Steps: 300}},
				{Scope: "a", Mechanism: mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.15}},
				{Scope: "b", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Sensitivity: 1, Sigma: 4}},
			}
	},
}

// writeLedgerFixture creates budgets and charges in a fresh file at path.
func writeLedgerFixture(t *testing.T, path string, budgets []accountant.Budget, charges []Charge) {
	ctx := context.Background()
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range budgets {
		if err := l.Init(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range charges {
		c.Query = "SELECT fixture"
		if _, err := l.Charge(ctx, c, nil); err != nil {
			t.Fatalf("charging %+v: %v", c.Mechanism, err)
		}
	}
	if err := ReleaseLedger(path); err != nil {
		t.Fatal(err)
	}
}

// fixtureFiguresOf computes the fixture's figures with the code under test.
func fixtureFiguresOf(t *testing.T, path string) fixtureGolden {
	ctx := context.Background()
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseLedger(path)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Verify(ctx, db); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	g := fixtureGolden{Scopes: map[string]fixtureScope{}}
	sts, err := ReadStatuses(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		rem, err := l.Remaining(ctx, st.Scope)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := l.ScopeEpsilon(ctx, st.Scope, st.Delta)
		if err != nil {
			t.Fatal(err)
		}
		g.Scopes[st.Scope] = fixtureScope{MuSpent: jsonFloat(rem.MuSpent), EpsilonSpent: jsonFloat(eps), MuRemaining: jsonFloat(rem.MuRemaining), Entries: rem.Entries}
	}
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Kind != EventCharge {
			continue
		}
		m, err := mechanism.Parse([]byte(r.Params))
		if err != nil {
			t.Fatalf("row %d: %v", r.ID, err)
		}
		eps, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, 1e-2)
		if err != nil {
			t.Fatalf("row %d: %v", r.ID, err)
		}
		g.Rows = append(g.Rows, fixtureRow{ID: r.ID, Kind: m.Kind, GDPMu: jsonFloat(m.GDPMu()), Epsilon: jsonFloat(eps)})
	}
	return g
}

// TestLedgerV1Fixture: files written by the code of 2026-11-23 verify and
// re-account, scope by scope and row by row, to the figures computed then.
func TestLedgerV1Fixture(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: recomputes every fixture's figures (about 40 s); TestUpgradeVersion0File runs in -short")
	}
	if os.Getenv("DPSQL_WRITE_LEDGER_FIXTURE") == "1" {
		all := map[string]fixtureGolden{}
		for name, build := range fixtureFiles {
			tmp := filepath.Join(t.TempDir(), "w.db")
			budgets, charges := build(t)
			writeLedgerFixture(t, tmp, budgets, charges)
			db, err := sql.Open("sqlite3", tmp)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join("testdata", name)
			os.Remove(dst)
			if _, err := db.Exec(`VACUUM INTO ?`, dst); err != nil {
				t.Fatal(err)
			}
			db.Close()
			all[name] = fixtureFiguresOf(t, copyV1Fixture(t, name))
		}
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(fixtureFigures, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var golden map[string]fixtureGolden
	b, err := os.ReadFile(fixtureFigures)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	capped := false
	for name := range fixtureFiles {
		want, ok := golden[name]
		if !ok {
			t.Fatalf("%s has no recorded figures", name)
		}
		got := fixtureFiguresOf(t, copyV1Fixture(t, name))
		for _, r := range got.Rows {
			kinds[r.Kind] = true
		}
		if st, ok := got.Scopes[accountant.FileScope]; ok && !math.IsInf(float64(st.MuRemaining), 1) {
			capped = true
		}
		same := func(x, y jsonFloat) bool {
			a, b := float64(x), float64(y)
			return a == b || math.IsInf(a, 1) && math.IsInf(b, 1) || math.Abs(a-b) <= 1e-9*math.Abs(b)
		}
		if len(got.Scopes) != len(want.Scopes) || len(got.Rows) != len(want.Rows) {
			t.Fatalf("%s read as %d scopes, %d rows; written with %d, %d", name, len(got.Scopes), len(got.Rows), len(want.Scopes), len(want.Rows))
		}
		for scope, w := range want.Scopes {
			g := got.Scopes[scope]
			// What can still be charged was searched to 1e-3 then
			// (accountant.Room now: 1e-9, 1e-4 on mixed scopes), and the
			// file's total without a cap has no limit of its own (+Inf;
			// then: the largest scope budget).
			room := math.Abs(float64(g.MuRemaining)/float64(w.MuRemaining)-1) <= 2e-3 ||
				scope == accountant.FileScope && math.IsInf(float64(g.MuRemaining), 1)
			if !same(g.MuSpent, w.MuSpent) || !same(g.EpsilonSpent, w.EpsilonSpent) || !room || g.Entries != w.Entries {
				t.Errorf("%s: scope %q re-accounts as %+v, was %+v", name, scope, g, w)
			}
		}
		for i, w := range want.Rows {
			g := got.Rows[i]
			if g.ID != w.ID || g.Kind != w.Kind || !same(g.GDPMu, w.GDPMu) || !same(g.Epsilon, w.Epsilon) {
				t.Errorf("%s: row re-accounts as %+v, was %+v", name, g, w)
			}
		}
	}
	for _, k := range []string{mechanism.KindGaussian, mechanism.KindSubsampledGaussian, mechanism.KindLaplace, mechanism.KindTruncatedLaplace, mechanism.KindOptNoise, mechanism.KindGaussianInf, mechanism.KindComposite, mechanism.KindExternal} {
		if !kinds[k] {
			t.Errorf("the fixtures hold no %s row", k)
		}
	}
	if !capped {
		t.Error("no fixture caps the file's total")
	}
}

// copyV1Fixture copies the fixture to a fresh file (the ledger writes its
// schema checks and WAL beside it).
func copyV1Fixture(t *testing.T, name string) string {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), name)
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
