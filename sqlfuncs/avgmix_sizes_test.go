package sqlfuncs_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// avgmixRun releases from a fresh table of rows rows with opts and returns the
// summary, the ledger row's params (without the query text) and the number of
// released rows.
func avgmixRun(t *testing.T, rows int, opts string) (summary, params map[string]any, released int) {
	t.Helper()
	db := openDB(t, `SELECT dp_init(3)`)
	fillTrain(t, db, "train", rows, 4, 3)
	var out string
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, ` + opts + `) FROM train`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		t.Fatal(err)
	}
	var p string
	if err := db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge'`).Scan(&p); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(p), &params)
	db.QueryRow(`SELECT count(*) FROM rel`).Scan(&released)
	return summary, params, released
}

// With an asserted n, adding a person changes nothing the release states:
// the rate q, the number of rows released, m, sigma, and every field of the
// summary and of the ledger row are the same for 1000 and 1001 rows. (Before,
// T and q followed the row count, so a default release of n rows revealed
// whether one person was present.)
func TestAvgmixSizesArePublic(t *testing.T) {
	for _, opts := range []string{
		`json_object('n', 1000, 'classes', 3, 'into', 'rel', 'mu', 1.0)`,
		`json_object('n', 1000, 'classes', 3, 'into', 'rel', 'mu', 1.0, 'T', 300, 'm', 20)`,
		`json_object('n', 1000, 'classes', 3, 'into', 'rel', 'epsilon', 2.0, 'delta', 1e-6)`,
	} {
		s0, p0, r0 := avgmixRun(t, 1000, opts)
		s1, p1, r1 := avgmixRun(t, 1001, opts)
		if r0 != r1 || r0 != 1000 && !strings.Contains(opts, "'T'") {
			t.Errorf("%s: released %d rows from 1000, %d from 1001", opts, r0, r1)
		}
		if s0["q"] != s1["q"] || s0["rows"] != s1["rows"] {
			t.Errorf("%s: q %v -> %v, rows %v -> %v", opts, s0["q"], s1["q"], s0["rows"], s1["rows"])
		}
		if !reflect.DeepEqual(s0, s1) {
			t.Errorf("%s: summaries differ:\n%v\n%v", opts, s0, s1)
		}
		if !reflect.DeepEqual(p0, p1) {
			t.Errorf("%s: ledger params differ:\n%v\n%v", opts, p0, p1)
		}
		if s0["n"] != 1000.0 || s0["n_source"] != "asserted" || p0["n_source"] != "asserted" {
			t.Errorf("%s: n recorded as %v (%v), ledger %v", opts, s0["n"], s0["n_source"], p0["n_source"])
		}
	}
}

// The true row count appears nowhere: not in the summary, the ledger row or
// the progress output, even when it differs from the asserted n.
func TestAvgmixRowCountNeverShown(t *testing.T) {
	var mu sync.Mutex
	var totals []int
	sqlfuncs.SetProgress(func(fn string, done, total int) {
		mu.Lock()
		totals = append(totals, done, total)
		mu.Unlock()
	})
	defer sqlfuncs.SetProgress(nil)
	const rows = 1237 // a count no other figure of this release has
	s, p, _ := avgmixRun(t, rows, `json_object('n', 5000, 'classes', 3, 'into', 'rel', 'mu', 1.0, 'T', 4096, 'm', 50)`)
	for where, v := range map[string]any{"summary": s, "ledger params": p} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "1237") {
			t.Errorf("the %s holds the row count: %s", where, b)
		}
	}
	for _, v := range totals {
		if v == rows {
			t.Errorf("progress showed the row count: %v", totals)
		}
	}
	if len(totals) == 0 {
		t.Error("no progress reported with a public T")
	}
}

