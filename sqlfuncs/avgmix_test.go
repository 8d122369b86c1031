package sqlfuncs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/vector"
)

// fillTrain creates table name(features BLOB, label INTEGER) with n rows of
// dimension d and k classes.
func fillTrain(t testing.TB, db *sql.DB, name string, n, d, k int) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE ` + name + `(features BLOB, label)`); err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin()
	ins, _ := tx.Prepare(`INSERT INTO ` + name + ` VALUES (?, ?)`)
	x := make([]float32, d)
	for i := 0; i < n; i++ {
		for j := range x {
			x[j] = float32(math.Sin(float64(i*d+j))) * 0.1
		}
		x[i%k] += 0.5 // the class signal
		if _, err := ins.Exec(vector.Encode(x), i%k); err != nil {
			t.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestAvgmixEndToEnd(t *testing.T) {
	db := openDB(t, `SELECT dp_init(3)`)
	fillTrain(t, db, "train", 3000, 6, 3)
	var out string
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('n', 3000, 'classes', 3, 'into', 'released', 'mu', 1.0, 'T', 1500)) FROM train`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Rows, N, D, K, M, Steps       int
		Q, Sigma, MuCLT, EpsCLT, EpsR float64
		Sampling, Into                string
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	b, _ := json.Marshal(raw)
	json.Unmarshal(b, &s)
	s.MuCLT, s.EpsCLT, s.EpsR = raw["mu_clt"].(float64), raw["epsilon_clt"].(float64), raw["epsilon_rigorous"].(float64)
	if s.Rows != 1500 || s.N != 3000 || s.D != 6 || s.K != 3 || s.Steps != 1500 || s.Sampling != "poisson" {
		t.Errorf("summary %s", out)
	}
	if want := float64(s.M) / 3000; math.Abs(s.Q-want) > 1e-12 {
		t.Errorf("q = %v, want m/n = %v", s.Q, want)
	}
	// The release was calibrated so that its rigorous epsilon at the scope's
	// delta is at most that of mu = 1; the CLT figure is below the rigorous one.
	var epsMu1 float64
	db.QueryRow(`SELECT gdp_epsilon(1, 1e-5)`).Scan(&epsMu1)
	if s.EpsR > epsMu1 || s.EpsR < 0.99*epsMu1 || s.EpsCLT >= s.EpsR {
		t.Errorf("epsilon rigorous %v (target %v), CLT %v", s.EpsR, epsMu1, s.EpsCLT)
	}
	var n, badX, badY int
	db.QueryRow(`SELECT count(*), sum(length(x) != 24), sum(length(y) != 12) FROM released`).Scan(&n, &badX, &badY)
	if n != 1500 || badX != 0 || badY != 0 {
		t.Errorf("released %d rows, %d bad x, %d bad y", n, badX, badY)
	}
	var mech, params, query string
	db.QueryRow(`SELECT mechanism, params, query FROM dp_ledger WHERE kind = 'charge'`).Scan(&mech, &params, &query)
	for _, want := range []string{`"into":"released"`, `"n":3000`, `"n_source":"asserted"`, `"steps":1500`, `"q":`, `"sigma":`} {
		if !strings.Contains(params, want) {
			t.Errorf("ledger params lack %s: %s", want, params)
		}
	}
	if mech != "subsampled_gaussian" || !strings.Contains(query, "dp_avgmix") {
		t.Errorf("ledger row: %s, %q", mech, query)
	}
	var rig sql.NullFloat64
	db.QueryRow(`SELECT epsilon_rigorous FROM dp_budget_status`).Scan(&rig)
	if !rig.Valid || math.Abs(rig.Float64-s.EpsR) > 1e-3*s.EpsR {
		t.Errorf("dp_budget_status.epsilon_rigorous = %v, want %v", rig, s.EpsR)
	}
	// The release averages m rows (weight 1/m): its mean label vector is
	// about q*n/m * (class shares) = (1/3, 1/3, 1/3) plus noise.
	rows, _ := db.Query(`SELECT y FROM released`)
	var sum [3]float64
	for rows.Next() {
		var y []byte
		rows.Scan(&y)
		v, _ := vector.Decode(y)
		for i := range sum {
			sum[i] += float64(v[i])
		}
	}
	for i := range sum {
		if m := sum[i] / 1500; math.Abs(m-1.0/3) > 0.1 {
			t.Errorf("mean released label[%d] = %.3f, want about 1/3", i, m)
		}
	}
}

