package ext_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/mechanism"
)

// The fixture ledger/testdata/ledger_v1_sites.db holds one charge row of
// every release that charges the ledger through SQL (dp_gaussian in both
// forms and on a vector, dp_vec_sum, gdp_spend with and without a note,
// dp_laplace, dp_tlaplace, dp_optnoise, dp_avgmix with n asserted and with a
// noisy count, dp_select_topm, and protected mode's GROUP BY with Gaussian
// noise, with partition selection and with Laplace noise), written by the
// code of main before the params records were typed (the commit this test
// was added in says which). ledger_v1_sites.json holds the figures that code
// computed from it. Rows written then must keep verifying, re-accounting to
// the same figures, and their params must decode into today's records.
// Regenerate (only on purpose) with
//
//	DPSQL_WRITE_SITES_FIXTURE=1 go test ./ext -run TestLedgerSitesFixture
const sitesGolden = "../ledger/testdata/ledger_v1_sites.json"

// sitesFiles are the fixture files: one file's total has one neighbour
// relation, so dp_select_topm's replace-one scope has a file of its own.
var sitesFiles = []string{"ledger_v1_sites.db", "ledger_v1_sites_rows.db"}

// siteCall is one SQL call of the fixture: the scope it charges, the
// connection (owner or analyst) and the statement.
type siteCall struct {
	release string // the release that wrote the row (the params record's owner)
	file    string
	scope   string
	analyst bool
	sql     string
}