// Without n, mu_n = 0.05 mu buys a noisy count; the count and the release are
// one composite charge whose rigorous cost meets the requested budget, with
// n_noisy and mu_n in the summary and the ledger row. No progress is shown
// (T follows the noisy count until the charge commits).
func TestAvgmixNoisyCount(t *testing.T) {
	var reports int
	sqlfuncs.SetProgress(func(string, int, int) { reports++ })
	defer sqlfuncs.SetProgress(nil)
	db := openDB(t, `SELECT dp_init(3)`)
	fillTrain(t, db, "train", 3000, 4, 3)
	var out string
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('classes', 3, 'into', 'rel', 'mu', 1.0))` + ` FROM train`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	json.Unmarshal([]byte(out), &s)
	nNoisy, _ := s["n_noisy"].(float64)
	n, _ := s["n"].(float64)
	if s["n_source"] != "noisy_count" || s["mu_n"] != 0.05 || n != math.Round(nNoisy) || s["rows"] != n {
		t.Errorf("summary %s", out)
	}
	// sigma_n is about 1/mu_n = 20: the count is within 8 sigma of 3000.
	if math.Abs(nNoisy-3000) > 160 {
		t.Errorf("noisy count %v is implausibly far from 3000", nNoisy)
	}
	var mech, params string
	var rowMu float64
	db.QueryRow(`SELECT mechanism, mu, params FROM dp_ledger WHERE kind = 'charge'`).Scan(&mech, &rowMu, &params)
	m, err := mechanism.Parse([]byte(params))
	if err != nil || mech != mechanism.KindComposite || len(m.Parts) != 2 {
		t.Fatalf("ledger row %s %s (%v)", mech, params, err)
	}
	if m.Parts[0].Kind != mechanism.KindGaussian || m.Parts[0].Mu != 0.05 || m.Parts[0].Sensitivity != 1 || m.Parts[1].Kind != mechanism.KindSubsampledGaussian {
		t.Errorf("parts %+v", m.Parts)
	}
	var p map[string]any
	json.Unmarshal([]byte(params), &p)
	if p["n_noisy"] != nNoisy || p["mu_n"] != 0.05 || p["n_source"] != "noisy_count" {
		t.Errorf("ledger params lack n_noisy/mu_n: %s", params)
	}
	if q := m.Parts[1].Q; math.Abs(q-s["m"].(float64)/n) > 1e-15 {
		t.Errorf("q = %v, want m/n with the noisy n", q)
	}
	target, _ := accountant.Epsilon(1, 1e-5)
	eps, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, 1e-5)
	if err != nil || eps > target || eps < 0.99*target {
		t.Errorf("combined epsilon %v, target %v (%v)", eps, target, err)
	}
	if math.Abs(rowMu-m.GDPMu()) > 1e-12 {
		t.Errorf("row mu %v, composite GDPMu %v", rowMu, m.GDPMu())
	}
	if reports != 0 {
		t.Errorf("%d progress reports before the charge of a noisy-count release", reports)
	}
}

// A noisy-count release that is refused still pays for its count: the refusal
// comes after the draw and may depend on it.
func TestAvgmixNoisyCountRefusalCharged(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	fillTrain(t, db, "train", 500, 4, 3)
	var out string
	err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('classes', 3, 'into', 'rel', 'mu', 3.0)) FROM train`).Scan(&out)
	if err == nil || !strings.Contains(err.Error(), "privacy budget exceeded") || !strings.Contains(err.Error(), "noisy row count it had drawn was charged") {
		t.Fatalf("err = %v", err)
	}
	var mech string
	var mu float64
	var params string
	if err := db.QueryRow(`SELECT mechanism, mu, params FROM dp_ledger WHERE kind = 'charge'`).Scan(&mech, &mu, &params); err != nil {
		t.Fatal(err)
	}
	if mech != mechanism.KindGaussian || math.Abs(mu-0.15) > 1e-12 || !strings.Contains(params, `"n_noisy"`) || !strings.Contains(params, `"release_refused"`) {
		t.Errorf("fallback charge %s %v %s", mech, mu, params)
	}
	var tables int
	db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'rel'`).Scan(&tables)
	if tables != 0 {
		t.Error("a refused release left its table")
	}
	// Refusals decided before the draw charge nothing.
	before := ledgerRows(t, db)
	for _, q := range []string{
		`SELECT dp_avgmix(features, label, json_object('classes', 3, 'into', 'train', 'mu', 0.5)) FROM train`,
		`SELECT dp_avgmix(features, label, json_object('classes', 3, 'into', 'x', 'mu', 0.5, 'n', 0)) FROM train`,
	} {
		if err := db.QueryRow(q).Scan(&out); err == nil {
			t.Errorf("%s: no error", q)
		}
	}
	if n := ledgerRows(t, db); n != before {
		t.Errorf("refusals before the draw charged %d rows", n-before)
	}
}

// dp_cost prices a composite entry (as dp_avgmix's noisy-count path charges
// it) exactly like the list of its parts.
func TestCostComposite(t *testing.T) {
	db := openDB(t, ``)
	parts := `json_array(json_object('mechanism', 'gaussian', 'mu', 0.05), json_object('mechanism', 'subsampled_gaussian', 'q', 0.01, 'sigma', 0.7, 'steps', 120))`
	var one, list float64
	if err := db.QueryRow(`SELECT dp_cost(json_object('mechanism', 'composite', 'parts', `+parts+`), 1e-5), dp_cost(`+parts+`, 1e-5)`).Scan(&one, &list); err != nil {
		t.Fatal(err)
	}
	if one != list || !(one > 2.4612) {
		t.Errorf("composite %v, parts %v (the subsampled part alone is 2.4612)", one, list)
	}
	var err error
	for _, bad := range []string{
		`json_object('mechanism', 'composite')`,
		`json_object('mechanism', 'composite', 'parts', json_array(json_object('mechanism', 'composite', 'parts', ` + parts + `)))`,
	} {
		if err = db.QueryRow(`SELECT dp_cost(` + bad + `, 1e-5)`).Scan(&one); err == nil || !strings.Contains(err.Error(), "composite") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
