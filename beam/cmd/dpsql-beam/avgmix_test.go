package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/npy"
)

// run executes dpsql-beam with args and returns its exit status, stdout and
// stderr.
func run(t testing.TB, m *Main, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if m == nil {
		m = &Main{}
	}
	m.Stdout, m.Stderr = &out, &errb
	code := m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

// initDB creates a dpsql database with a budget of mu in the default scope.
func initDB(t testing.TB, mu float64) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "beam.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`SELECT dp_init(?)`, mu); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// row is one generated data row: two features and a class of two.
type row struct {
	x     [2]float32
	class int
}

// genRows makes n rows whose values are multiples of 2^-3 with norm below 1,
// so clipping to 1 leaves them exactly as they are: feature 0 is +-1/8 at
// random, feature 1 is 1/4 for class 0 and -3/8 for class 1, classes
// alternate.
func genRows(n int) []row {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]row, n)
	for i := range rows {
		c := i % 2
		s := float32(0.125)
		if r.IntN(2) == 0 {
			s = -s
		}
		rows[i] = row{x: [2]float32{s, [2]float32{0.25, -0.375}[c]}, class: c}
	}
	return rows
}

func f32blob(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// writeTable stores rows as dpsql import does.
func writeTable(t *testing.T, db *sql.DB, name string, rows []row) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`CREATE TABLE ` + name + ` (id INTEGER PRIMARY KEY, features BLOB NOT NULL, label INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if _, err := tx.Exec(`INSERT INTO `+name+` VALUES (?, ?, ?)`, i+1, f32blob(r.x[:]...), r.class); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// readRelease reads a release table's rows as (x, y) vectors.
func readRelease(t *testing.T, db *sql.DB, table string) (xs, ys [][]float32) {
	t.Helper()
	rows, err := db.Query(`SELECT x, y FROM ` + table + ` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	dec := func(b []byte) []float32 {
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v
	}
	for rows.Next() {
		var xb, yb []byte
		if err := rows.Scan(&xb, &yb); err != nil {
			t.Fatal(err)
		}
		xs, ys = append(xs, dec(xb)), append(ys, dec(yb))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return xs, ys
}

// ledgerRow is what the tests read back from dp_ledger.
type ledgerRow struct {
	id        int64
	mechanism mechanism.Mechanism
	params    map[string]any
	query     string
}

func ledgerRows(t *testing.T, db *sql.DB) []ledgerRow {
	t.Helper()
	rows, err := db.Query(`SELECT id, params, coalesce(query, '') FROM dp_ledger WHERE kind = 'charge' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		var p string
		if err := rows.Scan(&r.id, &p, &r.query); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(p), &r.params); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(p), &r.mechanism); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// outcomes returns the outcome records of job, in ledger order, after
// checking the hash chain.
func outcomes(t *testing.T, db *sql.DB, job string) []Outcome {
	t.Helper()
	rows, err := ledger.ReadRecords(context.Background(), db, ledger.EventOutcome)
	if err != nil {
		t.Fatal(err)
	}
	var out []Outcome
	for _, r := range rows {
		if r.Mechanism != job {
			continue
		}
		var o Outcome
		if err := json.Unmarshal([]byte(r.Params), &o); err != nil {
			t.Fatalf("outcome record %d: %v", r.ID, err)
		}
		if r.Mu != 0 {
			t.Fatalf("outcome record %d spends mu %v", r.ID, r.Mu)
		}
		out = append(out, o)
	}
	return out
}

// auditVerify runs `dpsql audit verify` (built from the root module this
// module replaces) on the file and fails unless it passes.
func auditVerify(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command(dpsqlBinary(t), "audit", "verify", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ledger OK") {
		t.Fatalf("dpsql audit verify %s: %v\n%s", path, err, out)
	}
}

// dpsqlBinary returns the path of dpsql, built once per test binary from the
// root module this module replaces.
func dpsqlBinary(t *testing.T) string {
	t.Helper()
	dpsqlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dpsql-bin-")
		if err != nil {
			dpsqlErr = err
			return
		}
		dpsqlBin = filepath.Join(dir, "dpsql")
		cmd := exec.Command("go", "build", "-o", dpsqlBin, "./cmd/dpsql")
		cmd.Dir = filepath.Join("..", "..", "..") // the root module
		if out, err := cmd.CombinedOutput(); err != nil {
			dpsqlErr = fmt.Errorf("building dpsql: %v\n%s", err, out)
		}
	})
	if dpsqlErr != nil {
		t.Fatal(dpsqlErr)
	}
	return dpsqlBin
}

var (
	dpsqlOnce sync.Once
	dpsqlBin  string
	dpsqlErr  error
)

func hasTable(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// moments returns the mean and variance of column j.
func moments(vs [][]float32, j int) (mean, variance float64) {
	var s1, s2 float64
	for _, v := range vs {
		s1 += float64(v[j])
		s2 += float64(v[j]) * float64(v[j])
	}
	n := float64(len(vs))
	return s1 / n, s2/n - (s1/n)*(s1/n)
}

// TestAvgmixPipeline runs the release on prism over 10^5 rows and checks:
// the ledger is charged exactly once, before the pipeline runs; the charge
// is exactly what dp_avgmix charges for the same public parameters; and the
// released rows have the law of release/avgmix (the same mean and variance
// per coordinate as theory and as the SQL function's release of the same
// table).
func TestAvgmixPipeline(t *testing.T) {
	const n, T, m = 100000, 20000, 20
	path, db := initDB(t, 10)
	rows := genRows(n)
	writeTable(t, db, "train", rows)

	var atRun []ledgerRow
	var hookJob string
	main := &Main{beforeRun: func(job string) error {
		hookJob = job
		atRun = ledgerRows(t, db)
		if hasTable(t, db, "beamrel") {
			t.Error("the release table exists before the pipeline ran")
		}
		if o := outcomes(t, db, job); len(o) != 0 {
			t.Errorf("outcome records before the run: %+v", o)
		}
		return nil
	}}
	code, out, errs := run(t, main, "avgmix", "--db", path, "--into", "beamrel", "--mu", "1", "--n", fmt.Sprint(n),
		"--T", fmt.Sprint(T), "--m", fmt.Sprint(m), "--table", "train", "--classes", "2", "--table-parts", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum avgmixSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}

	// Charged exactly once, before the run.
	if len(atRun) != 1 || atRun[0].params["job"] != hookJob {
		t.Fatalf("ledger when the pipeline started: %+v, want exactly the job's charge", atRun)
	}
	after := ledgerRows(t, db)
	if len(after) != 1 || after[0].id != atRun[0].id {
		t.Fatalf("ledger after the run: %d rows, want the one charge", len(after))
	}
	if o := outcomes(t, db, hookJob); len(o) != 1 || o[0] != (Outcome{Status: statusReleased, Charge: atRun[0].id, Into: "beamrel", Rows: T}) {
		t.Fatalf("outcome records %+v, want one: released %d rows into beamrel, charge %d", o, T, atRun[0].id)
	}

	// The SQL function on the same table with the same public parameters
	// (n asserted, as dpsql-beam's --n) charges the same mechanism.
	var sqlSum string
	if err := db.QueryRow(fmt.Sprintf(`SELECT dp_avgmix(features, label, json_object('into', 'sqlrel', 'n', %d, 'mu', 1.0, 'T', %d, 'm', %d, 'classes', 2)) FROM train`, n, T, m)).Scan(&sqlSum); err != nil {
		t.Fatal(err)
	}
	lr := ledgerRows(t, db)
	if len(lr) != 2 {
		t.Fatalf("%d ledger rows, want 2", len(lr))
	}
	if !reflect.DeepEqual(lr[0].mechanism, lr[1].mechanism) {
		t.Fatalf("dpsql-beam charged %+v, dp_avgmix %+v", lr[0].mechanism, lr[1].mechanism)
	}
	for _, k := range []string{"n", "d", "K", "T", "m", "sampling", "sigma_x", "sigma_y", "sigma_applied", "mu_clt", "target_epsilon", "target_delta", "noise_tv", "into"} {
		b, s := lr[0].params[k], lr[1].params[k]
		if k == "into" {
			b, s = b == "beamrel", s == "sqlrel"
		}
		if fmt.Sprint(b) != fmt.Sprint(s) {
			t.Errorf("ledger detail %s: dpsql-beam %v, dp_avgmix %v", k, b, s)
		}
	}
	if !strings.HasPrefix(lr[0].query, "dpsql-beam avgmix ") || lr[0].params["engine"] != "beam" {
		t.Errorf("the beam charge records query %q, engine %v", lr[0].query, lr[0].params["engine"])
	}
	// The summary dpsql-beam prints and its ledger row come from one quote
	// and agree on every key they share.
	var printed map[string]any
	if err := json.Unmarshal([]byte(out), &printed); err != nil {
		t.Fatal(err)
	}
	shared := 0
	for k, v := range printed {
		if rv, ok := lr[0].params[k]; ok {
			shared++
			if fmt.Sprint(rv) != fmt.Sprint(v) {
				t.Errorf("key %s: the summary prints %v, the ledger row holds %v", k, v, rv)
			}
		}
	}
	if shared < 10 || printed["epsilon_rigorous"] != lr[0].params["quote_epsilon"] || printed["delta"] != lr[0].params["quote_delta"] {
		t.Errorf("summary %v shares %d keys with the row %v", printed, shared, lr[0].params)
	}

	// The law. With q = m/n, output coordinate j has mean sum_i x_ij / n and
	// variance (q (1-q) sum_i x_ij^2 + s_j^2) / m^2, s_j the noise scale on
	// the sum; the rows are exact under clipping.
	q := float64(m) / n
	var s1, s2 [4]float64
	for _, r := range rows {
		v := [4]float64{float64(r.x[0]), float64(r.x[1]), 0, 0}
		v[2+r.class] = 1
		for j := range v {
			s1[j] += v[j]
			s2[j] += v[j] * v[j]
		}
	}
	sx := sum.SigmaX // Cx = 1
	sy := sum.SigmaY
	bx, by := readRelease(t, db, "beamrel")
	qx, qy := readRelease(t, db, "sqlrel")
	if len(bx) != T || len(qx) != T {
		t.Fatalf("%d and %d released rows, want %d", len(bx), len(qx), T)
	}
	for j := range 4 {
		noise := sx
		cols, colsSQL, jj := bx, qx, j
		if j >= 2 {
			noise, cols, colsSQL, jj = sy, by, qy, j-2
		}
		wantMean := s1[j] / n
		wantVar := (q*(1-q)*s2[j] + noise*noise) / (m * m)
		for _, rel := range []struct {
			name string
			vs   [][]float32
		}{{"dpsql-beam", cols}, {"dp_avgmix", colsSQL}} {
			mean, v := moments(rel.vs, jj)
			if se := math.Sqrt(wantVar / T); math.Abs(mean-wantMean) > 5*se {
				t.Errorf("%s coordinate %d: mean %.5f, want %.5f (se %.5f)", rel.name, j, mean, wantMean, se)
			}
			// The outputs are near-Gaussian; the variance's relative
			// standard error is about sqrt(2/T) = 1%.
			if math.Abs(v/wantVar-1) > 6*math.Sqrt(2.0/T) {
				t.Errorf("%s coordinate %d: variance %.5f, want %.5f", rel.name, j, v, wantVar)
			}
		}
	}
	// The noise is a real share of the feature variance, so a wrong scale
	// would show above.
	if frac := sx * sx / (q*(1-q)*s2[0] + sx*sx); frac < 0.5 {
		t.Fatalf("noise is only %.2f of the feature variance: the test would not see a wrong scale", frac)
	}
	auditVerify(t, path)
}

// TestAvgmixFailedJob: a job whose pipeline fails after the charge (a bad
// label in the second CSV shard, found only by a worker) keeps its charge,
// records the failure and releases nothing.
func TestAvgmixFailedJob(t *testing.T) {
	path, db := initDB(t, 5)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	var a, b strings.Builder
	a.WriteString("f0,f1,label\n")
	b.WriteString("f0,f1,label\n")
	for i := range 2000 {
		fmt.Fprintf(&a, "0.1,0.2,%d\n", i%2)
		l := i % 2
		if i == 1500 {
			l = 7 // not a class of 2
		}
		fmt.Fprintf(&b, "0.3,0.1,%d\n", l)
	}
	os.WriteFile(good, []byte(a.String()), 0o644)
	os.WriteFile(bad, []byte(b.String()), 0o644)
	before := ledgerRows(t, db)
	code, _, errs := run(t, nil, "avgmix", "--db", path, "--into", "rel", "--mu", "1", "--n", "4000", "--T", "300",
		"--csv", good+","+bad, "--classes", "2")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{"label 7 is not a class id", "the budget was spent", "nothing was released"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	after := ledgerRows(t, db)
	if len(after) != len(before)+1 {
		t.Fatalf("%d ledger rows after a failed job, want %d (the charge stays)", len(after), len(before)+1)
	}
	job, _ := after[len(after)-1].params["job"].(string)
	o := outcomes(t, db, job)
	if len(o) != 1 || o[0].Status != statusFailed || o[0].Charge != after[len(after)-1].id || o[0].Rows != 0 ||
		!strings.Contains(o[0].Error, "label 7 is not a class id") {
		t.Fatalf("outcome records %+v, want one: failed, charge %d, the worker's error", o, after[len(after)-1].id)
	}
	if hasTable(t, db, "rel") {
		t.Fatal("a failed job left a release table")
	}
	var spent float64
	if err := db.QueryRow(`SELECT mu_spent FROM dp_budget_status WHERE scope = ?`, accountant.DefaultScope).Scan(&spent); err != nil || !(spent > 0) {
		t.Fatalf("mu spent %v (%v) after a failed job, want > 0", spent, err)
	}
	// The staging directory beside the database is gone.
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".dpsql-beam-*")); len(m) != 0 {
		t.Fatalf("staging left behind: %v", m)
	}
	auditVerify(t, path)
}

// TestAvgmixLegacyJobsTable: a file from a version that kept job outcomes
// in dp_beam_jobs keeps that table as it was (append-only, still readable);
// new jobs record their outcome in the ledger, and the file verifies.
func TestAvgmixLegacyJobsTable(t *testing.T) {
	path, db := initDB(t, 5)
	writeTable(t, db, "train", genRows(500))
	if _, err := db.Exec(legacyJobsSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO dp_beam_jobs(job, at, event, ledger_id, into_table, detail) VALUES ('old', '2026-01-01T00:00:00Z', 'released', 1, 'r0', '10 rows')`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, nil, "avgmix", "--db", path, "--into", "rel", "--mu", "1", "--n", "500", "--T", "50",
		"--table", "train", "--classes", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum avgmixSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_beam_jobs`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("dp_beam_jobs holds %d rows (%v), want the old one only", n, err)
	}
	if o := outcomes(t, db, sum.Job); len(o) != 1 || o[0].Status != statusReleased || o[0].Charge != sum.LedgerID || o[0].Rows != 50 {
		t.Fatalf("outcome records %+v", o)
	}
	auditVerify(t, path)
}

// legacyJobsSchema is dp_beam_jobs as earlier versions created it.
const legacyJobsSchema = `
CREATE TABLE dp_beam_jobs (
  id INTEGER PRIMARY KEY, job TEXT NOT NULL, at TEXT NOT NULL,
  event TEXT NOT NULL CHECK (event IN ('charged', 'released', 'failed')),
  ledger_id INTEGER, into_table TEXT NOT NULL, detail TEXT NOT NULL
);
CREATE TRIGGER dp_beam_jobs_no_update BEFORE UPDATE ON dp_beam_jobs
BEGIN SELECT RAISE(ABORT, 'dp_beam_jobs is append-only: rows cannot be updated'); END;
CREATE TRIGGER dp_beam_jobs_no_delete BEFORE DELETE ON dp_beam_jobs
BEGIN SELECT RAISE(ABORT, 'dp_beam_jobs is append-only: rows cannot be deleted'); END;
`

// TestAvgmixRefusals: bad options and inputs are refused before anything is
// charged.
func TestAvgmixRefusals(t *testing.T) {
	path, db := initDB(t, 1)
	writeTable(t, db, "train", genRows(50))
	if _, err := db.Exec(`CREATE TABLE taken (x)`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	le := binary.LittleEndian
	x1 := filepath.Join(dir, "x1.npy")
	os.WriteFile(x1, npy.Encode("<f4", []int{2, 2}, f32blob(0.1, 0.2, 0.3, 0.4)), 0o644)
	x3 := filepath.Join(dir, "x3.npy")
	os.WriteFile(x3, npy.Encode("<f4", []int{1, 3}, f32blob(0.1, 0.2, 0.3)), 0o644)
	y2 := filepath.Join(dir, "y2.npy")
	os.WriteFile(y2, npy.Encode("<i8", []int{2}, le.AppendUint64(le.AppendUint64(nil, 0), 1)), 0o644)
	y1 := filepath.Join(dir, "y1.npy")
	os.WriteFile(y1, npy.Encode("<i8", []int{1}, le.AppendUint64(nil, 0)), 0o644)
	xb := filepath.Join(dir, "xb.npy")
	os.WriteFile(xb, npy.Encode("|u1", []int{2, 2}, []byte{1, 2, 3, 4}), 0o644)
	c2, c3 := filepath.Join(dir, "c2.csv"), filepath.Join(dir, "c3.csv")
	os.WriteFile(c2, []byte("a,b,label\n0.1,0.2,1\n"), 0o644)
	os.WriteFile(c3, []byte("a,b,c,label\n0.1,0.2,0.3,1\n"), 0o644)
	base := []string{"avgmix", "--db", path, "--into", "rel", "--mu", "0.5", "--n", "50", "--classes", "2"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no n", []string{"avgmix", "--db", path, "--into", "rel", "--mu", "0.5", "--table", "train", "--classes", "2"}, 2, "--n (the public number of rows"},
		{"no budget", []string{"avgmix", "--db", path, "--into", "rel", "--n", "50", "--table", "train", "--classes", "2"}, 2, "--mu (or --epsilon and --delta) is required"},
		{"mu and epsilon", append(base, "--epsilon", "1", "--table", "train"), 2, "not both"},
		{"negative mu", []string{"avgmix", "--db", path, "--into", "rel", "--mu", "-1", "--n", "50", "--table", "train", "--classes", "2"}, 2, "--mu must be positive"},
		{"m above n", append(base, "--m", "51", "--table", "train"), 2, "exceeds n"},
		{"no classes", []string{"avgmix", "--db", path, "--into", "rel", "--mu", "0.5", "--n", "50", "--table", "train"}, 2, "public number of classes"},
		{"label out of classes", append(base, "--table", "train", "--classes", "0"), 2, "public number of classes"},
		{"into exists", []string{"avgmix", "--db", path, "--into", "taken", "--mu", "0.5", "--n", "50", "--table", "train", "--classes", "2"}, 2, "already exists"},
		{"reserved into", []string{"avgmix", "--db", path, "--into", "dp_x", "--mu", "0.5", "--n", "50", "--table", "train", "--classes", "2"}, 2, "reserved"},
		{"two inputs", append(base, "--table", "train", "--csv", "a.csv"), 2, "exactly one input"},
		{"no input", base, 2, "exactly one input"},
		{"npy without labels", append(base, "--npy", x1), 2, "0 label shards"},
		{"npy labels short", append(base, "--npy", x1, "--labels", y1), 2, "different numbers of rows"},
		{"npy widths differ", append(base, "--npy", x1+","+x3, "--labels", y2+","+y1), 2, "has 3 features"},
		{"npy dtypes differ", append(base, "--npy", x1+","+xb, "--labels", y2+","+y2), 2, "differ in type"},
		{"csv widths differ", append(base, "--csv", c2+","+c3), 2, "has 3 features"},
		{"missing file", append(base, "--npy", filepath.Join(dir, "nope.npy"), "--labels", y2), 2, "nope.npy"},
		{"no database", []string{"avgmix", "--db", filepath.Join(dir, "none.db"), "--into", "rel", "--mu", "0.5", "--n", "50", "--table", "train", "--classes", "2"}, 2, "dpsql init"},
		{"unknown scope", append(base, "--scope", "nope", "--table", "train"), 1, "unknown budget scope"},
		{"over budget", []string{"avgmix", "--db", path, "--into", "rel", "--mu", "2", "--n", "50", "--table", "train", "--classes", "2"}, 1, "privacy budget exceeded"},
		{"unknown flag", append(base, "--bogus", "1"), 2, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.err) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.err)
			}
			if n := len(ledgerRows(t, db)); n != 0 {
				t.Fatalf("a refused run left %d ledger rows", n)
			}
			if hasTable(t, db, "rel") {
				t.Fatal("a refused run made a release table")
			}
		})
	}
}

// TestAvgmixNPYHierarchical releases from two npy shards (uint8 features,
// scaled by 1/255 as dpsql import does) with hierarchical sampling, whose
// class choices reach the workers as a side input: every output is
// released, the labels' mean is the classes' frequencies, and the ledger
// charges the per-class steps.
func TestAvgmixNPYHierarchical(t *testing.T) {
	const perShard, T = 3000, 2000
	path, db := initDB(t, 10)
	dir := t.TempDir()
	le := binary.LittleEndian
	var files, labels []string
	count := [3]int{}
	for s := range 2 {
		px := make([]byte, perShard*4)
		var lab []byte
		for i := range perShard {
			c := (i + s) % 3
			if i%5 == 0 {
				c = 0 // class 0 is the most frequent
			}
			count[c]++
			px[i*4+c] = 255
			lab = le.AppendUint64(lab, uint64(c))
		}
		f, l := filepath.Join(dir, fmt.Sprintf("x%d.npy", s)), filepath.Join(dir, fmt.Sprintf("y%d.npy", s))
		os.WriteFile(f, npy.Encode("|u1", []int{perShard, 4}, px), 0o644)
		os.WriteFile(l, npy.Encode("<i8", []int{perShard}, lab), 0o644)
		files, labels = append(files, f), append(labels, l)
	}
	n := 2 * perShard
	// A stale part in the staging directory from elsewhere is never imported.
	stage := filepath.Join(dir, "stage")
	os.MkdirAll(stage, 0o755)
	os.WriteFile(filepath.Join(stage, "part-00000"), []byte("stale"), 0o644)
	code, out, errs := run(t, nil, "avgmix", "--db", path, "--into", "hrel", "--mu", "2", "--n", fmt.Sprint(n), "--T", fmt.Sprint(T),
		"--m", "300", "--sampling", "hierarchical", "--p", "0.5", "--classes", "3", "--staging", stage,
		"--npy", strings.Join(files, ","), "--labels", strings.Join(labels, ","), "--runner", "prism")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum avgmixSummary
	json.Unmarshal([]byte(out), &sum)
	lr := ledgerRows(t, db)
	if len(lr) != 1 || lr[0].params["sampling"] != "hierarchical" || lr[0].params["class_steps"] == nil {
		t.Fatalf("ledger %+v", lr)
	}
	steps := lr[0].params["class_steps"].([]any)
	maxSteps := 0.0
	for _, s := range steps {
		maxSteps = math.Max(maxSteps, s.(float64))
	}
	if lr[0].mechanism.Steps != int(maxSteps) || lr[0].mechanism.Q != 300.0/(float64(n)*0.5) {
		t.Fatalf("charged %+v for class steps %v", lr[0].mechanism, steps)
	}
	if m, _ := filepath.Glob(filepath.Join(stage, "*")); len(m) != 1 {
		t.Fatalf("staging after the job: %v, want only the stale part", m)
	}
	xs, ys := readRelease(t, db, "hrel")
	if len(xs) != T || len(xs[0]) != 4 || len(ys[0]) != 3 {
		t.Fatalf("%d rows of %d and %d values", len(xs), len(xs[0]), len(ys[0]))
	}
	// Output t chooses class c with probability P and then includes each of
	// its rows with probability q = m/(nP): the mean label (and feature) c
	// is P q count_c / m = count_c / n, and its variance is
	// (P count_c q (1-q) + P (1-P) (count_c q)^2 + s^2) / m^2 for the noise
	// scale s on the sum.
	const P, m = 0.5, 300.0
	q := m / (float64(n) * P)
	for c := range 3 {
		cnt := float64(count[c])
		want := cnt / float64(n)
		for _, rel := range []struct {
			vs    [][]float32
			noise float64
		}{{ys, sum.SigmaY}, {xs, sum.SigmaX}} {
			v := (P*cnt*q*(1-q) + P*(1-P)*(cnt*q)*(cnt*q) + rel.noise*rel.noise) / (m * m)
			mean, variance := moments(rel.vs, c)
			if se := math.Sqrt(v / T); math.Abs(mean-want) > 5*se {
				t.Errorf("class %d: mean %.4f, want %.4f (se %.4f)", c, mean, want, se)
			}
			if math.Abs(variance/v-1) > 0.2 {
				t.Errorf("class %d: variance %.5f, want %.5f", c, variance, v)
			}
		}
	}
}

// TestPlanMatchesSQLDefaults: with the defaults (T = n, m = m*(n, T, mu)) and
// with (epsilon, delta) budgets, the driver's plan charges exactly what
// dp_avgmix charges for a table of n rows.
func TestPlanMatchesSQLDefaults(t *testing.T) {
	const n = 3000
	path, db := initDB(t, 50)
	writeTable(t, db, "train", genRows(n))
	l, err := ledger.OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Remaining(context.Background(), accountant.DefaultScope)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		cfg  avgmixConfig
		opts string
	}{
		{avgmixConfig{mu: 1, n: n}, `'mu', 1.0`},
		{avgmixConfig{mu: 0.3, n: n, T: 500, lambda: 2, cx: 3}, `'mu', 0.3, 'T', 500, 'lambda', 2.0, 'cx', 3.0`},
		{avgmixConfig{epsilon: 2, delta: 1e-6, n: n}, `'epsilon', 2.0, 'delta', 1e-6`},
	} {
		tc.cfg.into = fmt.Sprintf("r%d", i)
		pr, err := planAvgmix(&tc.cfg, st, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		q := fmt.Sprintf(`SELECT dp_avgmix(features, label, json_object('into', 'r%d', 'n', %d, 'classes', 2, %s)) FROM train`, i, n, tc.opts)
		if err := db.QueryRow(q).Scan(&out); err != nil {
			t.Fatal(err)
		}
		lr := ledgerRows(t, db)
		last := lr[len(lr)-1]
		if !reflect.DeepEqual(last.mechanism, pr.plan.Mechanism) {
			t.Errorf("case %d: dp_avgmix charged %+v, the driver plans %+v", i, last.mechanism, pr.plan.Mechanism)
		}
		rec, err := pr.quote.Record()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range rec {
			if fmt.Sprint(last.params[k]) != fmt.Sprint(v) {
				t.Errorf("case %d: detail %s is %v in dp_avgmix's row, %v in the driver's", i, k, last.params[k], v)
			}
		}
	}
}

// TestAvgmixPublicNAndFreshNoise: the release follows the asserted n, not the
// data (a table of 2000 rows released for n = 3000 gives T = 3000 rows at
// q = m/3000, and nothing in the output or the summary carries 2000), and an
// adversary who knows every option cannot replay the randomness: the same
// job run twice releases different rows.
func TestAvgmixPublicNAndFreshNoise(t *testing.T) {
	path, db := initDB(t, 10)
	writeTable(t, db, "train", genRows(2000))
	var outs []string
	for _, into := range []string{"r1", "r2"} {
		code, out, errs := run(t, nil, "avgmix", "--db", path, "--into", into, "--mu", "1", "--n", "3000", "--m", "30",
			"--table", "train", "--classes", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(out), &fields); err != nil {
			t.Fatal(err)
		}
		for k, v := range fields {
			if v == 2000.0 {
				t.Fatalf("the summary's %s is the real row count: %s", k, out)
			}
		}
		outs = append(outs, out)
	}
	for _, r := range ledgerRows(t, db) {
		if r.mechanism.Q != 30.0/3000 || r.mechanism.Steps != 3000 {
			t.Fatalf("charged %+v, want q = 30/3000 over 3000 steps", r.mechanism)
		}
	}
	x1, _ := readRelease(t, db, "r1")
	x2, _ := readRelease(t, db, "r2")
	if len(x1) != 3000 || len(x2) != 3000 {
		t.Fatalf("released %d and %d rows, want T = n = 3000", len(x1), len(x2))
	}
	same := 0
	for i := range x1 {
		if x1[i][0] == x2[i][0] {
			same++
		}
	}
	if same > 3 {
		t.Fatalf("%d of 3000 rows repeat between two runs of the same job", same)
	}
}
