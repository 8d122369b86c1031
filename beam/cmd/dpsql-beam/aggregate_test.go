package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/mechanism"
)

// visitsDB creates a database with a scope of budget mu and delta, and the
// protected table visits(pid, ward, stay): privacy unit pid, at most 2 wards
// and 3 visits per ward per person, stays bounded to [0, 10].
//
//   - 20,000 persons in 8 wards w0..w7: person p has 3 visits in ward
//     w(p%8) and 2 in w((p+1)%8), all kept by the bounds: each ward counts
//     12,500 visits; stays are multiples of 0.5 in [0, 20] (clamped to 10).
//   - 1,000 persons with 10 visits each in ward "heavy", stay 4: bounded to
//     3 visits each, so the ward counts 3,000 and sums 12,000.
//   - singles one-person wards s0, s1, ...: one visit each.
//   - 100 visits without a pid (dropped).
func visitsDB(t *testing.T, mu, delta float64, singles int) (string, *sql.DB, map[string]wardFigures) {
	t.Helper()
	path, db := visitsSchema(t, t.TempDir(), mu, delta)
	rows, want := visitRows(singles)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO visits VALUES (?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := ins.Exec(r.pid, r.ward, r.stay); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return path, db, want
}

// visitsSchema creates dir/visits.db with a scope of budget mu and delta and
// the table visits(pid, ward, stay), empty, protected: privacy unit pid, at
// most 2 wards and 3 visits per ward per person, stays bounded to [0, 10].
func visitsSchema(t *testing.T, dir string, mu, delta float64) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(dir, "visits.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`SELECT dp_init(?, ?)`, mu, delta); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE visits (pid INTEGER, ward TEXT, stay REAL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT dp_protect('visits', json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 3, 'bounds', json_object('stay', json_array(0, 10))))`); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// visit is one row of visits; a nil pid is a visit without a person.
type visit struct {
	pid  any
	ward string
	stay float64
}

// visitRows makes the visits and their exact figures after bounding:
//
//   - 20,000 persons in 8 wards w0..w7: person p has 3 visits in ward
//     w(p%8) and 2 in w((p+1)%8), all kept by the bounds: each ward counts
//     12,500 visits; stays are multiples of 0.5 in [0, 20] (clamped to 10).
//   - 1,000 persons with 10 visits each in ward "heavy", stay 4: bounded to
//     3 visits each, so the ward counts 3,000 and sums 12,000.
//   - singles one-person wards s0, s1, ...: one visit each.
//   - 100 visits without a pid (dropped).
func visitRows(singles int) ([]visit, map[string]wardFigures) {
	var rows []visit
	want := map[string]wardFigures{}
	add := func(pid any, ward string, stay float64, counted bool) {
		rows = append(rows, visit{pid, ward, stay})
		if counted {
			f := want[ward]
			f.count++
			f.stays = append(f.stays, stay)
			want[ward] = f
		}
	}
	for p := range 20000 {
		for j := range 5 {
			w := p % 8
			if j >= 3 {
				w = (p + 1) % 8
			}
			add(int64(p), fmt.Sprintf("w%d", w), float64((p*7+j*3)%41)/2, true)
		}
	}
	for p := 20000; p < 21000; p++ {
		for j := range 10 {
			add(int64(p), "heavy", 4, j < 3)
		}
	}
	for i := range singles {
		add(int64(30000+i), fmt.Sprintf("s%d", i), 1, true)
	}
	for range 100 {
		add(nil, "w0", 5, false)
	}
	return rows, want
}

// wardFigures are a ward's exact figures after bounding.
type wardFigures struct {
	count int
	stays []float64
}

// sum is the exact SUM of the ward's clamped stays in fixed point of quantum q.
func (w wardFigures) sum(q float64) float64 {
	var s float64
	for _, v := range w.stays {
		s += math.Round(math.Min(10, math.Max(0, v))/q) * q
	}
	return s
}

// lastCharge returns the mechanism, params and query of the ledger's last charge.
func lastCharge(t *testing.T, db *sql.DB) (mechanism.Mechanism, map[string]any, string) {
	t.Helper()
	lr := ledgerRows(t, db)
	if len(lr) == 0 {
		t.Fatal("no charge in the ledger")
	}
	l := lr[len(lr)-1]
	return l.mechanism, l.params, l.query
}

// statementParts returns the ledger details' statement_parts by part name.
func statementParts(t *testing.T, params map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	parts, _ := params["statement_parts"].([]any)
	for _, p := range parts {
		m := p.(map[string]any)
		out[m["part"].(string)] = m
	}
	if len(out) == 0 {
		t.Fatalf("no statement_parts in %v", params)
	}
	return out
}

const wardQuery = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 2) ward, COUNT(*) AS n, SUM(stay) AS total, AVG(stay) AS mean FROM visits GROUP BY ward`

// TestAggregatePipeline runs a protected-mode GROUP BY over 10^5 visits on
// prism and checks: one charge, committed before the run, with exactly the
// mechanism and details protected mode's SQL charges for the same statement;
// every large ward released, its COUNT and SUM within 5 sigma of the exact
// bounded figures (a person's visits beyond max_rows not counted, stays
// clamped); the outcome record; and `dpsql audit verify`.
func TestAggregatePipeline(t *testing.T) {
	path, db, want := visitsDB(t, 20, 1e-5, 0)
	var atRun []ledgerRow
	var hookJob string
	main := &Main{beforeRun: func(job string) error {
		hookJob, atRun = job, ledgerRows(t, db)
		if hasTable(t, db, "wards_rel") {
			t.Error("the release table exists before the pipeline ran")
		}
		if o := outcomes(t, db, job); len(o) != 0 {
			t.Errorf("outcome records before the run: %+v", o)
		}
		return nil
	}}
	code, out, errs := run(t, main, "aggregate", "--db", path, "--into", "wards_rel", "--query", wardQuery, "--table-parts", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum aggregateSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if len(atRun) != 1 || atRun[0].params["job"] != hookJob || atRun[0].query != wardQuery {
		t.Fatalf("ledger when the pipeline started: %+v, want exactly the job's charge", atRun)
	}
	if after := ledgerRows(t, db); len(after) != 1 {
		t.Fatalf("%d charges after the job, want 1", len(after))
	}
	checkWardsAgainstSQL(t, path, db, "wards_rel", hookJob, atRun[0].id, want)
}

// checkWardsAgainstSQL checks the release table into of job (charge
// chargeID, the last charge of the ledger) of wardQuery over the visits of
// want: every ward released, its COUNT and SUM within 5 sigma of the exact
// bounded figures; the outcome record; then that protected mode's SQL
// charges the same mechanism with the same details for the statement; and
// `dpsql audit verify`.
func checkWardsAgainstSQL(t *testing.T, path string, db *sql.DB, into, job string, chargeID int64, want map[string]wardFigures) {
	t.Helper()
	beamMech, beamParams, _ := lastCharge(t, db)

	// The released rows.
	rows, err := db.Query(`SELECT ward, n, total, mean FROM ` + into + ` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][3]float64{}
	for rows.Next() {
		var w string
		var n int64
		var total, mean float64
		if err := rows.Scan(&w, &n, &total, &mean); err != nil {
			t.Fatal(err)
		}
		got[w] = [3]float64{float64(n), total, mean}
	}
	rows.Close()
	if o := outcomes(t, db, job); len(o) != 1 || o[0] != (Outcome{Status: statusReleased, Charge: chargeID, Into: into, Rows: len(got)}) {
		t.Fatalf("outcome records %+v", o)
	}
	parts := statementParts(t, beamParams)
	sigmaN, sigmaS := parts["count"]["sigma"].(float64), parts["sum"]["sigma"].(float64)
	quant := parts["sum"]["quantum"].(float64)
	if len(got) != 9 {
		t.Fatalf("released wards %v, want w0..w7 and heavy", got)
	}
	for w, f := range want {
		g, ok := got[w]
		if !ok {
			t.Errorf("ward %s (%d persons' visits) was not released", w, f.count)
			continue
		}
		if d := g[0] - float64(f.count); math.Abs(d) > 5*sigmaN {
			t.Errorf("ward %s: COUNT %v, exact %d (sigma %.3g)", w, g[0], f.count, sigmaN)
		}
		if d := g[1] - f.sum(quant); math.Abs(d) > 5*sigmaS {
			t.Errorf("ward %s: SUM %v, exact %v (sigma %.3g)", w, g[1], f.sum(quant), sigmaS)
		}
		if m := f.sum(quant) / float64(f.count); math.Abs(g[2]-m) > 0.05 {
			t.Errorf("ward %s: AVG %v, exact %v", w, g[2], m)
		}
	}
	// Without bounding the heavy ward would count 10,000 visits.
	if math.Abs(sigmaN) > 100 {
		t.Fatalf("count sigma %v is too large for the test to see a failure of bounding", sigmaN)
	}

	// Protected mode's SQL charges the same mechanism with the same details.
	an, err := ext.OpenAnalyst(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer an.Close()
	sqlRows, err := an.Query(wardQuery)
	if err != nil {
		t.Fatal(err)
	}
	for sqlRows.Next() {
	}
	sqlRows.Close()
	sqlMech, sqlParams, sqlQuery := lastCharge(t, db)
	if sqlQuery != wardQuery {
		t.Fatalf("the SQL path's charge records %q", sqlQuery)
	}
	if !reflect.DeepEqual(beamMech, sqlMech) {
		t.Fatalf("dpsql-beam charged %+v, protected mode's SQL %+v", beamMech, sqlMech)
	}
	for _, k := range []string{"engine", "job", "runner"} {
		if _, ok := beamParams[k]; !ok {
			t.Errorf("the beam charge lacks %q", k)
		}
		delete(beamParams, k)
	}
	if !reflect.DeepEqual(beamParams, sqlParams) {
		t.Fatalf("ledger details differ:\nbeam %v\nsql  %v", beamParams, sqlParams)
	}
	auditVerify(t, path)
}