func TestAvgmixHierarchicalAndVectorLabels(t *testing.T) {
	db := openDB(t, `SELECT dp_init(10, 0.01)`) // mu = 2 is certifiable with noise_tv at this delta
	fillTrain(t, db, "train", 2000, 4, 4)
	var out string
	err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('n', 2000, 'into', 'hs', 'mu', 2.0, 'sampling', 'hierarchical', 'p', 0.5, 'classes', 5)) FROM train`).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	var params string
	db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge'`).Scan(&params)
	if !strings.Contains(params, `"class_steps"`) || !strings.Contains(params, `"sampling":"hierarchical"`) || !strings.Contains(params, `"K":5`) {
		t.Errorf("hierarchical ledger params: %s", params)
	}
	// Soft labels as float32 vectors.
	db.Exec(`CREATE TABLE soft(features BLOB, label BLOB)`)
	for i := 0; i < 500; i++ {
		db.Exec(`INSERT INTO soft VALUES (?, ?)`, vector.Encode([]float32{1, float32(i % 3)}), vector.Encode([]float32{0.5, 0.5}))
	}
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('n', 500, 'into', 'softrel', 'mu', 1.0)) FROM soft`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('into', 'softrel2', 'mu', 1.0, 'classes', 2)) FROM soft`).Scan(&out); err == nil || !strings.Contains(err.Error(), `"classes" applies to INTEGER labels`) {
		t.Errorf("classes with vector labels: %v", err)
	}
	var ylen int
	db.QueryRow(`SELECT max(length(y)) FROM softrel`).Scan(&ylen)
	if ylen != 8 {
		t.Errorf("soft-label release y has %d bytes, want 8", ylen)
	}
}

