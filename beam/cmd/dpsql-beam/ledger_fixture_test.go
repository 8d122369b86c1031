package main

import (
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// beamFixture is a ledger written by dpsql-beam (an avgmix release and a
// protected aggregate) with the code of main at 05157ba, before the params
// records were typed (by writeBeamFixture); beamFixtureFigures holds what
// that code computed from it. Regenerate (only on purpose) with
//
//	DPSQL_WRITE_BEAM_FIXTURE=1 go test ./cmd/dpsql-beam -run TestBeamLedgerFixture
const (
	beamFixture        = "../../../ledger/testdata/ledger_v1_beam.db"
	beamFixtureFigures = "../../../ledger/testdata/ledger_v1_beam.json"
)

// beamFixtureRow is one charge row's figures and its release.
type beamFixtureRow struct {
	ID      int64   `json:"id"`
	Release string  `json:"release"` // a mechanism.Records name
	Kind    string  `json:"kind"`
	GDPMu   float64 `json:"gdp_mu"`
	Epsilon float64 `json:"epsilon_1e-2"`
	keys    string  // the params' top-level keys, sorted
	params  string
}

func openFixture(t *testing.T, path string) (string, *sql.DB) {
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return path, db
}

// beamFixtureRows computes the charge rows' figures of the file at path.
func beamFixtureRows(t *testing.T, path string) []beamFixtureRow {
	t.Helper()
	db, err := os.ReadFile(path)
	if err != nil || len(db) == 0 {
		t.Fatalf("reading %s: %v", path, err)
	}
	tmp := filepath.Join(t.TempDir(), "f.db")
	if err := os.WriteFile(tmp, db, 0o644); err != nil {
		t.Fatal(err)
	}
	_, conn := openFixture(t, tmp)
	if _, err := ledger.Verify(t.Context(), conn); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	rows, err := ledger.ReadLedger(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	var out []beamFixtureRow
	for _, r := range rows {
		if r.Kind != ledger.EventCharge {
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
		rel := "dpsql-beam avgmix"
		if len(out) == 1 {
			rel = "dpsql-beam aggregate"
		}
		var p map[string]any
		if err := json.Unmarshal([]byte(r.Params), &p); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out = append(out, beamFixtureRow{ID: r.ID, Release: rel, Kind: m.Kind, GDPMu: m.GDPMu(), Epsilon: eps,
			keys: strings.Join(keys, ","), params: r.Params})
	}
	return out
}

// writeBeamFixture runs dpsql-beam avgmix and aggregate on a fresh file and
// keeps its ledger (the data and releases dropped) in dst.
func writeBeamFixture(t *testing.T, dst string) {
	path, db := initDB(t, 10)
	writeTable(t, db, "train", genRows(400))
	for _, q := range []string{
		`CREATE TABLE visits (pid INTEGER, ward TEXT, stay REAL)`,
		`WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 300) INSERT INTO visits SELECT v, 'w' || (v % 3), v % 7 FROM s`,
		`CREATE TABLE wards (ward TEXT)`,
		`INSERT INTO wards VALUES ('w0'), ('w1'), ('w2')`,
		`SELECT dp_protect('visits', json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1, 'bounds', json_object('stay', json_array(0, 10)), 'public_keys', json_object('ward', 'wards')))`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if code, _, errs := run(t, nil, "avgmix", "--db", path, "--into", "mixed", "--mu", "0.5", "--n", "400", "--m", "8", "--table", "train", "--classes", "2"); code != 0 {
		t.Fatalf("avgmix: exit %d: %s", code, errs)
	}
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) ward, COUNT(*) AS n, AVG(stay) AS s FROM visits GROUP BY ward`
	if code, _, errs := run(t, nil, "aggregate", "--db", path, "--into", "wards_rel", "--query", q); code != 0 {
		t.Fatalf("aggregate: exit %d: %s", code, errs)
	}
	for _, tb := range []string{"train", "mixed", "wards_rel"} {
		if _, err := db.Exec(`DROP TABLE IF EXISTS ` + tb); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(dst)
	if _, err := db.Exec(`VACUUM INTO ?`, dst); err != nil {
		t.Fatal(err)
	}
}

// TestBeamLedgerFixture: the rows dpsql-beam wrote before the params records
// were typed verify, re-account to the figures computed then and decode
// into today's records (mechanism.BeamAvgmix, mechanism.BeamAggregate); the
// rows today's dpsql-beam writes hold the same keys, plus the quote's
// figures on the avgmix row (it is now charged as dp_avgmix's quote).
func TestBeamLedgerFixture(t *testing.T) {
	if os.Getenv("DPSQL_WRITE_BEAM_FIXTURE") == "1" {
		writeBeamFixture(t, beamFixture)
		b, _ := json.MarshalIndent(beamFixtureRows(t, beamFixture), "", "  ")
		if err := os.WriteFile(beamFixtureFigures, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want []beamFixtureRow
	b, err := os.ReadFile(beamFixtureFigures)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	old := beamFixtureRows(t, beamFixture)
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	writeBeamFixture(t, fresh)
	today := beamFixtureRows(t, fresh)
	if len(old) != 2 || len(want) != 2 || len(today) != 2 {
		t.Fatalf("charge rows: fixture %d, golden %d, today %d; want 2", len(old), len(want), len(today))
	}
	same := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for i, w := range want {
		g := old[i]
		if g.ID != w.ID || g.Kind != w.Kind || g.Release != w.Release || !same(g.GDPMu, w.GDPMu) || !same(g.Epsilon, w.Epsilon) {
			t.Errorf("fixture row re-accounts as %+v, was %+v", g, w)
		}
		for _, r := range []beamFixtureRow{g, today[i]} {
			rec := mechanism.Records[w.Release]()
			if _, err := mechanism.DecodeRow([]byte(r.params), rec); err != nil {
				t.Errorf("row %d (%s): %v", r.ID, w.Release, err)
			}
		}
		wantKeys := g.keys
		if w.Release == "dpsql-beam avgmix" {
			wantKeys = strings.Replace(wantKeys, ",q,", ",q,quote_delta,quote_epsilon,", 1)
		}
		if today[i].keys != wantKeys || today[i].Kind != w.Kind {
			t.Errorf("%s: today's row is %s with keys %s; the fixture's %s with %s", w.Release, today[i].Kind, today[i].keys, w.Kind, wantKeys)
		}
	}
}
