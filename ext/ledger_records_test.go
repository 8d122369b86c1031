package ext_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// recordOf decodes a charge row's params into the params record of release
// (mechanism.Records), refusing any key neither it nor the mechanism nor a
// quote owns.
func recordOf(t *testing.T, r ledger.Row, release string) (mechanism.Mechanism, any) {
	t.Helper()
	newRec, ok := mechanism.Records[release]
	if !ok {
		t.Fatalf("no params record for release %q", release)
	}
	rec := newRec()
	if release == "dp_avgmix" && json.Valid([]byte(r.Params)) {
		var probe struct {
			Refused *string `json:"release_refused"`
		}
		if json.Unmarshal([]byte(r.Params), &probe) == nil && probe.Refused != nil {
			rec = mechanism.Records["dp_avgmix count"]()
		}
	}
	m, err := mechanism.DecodeRow([]byte(r.Params), rec)
	if err != nil {
		t.Fatalf("row %d (%s): %v\n%s", r.ID, release, err, r.Params)
	}
	return m, reflect.ValueOf(rec).Elem().Interface()
}

// Rows written before the params records were typed decode into today's
// records, key for key.
func TestFixtureRowsDecodeIntoRecords(t *testing.T) {
	seen := map[string]bool{}
	for _, file := range sitesFiles {
		calls := callsOf(file)
		_, rows := sitesFiguresOf(t, copyFile(t, filepath.Join(filepath.Dir(sitesGolden), file)), file, false)
		for i, r := range rows {
			recordOf(t, r, calls[i].release)
			seen[calls[i].release] = true
		}
	}
	for _, rel := range []string{"dp_gaussian", "dp_vec_sum", "gdp_spend", "dp_laplace", "dp_tlaplace", "dp_optnoise", "dp_avgmix", "dp_select_topm", "protect"} {
		if !seen[rel] {
			t.Errorf("the fixtures hold no %s row", rel)
		}
	}
}

// Today's code writes, site by site, rows of the same kinds and keys that
// the code before the typed records wrote (the fixture), and each row holds
// exactly the record its site computes from its arguments (and, for the
// releases that return a summary, the record the summary shows).
func TestSitesWriteTheirRecords(t *testing.T) {
	var golden map[string]sitesGoldenFile
	b, err := os.ReadFile(sitesGolden)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	sigma := func(sens, mu float64, dim int) float64 {
		s, err := release.GaussianSigma(sens, mu, dim)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	mu16, err := accountant.Mu(1, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	lap, err := release.LaplaceFor(1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	tlap, err := release.TruncatedLaplaceFor(1, 0.5, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	s0, s1, s2, s3 := sigma(1, 0.3, 1), sigma(1, mu16, 1), sigma(2, 0.4, 3), sigma(1.5, 0.3, 3)
	// want, by call index (in siteCalls), is the record the call's
	// arguments determine; nil where the test below checks otherwise.
	want := map[int]any{
		0: mechanism.Gaussian{Dim: 1, Grid: release.Grid(s0), NoiseTV: release.NoiseTVOf(1)},
		1: mechanism.Gaussian{Dim: 1, Grid: release.Grid(s1), NoiseTV: release.NoiseTVOf(1), EpsilonRequested: 1, DeltaRequested: 1e-6},
		2: mechanism.Gaussian{Dim: 3, Grid: release.Grid(s2), NoiseTV: release.NoiseTVOf(3)},
		4: mechanism.External{Note: "training run 7"},
		5: mechanism.External{},
		6: mechanism.Laplace{Grid: lap.Grid, SensitivityRequested: 1},
		7: mechanism.Laplace{Grid: tlap.Grid, SensitivityRequested: 1, DeltaRequested: 1e-6},
	}
	wantMech := map[int]mechanism.Mechanism{
		0: {Kind: mechanism.KindGaussian, Mu: 0.3, Sensitivity: 1, Sigma: s0},
		1: {Kind: mechanism.KindGaussian, Mu: mu16, Sensitivity: 1, Sigma: s1},
		2: {Kind: mechanism.KindGaussian, Mu: 0.4, Sensitivity: 2, Sigma: s2},
		3: {Kind: mechanism.KindGaussian, Mu: 0.3, Sensitivity: 1.5, Sigma: s3},
		4: {Kind: mechanism.KindExternal, Mu: 0.2},
		5: {Kind: mechanism.KindExternal, Mu: 0.1},
		6: {Kind: mechanism.KindLaplace, Epsilon: 0.5, Sensitivity: lap.Sensitivity, Sigma: lap.Scale},
	}
	idx := 0 // index in siteCalls
	for _, file := range sitesFiles {
		path := filepath.Join(t.TempDir(), file)
		out := writeSitesFixture(t, path, file)
		got, rows := sitesFiguresOf(t, path, file, false)
		old := golden[file]
		for i, r := range rows {
			c, k := callsOf(file)[i], idx+i
			g, w := got.Rows[i], old.Rows[i]
			if g.Kind != w.Kind || g.ParamKeys != w.ParamKeys {
				t.Errorf("%s (%s): today's row is %s with keys %s; before the typed records, %s with %s", c.sql, file, g.Kind, g.ParamKeys, w.Kind, w.ParamKeys)
			}
			m, rec := recordOf(t, r, c.release)
			if wr, ok := want[k]; ok && !reflect.DeepEqual(rec, wr) {
				t.Errorf("%s: the row records %+v, the call's arguments give %+v", c.sql, rec, wr)
			}
			if wm, ok := wantMech[k]; ok && !reflect.DeepEqual(m, wm) {
				t.Errorf("%s: the row charges %+v, the call's arguments give %+v", c.sql, m, wm)
			}
			switch rec := rec.(type) {
			case mechanism.VecSum:
				if rec.Dim != 3 || rec.Clip != 1.5 || rec.Grid != release.Grid(s3) || rec.NoiseTV != release.NoiseTVOf(3) ||
					!(rec.FixedPointStep > 0) || math.Exp2(math.Round(math.Log2(rec.FixedPointStep))) != rec.FixedPointStep {
					t.Errorf("%s: the row records %+v", c.sql, rec)
				}
			case mechanism.OptNoise:
				ws, err := m.GridWeights()
				if err != nil || rec.Intervals != len(ws) || rec.Loss != "l1" || rec.SensitivityRequested != 1 || rec.DeltaRequested != 1e-6 ||
					m.Epsilon != 0.5 || !(rec.IntervalWidth > 0) {
					t.Errorf("%s: the row records %+v (%v)", c.sql, rec, err)
				}
			case mechanism.Protected:
				if rec.Table != "patients" || rec.PrivacyUnit != "pid" || len(rec.Parts) == 0 || rec.NoiseTVTotal != rec.NoiseTVValues*rec.NoiseTV {
					t.Errorf("%s: the row records %+v", c.sql, rec)
				}
			case mechanism.Avgmix, mechanism.SelectTopm:
				// The summary returned to SQL shows the row's record.
				s, ok := out[i].(string)
				if !ok {
					t.Fatalf("%s returned %T, want a JSON summary", c.sql, out[i])
				}
				summary := reflect.New(reflect.TypeOf(rec))
				if err := json.Unmarshal([]byte(s), summary.Interface()); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(summary.Elem().Interface(), rec) {
					t.Errorf("%s: the summary shows %+v, the ledger row %+v", c.sql, summary.Elem().Interface(), rec)
				}
			}
		}
		idx += len(rows)
	}
}