func TestAvgmixBadInput(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	fillTrain(t, db, "train", 300, 4, 3)
	db.Exec(`CREATE TABLE taken(x)`)
	mk := func(name string, rows ...[2]any) {
		db.Exec(`CREATE TABLE ` + name + `(features, label)`)
		for _, r := range rows {
			db.Exec(`INSERT INTO `+name+` VALUES (?, ?)`, r[0], r[1])
		}
	}
	v4 := vector.Encode([]float32{1, 2, 3, 4})
	nan := append(vector.Encode([]float32{1, 2, 3}), 0, 0, 0xc0, 0x7f)
	mk("dims", [2]any{v4, 0}, [2]any{v4, 1}, [2]any{vector.Encode([]float32{1, 2, 3}), 0})
	mk("nulls", [2]any{v4, 0}, [2]any{nil, 1})
	mk("short", [2]any{v4, 0}, [2]any{[]byte{1, 2, 3, 4, 5, 6, 7}, 1})
	mk("nans", [2]any{v4, 0}, [2]any{nan, 1})
	mk("neg", [2]any{v4, 0}, [2]any{v4, -1})
	mk("nolabel", [2]any{v4, 0}, [2]any{v4, nil})
	mk("textlabel", [2]any{v4, 0}, [2]any{v4, "cat"})
	const opts = `json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5)`
	tests := []struct{ sql, want string }{
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM dims`, "row 3 have 3 dimensions, earlier rows have 4"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM nulls`, "features of row 2: vector is NULL"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM short`, "row 2: vector blob has 7 bytes, not a multiple of 4"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM nans`, "row 2: vector element 3 is NaN"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM neg`, "label of row 2 is -1"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM nolabel`, "label of row 2 is NULL"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM textlabel`, "label of row 2 must be an INTEGER"},
		{`SELECT dp_avgmix(features, label, ` + opts + `) FROM train WHERE 0`, "no rows"},
		{`SELECT dp_avgmix(features, label, json_object('into', 'out', 'mu', 0.5, 'classes', 2)) FROM train`, "outside the 2 classes"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'm', 301)) FROM train`, "m = 301 exceeds n = 300"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'T', 0)) FROM train`, "T (rows to release) must be >= 1"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'sampling', 'hierarchical', 'p', 0.01, 'm', 200)) FROM train`, "q_k = m/(n p) = 200/(300*0.01) = 66.67 exceeds 1"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'sampling', 'magic')) FROM train`, `unknown sampling "magic"`},
		// The message names the function once (a release error is not wrapped again).
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'taken', 'mu', 0.5)) FROM train`, `dp_avgmix: table "taken" already exists`},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'dp_ledger', 'mu', 0.5)) FROM train`, "reserved"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'x; DROP TABLE train', 'mu', 0.5)) FROM train`, "not a plain table name"},
		{`SELECT dp_avgmix(features, label, json_object('mu', 0.5)) FROM train`, `"into"`},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out')) FROM train`, `option "mu"`},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'epsilon', 1)) FROM train`, "not both"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', -0.5)) FROM train`, "mu must be > 0"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'epsilon', 1)) FROM train`, `needs "delta"`},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'lambda', 0)) FROM train`, "lambda must be > 0"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 0.5, 'colour', 'red')) FROM train`, `unknown option "colour"`},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 'lots')) FROM train`, `option "mu"`},
		{`SELECT dp_avgmix(features, label, NULL) FROM train`, "options are NULL"},
		// K from the data would reveal the row holding the largest label.
		{`SELECT dp_avgmix(features, label, json_object('into', 'out', 'mu', 0.5)) FROM train`, `option "classes" (the public number of classes K; labels lie in 0..K-1) is required for INTEGER labels`},
		{`SELECT dp_avgmix(features, label, json_object('classes', 0, 'into', 'out', 'mu', 0.5)) FROM train`, "classes must be >= 1"},
		{`SELECT dp_avgmix(features, label, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 5.0)) FROM train`, "privacy budget exceeded"},
	}
	for _, tt := range tests {
		var out string
		err := db.QueryRow(tt.sql).Scan(&out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s\n  err = %v\n  want it to say %q", tt.sql, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "dp_avgmix: dp_avgmix") {
			t.Errorf("%s: the message names the function twice: %v", tt.sql, err)
		}
		if n := ledgerRows(t, db); n != 0 {
			t.Fatalf("%s charged the budget (err %v)", tt.sql, err)
		}
	}
	if n := ledgerRows(t, db); n != 0 {
		t.Errorf("bad input charged the budget: %d ledger rows", n)
	}
	var tables int
	db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'out'`).Scan(&tables)
	if tables != 0 {
		t.Errorf("a refused release left its table behind")
	}
}

// An interrupted release (context cancelled while it runs) is all or nothing:
// either it is rolled back (no table, no charge) or it had committed before
// the interruption reached it (table and charge both). The test does not
// depend on how fast the machine is: it tries several deadlines and requires
// only that the earliest ones interrupt the release before it commits.
func TestAvgmixInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a larger table; skipped in -short")
	}
	db := openDB(t, `SELECT dp_init(30)`)
	fillTrain(t, db, "train", 20000, 256, 10)
	rolledBack := 0
	for _, delay := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond} {
		before := ledgerRows(t, db)
		ctx, cancel := context.WithTimeout(context.Background(), delay)
		var out string
		err := db.QueryRowContext(ctx, `SELECT dp_avgmix(features, label, json_object('n', 20000, 'classes', 10, 'into', 'rel', 'mu', 1.0)) FROM train`).Scan(&out)
		cancel()
		charges := ledgerRows(t, db) - before
		var tables int
		db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'rel'`).Scan(&tables)
		switch {
		case charges != tables:
			t.Fatalf("after %v (err %v): %d charges but %d release tables; a release and its charge commit together", delay, err, charges, tables)
		case err != nil && charges == 0:
			rolledBack++
		case err == nil && charges != 1:
			t.Fatalf("a finished release after %v made %d charges", delay, charges)
		}
		if _, err := db.Exec(`DROP TABLE IF EXISTS rel`); err != nil {
			t.Fatal(err)
		}
	}
	if rolledBack == 0 {
		t.Fatalf("no deadline interrupted the release before it committed; make the table larger")
	}
}