// TestAggregateOnePersonPartitions: each of 2,000 wards holds one person's
// one visit, at a scope delta of 0.5 and OPTIONS selection_delta = 0.005, large; each
// such ward is released with probability at most delta_s / max_groups
// (the threshold's design), so over 2 jobs (4,000 trials) about 10 are
// released and never more than the binomial tail allows. Without partition
// selection every one of them would be released.
func TestAggregateOnePersonPartitions(t *testing.T) {
	const singles, jobs = 2000, 2
	path, db, _ := visitsDB(t, 40, 0.5, singles)
	released := 0
	var deltaS float64
	for j := range jobs {
		into := fmt.Sprintf("rel%d", j)
		code, _, errs := run(t, nil, "aggregate", "--db", path, "--into", into,
			"--query", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, selection_delta = 0.005) ward, COUNT(*) AS n FROM visits GROUP BY ward`)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var n, big int
		if err := db.QueryRow(`SELECT count(*) FILTER (WHERE ward LIKE 's%'), count(*) FILTER (WHERE ward NOT LIKE 's%') FROM `+into).Scan(&n, &big); err != nil {
			t.Fatal(err)
		}
		if big != 9 {
			t.Fatalf("job %d released %d of the 9 large wards", j, big)
		}
		released += n
		_, params, _ := lastCharge(t, db)
		deltaS = statementParts(t, params)["selection"]["delta"].(float64)
	}
	if deltaS != 0.005 {
		t.Fatalf("delta_s %v, want the statement's selection_delta 0.005", deltaS)
	}
	trials := float64(singles * jobs)
	p := deltaS / 2 // max_groups = 2
	limit := trials*p + 5*math.Sqrt(trials*p) + 3
	t.Logf("%d of %v one-person wards released (at most delta_s = %v each; expected about %.1f)", released, trials, deltaS, trials*p)
	if float64(released) > limit {
		t.Fatalf("%d of %v one-person wards released, above %.1f (p = %v)", released, trials, limit, p)
	}
	if n := len(ledgerRows(t, db)); n != jobs {
		t.Fatalf("%d charges for %d jobs", n, jobs)
	}
	auditVerify(t, path)
}

// TestAggregateRefusals: statements protected mode refuses, and bad
// options, are refused before anything is charged.
func TestAggregateRefusals(t *testing.T) {
	path, db := initDB(t, 5)
	if _, err := db.Exec(`CREATE TABLE v (pid INTEGER, ward TEXT, stay REAL); INSERT INTO v VALUES (1, 'a', 2)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE plain (x); SELECT dp_protect('v', json_object('privacy_unit', 'pid'))`); err != nil {
		t.Fatal(err)
	}
	q := func(s string) []string {
		return []string{"aggregate", "--db", path, "--into", "rel", "--query", "SELECT WITH DIFFERENTIAL_PRIVACY " + s}
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"unprotected table", q("OPTIONS (mu = 1) COUNT(*) FROM plain"), 1, "not protected"},
		{"no bounds", q("OPTIONS (mu = 1) ward, SUM(stay) FROM v GROUP BY ward"), 1, "needs bounds"},
		{"no budget option", q("ward, COUNT(*) FROM v GROUP BY ward"), 1, "OPTIONS"},
		{"over budget", q("OPTIONS (mu = 9) COUNT(*) FROM v"), 1, "privacy budget exceeded"},
		{"not DP", []string{"aggregate", "--db", path, "--into", "rel", "--query", "SELECT * FROM v"}, 2, "SELECT WITH DIFFERENTIAL_PRIVACY"},
		{"no into", []string{"aggregate", "--db", path, "--query", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM v"}, 2, "--into"},
		{"reserved into", append(q("OPTIONS (mu = 1) COUNT(*) FROM v"), "--into", "dp_x"), 2, "reserved"},
		{"into exists", append(q("OPTIONS (mu = 1) COUNT(*) FROM v"), "--into", "plain"), 2, "already exists"},
		{"positional", append(q("OPTIONS (mu = 1) COUNT(*) FROM v"), "extra"), 2, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.err) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.err)
			}
			if n := len(ledgerRows(t, db)); n != 0 {
				t.Fatalf("a refused run left %d charges", n)
			}
			if hasTable(t, db, "rel") {
				t.Fatal("a refused run made a release table")
			}
		})
	}
}

// TestAggregateFailedJob: a job that fails after its charge keeps the
// charge, records the failure, and releases nothing.
func TestAggregateFailedJob(t *testing.T) {
	path, db, _ := visitsDB(t, 5, 1e-5, 0)
	main := &Main{beforeRun: func(string) error { return fmt.Errorf("the cluster went away") }}
	code, _, errs := run(t, main, "aggregate", "--db", path, "--into", "rel", "--query", wardQuery)
	if code != 1 || !strings.Contains(errs, "the cluster went away") || !strings.Contains(errs, "nothing was released") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lr := ledgerRows(t, db)
	if len(lr) != 1 {
		t.Fatalf("%d charges, want the failed job's one", len(lr))
	}
	job, _ := lr[0].params["job"].(string)
	if o := outcomes(t, db, job); len(o) != 1 || o[0].Status != statusFailed || o[0].Charge != lr[0].id || !strings.Contains(o[0].Error, "cluster") {
		t.Fatalf("outcome records %+v", o)
	}
	if hasTable(t, db, "rel") {
		t.Fatal("a failed job left a release table")
	}
	auditVerify(t, path)
}

// TestAggregatePublicKeysAndNoGroupBy: a GROUP BY over public keys releases
// every listed key (also one the data lacks) and nothing else, with no
// partition selection; a statement without GROUP BY releases one row.
func TestAggregatePublicKeysAndNoGroupBy(t *testing.T) {
	path, db, want := visitsDB(t, 20, 1e-5, 3)
	if _, err := db.Exec(`CREATE TABLE wardlist (name TEXT); INSERT INTO wardlist VALUES ('w0'), ('w1'), ('w2'), ('w3'), ('w4'), ('w5'), ('w6'), ('w7'), ('s0'), ('empty')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT dp_protect('visits', json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 3, 'public_keys', json_object('ward', 'wardlist.name')))`); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, nil, "aggregate", "--db", path, "--into", "pk",
		"--query", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ward, COUNT(*) AS n FROM visits GROUP BY ward ORDER BY ward`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	_, params, _ := lastCharge(t, db)
	sigma := statementParts(t, params)["count"]["sigma"].(float64)
	rows, err := db.Query(`SELECT ward, n FROM pk ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var wards []string
	for rows.Next() {
		var w string
		var n int64
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		wards = append(wards, w)
		if exact := float64(want[w].count); math.Abs(float64(n)-exact) > 5*sigma+1 {
			t.Errorf("ward %s: COUNT %d, exact %v (sigma %.3g)", w, n, exact, sigma)
		}
	}
	rows.Close()
	if fmt.Sprint(wards) != "[empty s0 w0 w1 w2 w3 w4 w5 w6 w7]" {
		t.Fatalf("released wards %v, want the listed ones in ORDER BY order", wards)
	}
	code, _, errs = run(t, nil, "aggregate", "--db", path, "--into", "total",
		"--query", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM visits WHERE ward = 'nowhere'`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM total`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a statement without GROUP BY released %d rows (%v), want 1", n, err)
	}
	auditVerify(t, path)
}
