package sqlfuncs_test

import (
	"database/sql"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"
	"github.com/dpsql/dpsql/version"

	"github.com/dpsql/dpsql/ext"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

func openDB(t testing.TB, initSQL string) *sql.DB {
	t.Helper()
	db, err := ext.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if initSQL != "" {
		if _, err := db.Exec(initSQL); err != nil {
			t.Fatalf("%s: %v", initSQL, err)
		}
	}
	return db
}

func ledgerRows(t testing.TB, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGaussianDistribution(t *testing.T) {
	// 4000 calls of mu = 0.02 compose to mu 1.26: within what the samplers'
	// recorded error (noise_tv, paid from delta) lets a scope certify.
	db := openDB(t, `SELECT dp_init(2)`)
	const n, x, sens, mu = 4000, 10.0, 2.0, 0.02
	// sigma of the mechanism, as dp_gaussian calibrates it (grid slack included).
	var sigma float64
	xs := make([]float64, n)
	for i := range xs {
		if err := db.QueryRow(`SELECT dp_gaussian(?, ?, ?)`, x, sens, mu).Scan(&xs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.QueryRow(`SELECT json_extract(params, '$.sigma') FROM dp_ledger WHERE kind = 'charge' LIMIT 1`).Scan(&sigma); err != nil {
		t.Fatal(err)
	}
	if math.Abs(sigma-sens/mu) > 1e-3*sens/mu {
		t.Fatalf("sigma = %v, want about sensitivity/mu = %v", sigma, sens/mu)
	}
	mean, sd := stat.MeanStdDev(xs, nil)
	if se := sigma / math.Sqrt(n); math.Abs(mean-x) > 5*se {
		t.Errorf("mean of noisy values %v, want %v +- %v", mean, x, 5*se)
	}
	// Var of the sample variance is about 2 sigma^4/(n-1).
	if v, want := sd*sd, sigma*sigma; math.Abs(v-want) > 5*want*math.Sqrt(2.0/(n-1)) {
		t.Errorf("variance %v, want %v", v, want)
	}
	z := make([]float64, n)
	for i := range xs {
		z[i] = (xs[i] - x) / sigma
	}
	sort.Float64s(z)
	ks := stat.KolmogorovSmirnov(z, nil, unitNormalSample(), nil)
	// Compare against the normal CDF directly: sup |F_n - Phi|.
	d := 0.0
	for i, v := range z {
		c := distuv.UnitNormal.CDF(v)
		d = math.Max(d, math.Max(math.Abs(float64(i+1)/n-c), math.Abs(c-float64(i)/n)))
	}
	// 1.95/sqrt(n) is the 0.1% critical value of the one-sample KS
	// statistic (CI runs this test twice, with and without the seed tag).
	if crit := 1.95 / math.Sqrt(n); d > crit {
		t.Errorf("KS distance to N(0,1) = %.4f > %.4f (two-sample KS %.4f)", d, crit, ks)
	}
	if got := ledgerRows(t, db); got != n {
		t.Errorf("%d ledger rows for %d calls", got, n)
	}
}

func unitNormalSample() []float64 {
	q := make([]float64, 999)
	for i := range q {
		q[i] = distuv.UnitNormal.Quantile(float64(i+1) / 1000)
	}
	return q
}

func TestGaussianEpsilonDeltaForm(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	var v, mu float64
	if err := db.QueryRow(`SELECT dp_gaussian(0, 1, 1.0, 1e-5)`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	db.QueryRow(`SELECT mu FROM dp_ledger WHERE kind = 'charge'`).Scan(&mu)
	want, _ := sqlfuncsMu(db, 1, 1e-5)
	if math.Abs(mu-want) > 1e-12 || math.Abs(mu-0.268051123211294) > 1e-9 {
		t.Errorf("dp_gaussian(x, 1, eps=1, delta=1e-5) charged mu = %v, want gdp_mu = %v", mu, want)
	}
}

func sqlfuncsMu(db *sql.DB, eps, delta float64) (float64, error) {
	var m float64
	err := db.QueryRow(`SELECT gdp_mu(?, ?)`, eps, delta).Scan(&m)
	return m, err
}

func TestGaussianVector(t *testing.T) {
	db := openDB(t, `SELECT dp_init(10, 0.5)`) // mu = 5 is certifiable with noise_tv at this delta
	in := []float32{1, 2, 3, 4}
	var out []byte
	if err := db.QueryRow(`SELECT dp_gaussian(?, 1, 5)`, vector.Encode(in)).Scan(&out); err != nil {
		t.Fatal(err)
	}
	v, err := vector.Decode(out)
	if err != nil || len(v) != 4 {
		t.Fatalf("noisy vector %v, %v", v, err)
	}
	var dim int
	db.QueryRow(`SELECT json_extract(params, '$.dim') FROM dp_ledger WHERE kind = 'charge'`).Scan(&dim)
	if dim != 4 {
		t.Errorf("ledger dim = %d", dim)
	}
}

func TestConversionsInSQL(t *testing.T) {
	db := openDB(t, "")
	var d, e, m float64
	if err := db.QueryRow(`SELECT gdp_delta(1, 1), gdp_epsilon(0.5016, 1e-5), gdp_mu(2, 1e-5)`).Scan(&d, &e, &m); err != nil {
		t.Fatal(err)
	}
	if math.Abs(d-0.1269367375066439) > 1e-12 || math.Abs(e-2) > 1e-3 || math.Abs(m-0.5015516891696566) > 1e-12 {
		t.Errorf("gdp_delta(1,1)=%v gdp_epsilon(0.5016,1e-5)=%v gdp_mu(2,1e-5)=%v", d, e, m)
	}
	var v string
	if err := db.QueryRow(`SELECT dp_version()`).Scan(&v); err != nil || v != version.Version {
		t.Errorf("dp_version() = %q, %v", v, err)
	}
}

func TestBadInputChargesNothing(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	tests := []struct{ sql, want string }{
		{`SELECT dp_gaussian(NULL, 1, 0.5)`, "got NULL"},
		{`SELECT dp_gaussian('ten', 1, 0.5)`, "got TEXT"},
		{`SELECT dp_gaussian(1, 0, 0.5)`, "sensitivity must be > 0"},
		{`SELECT dp_gaussian(1, -1, 0.5)`, "sensitivity must be > 0"},
		{`SELECT dp_gaussian(1, NULL, 0.5)`, "sensitivity must be a number, got NULL"},
		{`SELECT dp_gaussian(1, 1, 0)`, "mu must be > 0"},
		{`SELECT dp_gaussian(1, 1, -0.5)`, "mu must be > 0"},
		{`SELECT dp_gaussian(1, 1, 'a')`, "mu must be a number"},
		{`SELECT dp_gaussian(1, 1, 0, 1e-5)`, "epsilon must be > 0"},
		{`SELECT dp_gaussian(1, 1, 1, 0)`, "delta must lie strictly between 0 and 1"},
		{`SELECT dp_gaussian(1, 1, 1, 1)`, "delta must lie strictly between 0 and 1"},
		{`SELECT dp_gaussian(1, 1)`, "takes (x, sensitivity, mu)"},
		{`SELECT dp_gaussian(9e999, 1, 0.5)`, "must be finite"},
		{`SELECT dp_gaussian(1, 9e999, 0.5)`, "must be finite"},
		{`SELECT dp_gaussian(x'0000', 1, 0.5)`, "not a multiple of 4"},
		{`SELECT dp_gaussian(x'', 1, 0.5)`, "empty"},
		{`SELECT dp_gaussian(x'0000c07f', 1, 0.5)`, "must be finite"},
		{`SELECT dp_gaussian(1, 1, 0.5, 1e-5, 3)`, "takes"},
		{`SELECT gdp_spend(0)`, "mu must be > 0"},
		{`SELECT gdp_spend(-1)`, "mu must be > 0"},
		{`SELECT gdp_epsilon(1, 0)`, "delta must lie"},
		{`SELECT gdp_epsilon(0, 0.1)`, "mu must be > 0"},
		{`SELECT gdp_delta(1, -1)`, "epsilon must be >= 0"},
		{`SELECT gdp_mu(-1, 1e-5)`, "epsilon must be > 0"},
		{`SELECT dp_use_scope('nope')`, "unknown budget scope"},
		{`SELECT dp_init(-1)`, "mu must be > 0"},
		{`SELECT dp_init(1)`, "already has a budget"},
		{`SELECT dp_init(1, 1e-5, 'rows', 'swap')`, "neighbours must be 'add_remove'"},
		{`SELECT dp_init_epsilon(1, 1e-5, 'rows', 3)`, "neighbours"},
		{`SELECT dp_init(1, 1e-5, 'rows', 'replace_one', 5)`, "takes (mu [, delta [, scope [, neighbours]]])"},
		{`SELECT dp_gaussian(1, 1, 1.5)`, "privacy budget exceeded"},
		// A JSON number beyond float64's range is out of range, in a
		// vector's words (was encoding/json's "cannot unmarshal number 1e400
		// into Go value of type float64").
		{`SELECT dp_gaussian('[1e400]', 1, 0.001)`, "dp_gaussian: x: vector element 0 (1e400) is out of range"},
		{`SELECT dp_gaussian('[1, null]', 1, 0.5)`, "vector element 1 is null, not a number"},
		{`SELECT dp_epsilon('default', 1e-5, 3)`, "dp_epsilon: takes (delta) or (scope, delta), got 3 arguments"},
		{`SELECT dp_budget_remaining('a', 'b')`, "dp_budget_remaining: takes ([scope]), got 2 arguments"},
		{`SELECT dp_version(1)`, "dp_version: takes no arguments, got 1 arguments"},
		{`SELECT dp_tlaplace(1, 1, 1, 0.5)`, "dp_tlaplace: delta must lie strictly between 0 and 0.5, got 0.5"},
		{`SELECT dp_vec_select(NULL, '[0]')`, "dp_vec_select: x is NULL"},
		{`SELECT dp_vec_select(x'0000', '[0]')`, "dp_vec_select: x: vector blob has 2 bytes"},
		{`SELECT dp_select_topm(3, '{}')`, "dp_select_topm: table must be TEXT, got INTEGER: pass the name of a base table"},
	}
	for _, tt := range tests {
		var v any
		err := db.QueryRow(tt.sql).Scan(&v)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to say %q", tt.sql, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "Go value") {
			t.Errorf("%s: %v speaks of Go types", tt.sql, err)
		}
		if fn, _, _ := strings.Cut(strings.TrimPrefix(tt.sql, "SELECT "), "("); err != nil && strings.Count(err.Error(), fn+":") != 1 {
			t.Errorf("%s: %v does not name %s exactly once", tt.sql, err, fn)
		}
	}
	if n := ledgerRows(t, db); n != 0 {
		t.Errorf("bad input charged the budget: %d ledger rows", n)
	}
}

func TestNoLedgerNoCharge(t *testing.T) {
	db := openDB(t, "")
	var v float64
	err := db.QueryRow(`SELECT dp_gaussian(1, 1, 0.5)`).Scan(&v)
	if err == nil || !strings.Contains(err.Error(), "dpsql init") {
		t.Errorf("dp_gaussian without a ledger: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE 'dp_%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a noisy query created %d ledger objects", n)
	}
}

func TestRefusesInsideWritesAndTransactions(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	db.Exec(`CREATE TABLE t(x)`)
	for _, q := range []string{
		`INSERT INTO t SELECT dp_gaussian(1, 1, 0.1)`,
		`CREATE TABLE t2 AS SELECT dp_gaussian(1, 1, 0.1) AS x`,
	} {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "read-only statement") {
			t.Errorf("%s: err = %v", q, err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	if err := tx.QueryRow(`SELECT dp_gaussian(1, 1, 0.1)`).Scan(&v); err == nil || !strings.Contains(err.Error(), "outside BEGIN") {
		t.Errorf("inside a transaction: %v", err)
	}
	tx.Rollback()
	if n := ledgerRows(t, db); n != 0 {
		t.Errorf("%d charges from refused statements", n)
	}
}

func TestScopesAndSpend(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1), dp_init(0.5, 1e-6, 'study')`)
	db.SetMaxOpenConns(1) // dp_use_scope is per connection
	var s string
	var rem float64
	if err := db.QueryRow(`SELECT dp_use_scope('study')`).Scan(&s); err != nil || s != "study" {
		t.Fatalf("dp_use_scope: %q %v", s, err)
	}
	if err := db.QueryRow(`SELECT gdp_spend(0.3, 'trained a model elsewhere')`).Scan(&rem); err != nil {
		t.Fatal(err)
	}
	if math.Abs(rem-0.4) > 1e-12 {
		t.Errorf("gdp_spend(0.3) in a 0.5 budget leaves %v, want 0.4 (sqrt(0.25 - 0.09))", rem)
	}
	if err := db.QueryRow(`SELECT dp_budget_remaining('default')`).Scan(&rem); err != nil || math.Abs(rem-1) > 1e-6 { // a call's noise_tv is paid from delta
		t.Errorf("default scope remaining %v %v", rem, err)
	}
	var scope, note string
	db.QueryRow(`SELECT scope, json_extract(params, '$.note') FROM dp_ledger WHERE kind = 'charge'`).Scan(&scope, &note)
	if scope != "study" || note != "trained a model elsewhere" {
		t.Errorf("ledger row scope %q note %q", scope, note)
	}
	var dsnScope string
	db2, err := sql.Open(ext.DriverName, "file:"+filepath.Join(t.TempDir(), "x.db")+"?dp_scope=other&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if err := db2.QueryRow(`SELECT dp_scope()`).Scan(&dsnScope); err != nil || dsnScope != "other" {
		t.Errorf("dp_scope() with dp_scope=other in the DSN: %q %v", dsnScope, err)
	}
}

func TestQueryTextRecorded(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	var v float64
	const q = `SELECT dp_gaussian(42, 1, 0.1) AS answer`
	if err := db.QueryRow(q).Scan(&v); err != nil {
		t.Fatal(err)
	}
	var got string
	db.QueryRow(`SELECT query FROM dp_ledger WHERE kind = 'charge'`).Scan(&got)
	if got != q {
		t.Errorf("ledger query = %q, want %q", got, q)
	}
}

func TestNoiseIsNotFolded(t *testing.T) {
	db := openDB(t, `SELECT dp_init(100)`)
	var a, b float64
	if err := db.QueryRow(`SELECT dp_gaussian(1, 1, 1), dp_gaussian(1, 1, 1)`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two calls gave the same noisy value %v", a)
	}
	if n := ledgerRows(t, db); n != 2 {
		t.Errorf("%d charges for two calls", n)
	}
}

// TestFunctionList pins the exact set of functions dpsql adds to a connection
// (dp_protect and dp_unprotect come from package protect, through ext).
func TestFunctionList(t *testing.T) {
	db := openDB(t, "")
	rows, err := db.Query(`SELECT DISTINCT name FROM pragma_function_list WHERE name LIKE 'dp\_%' ESCAPE '\' OR name LIKE 'gdp\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		got = append(got, n)
	}
	want := []string{"dp_avgmix", "dp_budget_remaining", "dp_cost", "dp_cost_report", "dp_epsilon", "dp_gaussian",
		"dp_init", "dp_init_epsilon", "dp_laplace", "dp_optnoise", "dp_protect", "dp_scope", "dp_select_topm", "dp_tlaplace", "dp_unprotect", "dp_use_scope", "dp_vec_select", "dp_vec_sum", "dp_version",
		"gdp_delta", "gdp_epsilon", "gdp_mu", "gdp_spend"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("functions:\n got  %v\n want %v", got, want)
	}
}

// TestSQLReferenceNamesEveryFunction keeps docs/sql-reference.md, the one
// reference of the SQL surface (the package doc points there), complete: every
// function a connection gets appears in it as `name(`.
func TestSQLReferenceNamesEveryFunction(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "sql-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, "")
	rows, err := db.Query(`SELECT DISTINCT name FROM pragma_function_list WHERE name LIKE 'dp\_%' ESCAPE '\' OR name LIKE 'gdp\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.Contains(string(doc), "`"+name+"(") {
			t.Errorf("docs/sql-reference.md does not document %s (no `%s(`)", name, name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d functions listed", n)
	}
}