var siteCalls = []siteCall{
	{"dp_gaussian", "ledger_v1_sites.db", "default", false, `SELECT dp_gaussian(1.5, 1, 0.3)`},
	{"dp_gaussian", "ledger_v1_sites.db", "default", false, `SELECT dp_gaussian(1.5, 1, 1.0, 1e-6)`},
	{"dp_gaussian", "ledger_v1_sites.db", "default", false, `SELECT dp_gaussian('[1, 2.5, -3]', 2, 0.4)`},
	{"dp_vec_sum", "ledger_v1_sites.db", "default", false, `SELECT dp_vec_sum(x, 1.5, 0.3) FROM vecs`},
	{"gdp_spend", "ledger_v1_sites.db", "default", false, `SELECT gdp_spend(0.2, 'training run 7')`},
	{"gdp_spend", "ledger_v1_sites.db", "default", false, `SELECT gdp_spend(0.1)`},
	{"dp_laplace", "ledger_v1_sites.db", "default", false, `SELECT dp_laplace(3, 1, 0.5)`},
	{"dp_tlaplace", "ledger_v1_sites.db", "default", false, `SELECT dp_tlaplace(3, 1, 0.5, 1e-6)`},
	{"dp_optnoise", "ledger_v1_sites.db", "default", false, `SELECT dp_optnoise(3, 1, 0.5, 1e-6)`},
	{"dp_avgmix", "ledger_v1_sites.db", "default", false, `SELECT dp_avgmix(features, label, json_object('n', 200, 'into', 'mixed', 'mu', 0.5, 'classes', 2, 'm', 8)) FROM train`},
	{"dp_avgmix", "ledger_v1_sites.db", "default", false, `SELECT dp_avgmix(features, label, json_object('into', 'mixed2', 'mu', 0.5, 'classes', 2, 'm', 8)) FROM train`},
	{"protect", "ledger_v1_sites.db", "default", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.3) COUNT(*) AS n, AVG(age) AS a FROM patients`},
	{"protect", "ledger_v1_sites.db", "default", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.3) sex, COUNT(*) AS n FROM patients GROUP BY sex`},
	{"protect", "ledger_v1_sites.db", "default", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, noise = 'laplace') COUNT(*) AS n, SUM(age) AS s FROM patients`},
	{"dp_select_topm", "ledger_v1_sites_rows.db", "rows", false, `SELECT dp_select_topm('train', json_object('into', 'selected', 'm', 2, 'classes', 2, 'mu_select', 0.5, 'mu_release', 1.0, 'c', 1.0, 'labels', 'public'))`},
}

// callsOf returns the site calls of one fixture file.
func callsOf(file string) []siteCall {
	var cs []siteCall
	for _, c := range siteCalls {
		if c.file == file {
			cs = append(cs, c)
		}
	}
	return cs
}

// writeSitesFixture makes the site calls of file in a fresh file at path and
// returns what each returned to SQL (its first row's first column).
func writeSitesFixture(t *testing.T, path, file string) []any {
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	owner.SetMaxOpenConns(1)
	initSQL := `SELECT dp_init(20, 1e-5)`
	if file != sitesFiles[0] {
		initSQL = `SELECT dp_init(8, 1e-5, 'rows', 'replace_one')`
	}
	for _, q := range []string{
		initSQL,
		`CREATE TABLE vecs (x BLOB)`,
		`CREATE TABLE train (features BLOB, label INTEGER)`,
		`CREATE TABLE patients (pid INTEGER, sex TEXT, age INTEGER)`,
	} {
		if _, err := owner.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := range 200 {
		v := []float32{float32(i%7) / 7, float32(i%3) / 3, 0.5, float32(i%5) / 10}
		if _, err := owner.Exec(`INSERT INTO vecs VALUES (?)`, vector.Encode(v[:3])); err != nil {
			t.Fatal(err)
		}
		if _, err := owner.Exec(`INSERT INTO train VALUES (?, ?)`, vector.Encode(v), i%2); err != nil {
			t.Fatal(err)
		}
		if _, err := owner.Exec(`INSERT INTO patients VALUES (?, ?, ?)`, i, []string{"F", "M"}[i%2], 20+i%50); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.Exec(`SELECT dp_protect('patients', json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1, 'bounds', json_object('age', json_array(0, 100))))`); err != nil {
		t.Fatal(err)
	}
	analyst, err := ext.OpenAnalyst(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer analyst.Close()
	analyst.SetMaxOpenConns(1)
	var out []any
	for _, c := range callsOf(file) {
		db := owner
		if c.analyst {
			db = analyst
		}
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), `SELECT dp_use_scope(?)`, c.scope); err != nil && !c.analyst {
			t.Fatal(err)
		}
		rows, err := conn.QueryContext(context.Background(), c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		var first any
		for rows.Next() {
			cols, _ := rows.Columns()
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = vals[0]
			}
		}
		out = append(out, first)
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		rows.Close()
		conn.Close()
	}
	return out
}

// sitesGoldenRow is what the fixture's code computed for one charge row.
type sitesGoldenRow struct {
	ID        int64   `json:"id"`
	Release   string  `json:"release"`
	Kind      string  `json:"kind"`
	GDPMu     float64 `json:"gdp_mu"` // +Inf is written as -1
	Epsilon   float64 `json:"epsilon_1e-2"`
	NoiseTV   float64 `json:"noise_tv"`
	ParamKeys string  `json:"param_keys"` // the params' top-level keys, sorted, comma-separated
}

type sitesGoldenScope struct {
	MuSpent      float64 `json:"mu_spent"`
	EpsilonSpent float64 `json:"epsilon_spent"`
	MuRemaining  float64 `json:"mu_remaining"`
	Entries      int64   `json:"entries"`
}

type sitesGoldenFile struct {
	Scopes map[string]sitesGoldenScope `json:"scopes"`
	Rows   []sitesGoldenRow            `json:"rows"`
}

func finiteOr(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return -1
	}
	return x
}

// sitesFiguresOf verifies the file at path and computes its figures with the
// code under test: each charge row's, and with scopes each scope's (the
// room search of a mixed scope takes a while).
func sitesFiguresOf(t *testing.T, path, file string, scopes bool) (sitesGoldenFile, []ledger.Row) {
	calls := callsOf(file)
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := ledger.Verify(ctx, db); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	l, err := ledger.OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.ReleaseLedger(path)
	g := sitesGoldenFile{Scopes: map[string]sitesGoldenScope{}}
	sts, err := ledger.ReadStatuses(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !scopes {
			break
		}
		rem, err := l.Remaining(ctx, st.Scope)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := l.ScopeEpsilon(ctx, st.Scope, st.Delta)
		if err != nil {
			t.Fatal(err)
		}
		g.Scopes[st.Scope] = sitesGoldenScope{MuSpent: finiteOr(rem.MuSpent), EpsilonSpent: finiteOr(eps), MuRemaining: finiteOr(rem.MuRemaining), Entries: rem.Entries}
	}
	rows, err := ledger.ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var charges []ledger.Row
	for _, r := range rows {
		if r.Kind != ledger.EventCharge {
			continue
		}
		if len(charges) >= len(calls) {
			t.Fatalf("%s holds more charge rows than site calls (%d)", file, len(calls))
		}
		m, err := mechanism.Parse([]byte(r.Params))
		if err != nil {
			t.Fatalf("row %d: %v", r.ID, err)
		}
		eps, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, 1e-2)
		if err != nil {
			t.Fatalf("row %d: %v", r.ID, err)
		}
		var p map[string]any
		if err := json.Unmarshal([]byte(r.Params), &p); err != nil {
			t.Fatalf("row %d: %v", r.ID, err)
		}
		var keys []string
		for k := range p {
			keys = append(keys, k)
		}
		tv, _ := p["noise_tv"].(float64)
		g.Rows = append(g.Rows, sitesGoldenRow{ID: r.ID, Release: calls[len(charges)].release, Kind: m.Kind,
			GDPMu: finiteOr(m.GDPMu()), Epsilon: finiteOr(eps), NoiseTV: tv, ParamKeys: sortedJoin(keys)})
		charges = append(charges, r)
	}
	return g, charges
}

func sortedJoin(keys []string) string {
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return strings.Join(keys, ",")
}

func copyFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestLedgerSitesFixture: the rows every SQL release wrote before the params
// records were typed verify and re-account, scope by scope and row by row,
// to the figures computed then, and keep their keys.
func TestLedgerSitesFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: re-accounts every fixture row (about 30 s); TestFixtureRowsDecodeIntoRecords runs in -short")
	}
	dir := filepath.Dir(sitesGolden)
	if os.Getenv("DPSQL_WRITE_SITES_FIXTURE") == "1" {
		all := map[string]sitesGoldenFile{}
		for _, file := range sitesFiles {
			tmp := filepath.Join(t.TempDir(), "w.db")
			writeSitesFixture(t, tmp, file)
			db, err := sql.Open("sqlite3", tmp)
			if err != nil {
				t.Fatal(err)
			}
			// Keep the ledger only: the data, the releases and the noise
			// cache are not needed to re-account.
			for _, tb := range []string{"vecs", "train", "mixed", "mixed2", "selected", "dp_optnoise_cache"} {
				if _, err := db.Exec(`DROP TABLE IF EXISTS ` + tb); err != nil {
					t.Fatal(err)
				}
			}
			dst := filepath.Join(dir, file)
			os.Remove(dst)
			if _, err := db.Exec(`VACUUM INTO ?`, dst); err != nil {
				t.Fatal(err)
			}
			db.Close()
			all[file], _ = sitesFiguresOf(t, copyFile(t, dst), file, true)
		}
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(sitesGolden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var golden map[string]sitesGoldenFile
	b, err := os.ReadFile(sitesGolden)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	same := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for _, file := range sitesFiles {
		want := golden[file]
		got, _ := sitesFiguresOf(t, copyFile(t, filepath.Join(dir, file)), file, true)
		n := len(callsOf(file))
		if len(got.Rows) != n || len(want.Rows) != n || len(got.Scopes) != len(want.Scopes) {
			t.Fatalf("%s holds %d charge rows (golden %d), want one per site call (%d); %d scopes (golden %d)", file, len(got.Rows), len(want.Rows), n, len(got.Scopes), len(want.Scopes))
		}
		for scope, w := range want.Scopes {
			g := got.Scopes[scope]
			// What can still be charged was searched to 1e-3 then
			// (accountant.Room now: 1e-9, 1e-4 on mixed scopes), and the
			// file's total without a cap has no limit of its own (+Inf,
			// written -1; then: the largest scope budget).
			room := math.Abs(g.MuRemaining/w.MuRemaining-1) <= 2e-3 || scope == accountant.FileScope && g.MuRemaining == -1
			if !same(g.MuSpent, w.MuSpent) || !same(g.EpsilonSpent, w.EpsilonSpent) || !room || g.Entries != w.Entries {
				t.Errorf("%s: scope %q re-accounts as %+v, was %+v", file, scope, g, w)
			}
		}
		for i, w := range want.Rows {
			g := got.Rows[i]
			if g.ID != w.ID || g.Kind != w.Kind || !same(g.GDPMu, w.GDPMu) || !same(g.Epsilon, w.Epsilon) || g.NoiseTV != w.NoiseTV || g.ParamKeys != w.ParamKeys {
				t.Errorf("%s: row %s re-accounts as %+v, was %+v", file, fmt.Sprint(w.ID), g, w)
			}
		}
	}
}
