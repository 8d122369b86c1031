package sqlfuncs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// topmSupport is the set of features whose class means differ in topmTable.
var topmSupport = []int{3, 11, 24, 37, 48}

// topmTable fills table t(f BLOB, y INTEGER) with n rows of d features, k
// classes (labels i mod k): N(0, 0.1^2) noise everywhere, plus 0.2*class on
// the features of topmSupport. Row ids start at 1001. It returns the rows.
func topmTable(t testing.TB, db *sql.DB, n, d, k int) ([][]float32, []int) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE t(f BLOB, y INTEGER)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([][]float32, n)
	ys := make([]int, n)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO t(rowid, f, y) VALUES (?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		y := i % k
		x := make([]float32, d)
		for j := range x {
			x[j] = float32(0.1 * rng.NormFloat64())
		}
		for _, j := range topmSupport {
			x[j] += float32(0.2 * float64(y))
		}
		xs[i], ys[i] = x, y
		if _, err := ins.Exec(1001+i, vector.Encode(x), y); err != nil {
			t.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return xs, ys
}

type topmSummary struct {
	Into      string  `json:"into"`
	Rows      int     `json:"rows"`
	D         int     `json:"d"`
	M         int     `json:"m"`
	Indices   []int   `json:"indices"`
	Score     string  `json:"score"`
	MuSelect  float64 `json:"mu_select"`
	MuRelease float64 `json:"mu_release"`
	MuLabels  float64 `json:"mu_labels"`
	Mu        float64 `json:"mu"`
	LedgerID  int64   `json:"ledger_id"`
}

func TestSelectTopmEndToEnd(t *testing.T) {
	const n, d, m = 2000, 50, 5
	tests := []struct {
		name      string
		k         int
		score     string
		labels    string
		epsLabels float64
	}{
		{"distance/2 classes/public", 2, "distance", "public", 0},
		{"distance/3 classes/private", 3, "", "private", 0.5},
		{"t/3 classes/public", 3, "t", "public", 0},
		{"t/2 classes/private large eps", 2, "t", "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const budget = 20.0
			db := openDB(t, fmt.Sprintf(`SELECT dp_init(%g, 0.5, 'default', 'replace_one')`, budget))
			xs, ys := topmTable(t, db, n, d, tt.k)
			opts := map[string]any{"into": "sel", "m": m, "mu_select": 1.0, "mu_release": 5.0, "c": 1.0, "c_release": 1.0, "classes": tt.k}
			if tt.score != "" {
				opts["score"] = tt.score
			}
			if tt.labels != "" {
				opts["labels"] = tt.labels
			}
			if tt.epsLabels > 0 {
				opts["eps_labels"] = tt.epsLabels
			}
			oj, _ := json.Marshal(opts)
			q := `SELECT dp_select_topm('t', json_patch(?, json_object('features', 'f', 'label', 'y')))`
			var out string
			if err := db.QueryRow(q, string(oj)).Scan(&out); err != nil {
				t.Fatal(err)
			}
			var s topmSummary
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("summary %s: %v", out, err)
			}
			got := append([]int(nil), s.Indices...)
			sort.Ints(got)
			if fmt.Sprint(got) != fmt.Sprint(topmSupport) {
				t.Errorf("selected %v, want the support %v", s.Indices, topmSupport)
			}
			wantScore := tt.score
			if wantScore == "" {
				wantScore = "distance"
			}
			if s.Rows != n || s.D != d || s.M != m || s.Into != "sel" || s.Score != wantScore {
				t.Errorf("summary %s", out)
			}

			// The ledger: one row, one replace-one Gaussian dominating the parts.
			if c := ledgerRows(t, db); c != 1 {
				t.Fatalf("%d ledger rows, want exactly one charge", c)
			}
			var id int64
			var mech, params string
			var mu float64
			if err := db.QueryRow(`SELECT id, mechanism, mu, params FROM dp_ledger WHERE kind = 'charge'`).Scan(&id, &mech, &mu, &params); err != nil {
				t.Fatal(err)
			}
			var p struct {
				Mechanism  string           `json:"mechanism"`
				Mu         float64          `json:"mu"`
				Neighbours string           `json:"neighbours"`
				Indices    []int            `json:"indices"`
				Scores     []float64        `json:"scores"`
				Score      string           `json:"score"`
				MuSelect   float64          `json:"mu_select"`
				MuRelease  float64          `json:"mu_release"`
				MuLabels   float64          `json:"mu_labels"`
				Classes    int              `json:"classes"`
				Labels     string           `json:"labels"`
				Components []map[string]any `json:"components"`
				NRows      int              `json:"n"`
				Dim        int              `json:"d"`
				Kept       int              `json:"m"`
			}
			if err := json.Unmarshal([]byte(params), &p); err != nil {
				t.Fatal(err)
			}
			if id != s.LedgerID || mech != "gaussian" || p.Neighbours != mechanism.ReplaceOne {
				t.Errorf("ledger row %d mechanism %q neighbours %q (summary ledger_id %d)", id, mech, p.Neighbours, s.LedgerID)
			}
			if fmt.Sprint(p.Indices) != fmt.Sprint(s.Indices) || len(p.Scores) != m || p.Score != wantScore {
				t.Errorf("ledger indices %v scores %v score %q, summary indices %v", p.Indices, p.Scores, p.Score, s.Indices)
			}
			if p.NRows != n || p.Dim != d || p.Kept != m || p.Classes != tt.k {
				t.Errorf("ledger n %d d %d m %d classes %d", p.NRows, p.Dim, p.Kept, p.Classes)
			}
			wantMu := math.Sqrt(4*p.MuSelect*p.MuSelect + p.MuRelease*p.MuRelease + p.MuLabels*p.MuLabels)
			if math.Abs(mu-wantMu) > 1e-12*wantMu || math.Abs(p.Mu-mu) > 1e-12*mu || math.Abs(s.Mu-mu) > 1e-12*mu {
				t.Errorf("charged mu %v (params %v, summary %v), want sqrt((2 mu_select)^2 + mu_release^2 + mu_labels^2) = %v", mu, p.Mu, s.Mu, wantMu)
			}
			if p.MuSelect > 1 || p.MuSelect < 0.999 || p.MuRelease > 5 || p.MuRelease < 4.99 {
				t.Errorf("mu_select %v mu_release %v, want just below the requested 1 and 5", p.MuSelect, p.MuRelease)
			}
			private := tt.labels != "public"
			if (p.MuLabels > 0) != private || (p.Labels == "private") != private {
				t.Errorf("labels %q mu_labels %v", p.Labels, p.MuLabels)
			}
			wantParts := 2 + 1
			if wantScore == "t" {
				wantParts++
			}
			if private {
				wantParts++
			}
			if len(p.Components) != wantParts {
				t.Errorf("%d components recorded, want %d: %v", len(p.Components), wantParts, p.Components)
			}
			var sq float64
			for _, c := range p.Components {
				v, _ := c["mu_replace_one"].(float64)
				sq += v * v
			}
			if math.Abs(math.Sqrt(sq)-mu) > 1e-9*mu {
				t.Errorf("components compose to %v under replace-one, charged %v", math.Sqrt(sq), mu)
			}
			if _, err := ledger.Verify(context.Background(), db); err != nil {
				t.Errorf("ledger does not verify: %v", err)
			}
			var rem float64
			if err := db.QueryRow(`SELECT dp_budget_remaining()`).Scan(&rem); err != nil {
				t.Fatal(err)
			}
			// An add/remove dp_gaussian costs twice its mu in this replace-one
			// scope, and its sampler's error must stay certifiable: the room
			// is at most half the GDP figure, and a call of exactly it fits.
			if want := math.Sqrt(budget*budget-mu*mu) / 2; !(rem > 0 && rem <= want*(1+1e-9)) {
				t.Errorf("budget remaining %v, want in (0, %v]", rem, want)
			}
			var v float64
			if err := db.QueryRow(`SELECT dp_gaussian(0, 1, ?)`, rem).Scan(&v); err != nil {
				t.Errorf("a dp_gaussian of the whole remaining %v: %v", rem, err)
			}

			// The table: n rows of m-dim x, in rowid order, each linked to its source row.
			rows, err := db.Query(`SELECT id, source_rowid, x, label FROM sel ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			sum := make([]float64, tt.k*m)
			cnt := make([]float64, tt.k)
			flips, count := 0, 0
			for rows.Next() {
				var id, src int64
				var xb []byte
				var lab int
				if err := rows.Scan(&id, &src, &xb, &lab); err != nil {
					t.Fatal(err)
				}
				count++
				wantSrc := 1000 + id
				if src != wantSrc || id != int64(count) {
					t.Fatalf("row %d: source_rowid %d, want %d", id, src, wantSrc)
				}
				x, err := vector.Decode(xb)
				if err != nil || len(x) != m {
					t.Fatalf("row %d: x %v (%v), want %d dimensions", id, x, err, m)
				}
				if lab < 0 || lab >= tt.k {
					t.Fatalf("row %d: label %d outside [0, %d)", id, lab, tt.k)
				}
				y := ys[id-1]
				if lab != y {
					flips++
				}
				cnt[y]++
				for r := range x {
					sum[y*m+r] += float64(x[r])
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if count != n {
				t.Fatalf("table holds %d rows, want %d", count, n)
			}
			// Released columns follow the selected indices: class means of the
			// release match the true class means (no clipping at this norm).
			var sigma float64
			db.QueryRow(`SELECT json_extract(params, '$.sigma_release') FROM dp_ledger WHERE kind = 'charge'`).Scan(&sigma)
			for y := 0; y < tt.k; y++ {
				for r, j := range s.Indices {
					var truth float64
					for i := range xs {
						if ys[i] == y {
							truth += float64(xs[i][j])
						}
					}
					truth /= cnt[y]
					got := sum[y*m+r] / cnt[y]
					if tol := 5 * sigma / math.Sqrt(cnt[y]); math.Abs(got-truth) > tol {
						t.Errorf("class %d, column %d (feature %d): released mean %.4f, true mean %.4f (tolerance %.4f)", y, r, j, got, truth, tol)
					}
				}
			}
			// Labels: public are released as they are; private flip with
			// probability 1 - e^eps/(e^eps + K - 1).
			flipP := 0.0
			if private {
				flipP = 1 - math.Exp(tt.epsLabels)/(math.Exp(tt.epsLabels)+float64(tt.k-1))
			}
			se := math.Sqrt(flipP*(1-flipP)/n) + 1e-9
			if got := float64(flips) / n; math.Abs(got-flipP) > 5*se {
				t.Errorf("labels %q eps %v: %.3f of labels flipped, want %.3f +- %.3f", tt.labels, tt.epsLabels, got, flipP, 5*se)
			}
			if private && tt.epsLabels < 1 && flips == 0 {
				t.Errorf("private labels at eps_labels %v flipped nothing", tt.epsLabels)
			}
		})
	}
}

func TestSelectTopmBadInput(t *testing.T) {
	good := `json_object('features','f','label','y','into','out','m',2,'mu_select',0.5,'mu_release',0.5,'c',1.0,'classes',2,'labels','public')`
	call := `SELECT dp_select_topm('t', ` + good + `)`
	tests := []struct {
		name  string
		setup string // run after the 6-row table t(f, y) is filled
		query string
		want  string
		init  string
	}{
		{"mismatched d", `UPDATE t SET f = x'0000803f0000803f0000803f0000803f' WHERE rowid = 3`, call, "features of row 3 have 4 dimensions, earlier rows have 5", ""},
		{"NULL features", `UPDATE t SET f = NULL WHERE rowid = 2`, call, "features of row 2: vector is NULL", ""},
		{"NaN in a blob", `UPDATE t SET f = x'0000803f0000c07f0000803f0000803f0000803f' WHERE rowid = 5`, call, "features of row 5: vector element 1 is NaN", ""},
		{"Inf in a blob", `UPDATE t SET f = x'0000803f0000807f0000803f0000803f0000803f' WHERE rowid = 4`, call, "features of row 4: vector element 1 is +Inf", ""},
		{"blob not float32", `UPDATE t SET f = x'000080' WHERE rowid = 1`, call, "not a multiple of 4", ""},
		{"NULL label", `UPDATE t SET y = NULL WHERE rowid = 2`, call, "label of row 2 is NULL", ""},
		{"vector label", `UPDATE t SET y = x'0000803f' WHERE rowid = 3`, call, "label of row 3 is a BLOB; dp_select_topm needs INTEGER class ids", ""},
		{"text label", `UPDATE t SET y = 'cat' WHERE rowid = 1`, call, "label of row 1 must be an INTEGER class id, got TEXT", ""},
		{"fractional label", `UPDATE t SET y = 0.5 WHERE rowid = 6`, call, "label of row 6 is 0.5", ""},
		{"label outside classes", `UPDATE t SET y = 2 WHERE rowid = 4`, call, "label of row 4 is 2, outside the 2 classes 0..1", ""},
		{"m = 0", "", strings.Replace(call, `'m',2`, `'m',0`, 1), `option "m" must lie in [1, d = 5]`, ""},
		{"m > d", "", strings.Replace(call, `'m',2`, `'m',6`, 1), `option "m" must lie in [1, d = 5]`, ""},
		{"m missing", "", strings.Replace(call, `'m',2,`, ``, 1), `option "m" (the number of features to keep, 1..d = 5) is required`, ""},
		{"m not an integer", "", strings.Replace(call, `'m',2`, `'m',2.5`, 1), `dp_select_topm: option "m" must be an integer, got 2.5`, ""},
		{"one class only", "", strings.Replace(call, `'classes',2`, `'classes',1`, 1), `option "classes" must be at least 2`, ""},
		{"classes missing", "", strings.Replace(call, `,'classes',2`, ``, 1), `option "classes" (the public number of classes K`, ""},
		{"unknown option", "", strings.Replace(call, `'m',2`, `'m',2,'bogus',1`, 1), `unknown option "bogus"`, ""},
		{"option twice (issue 22)", "", strings.Replace(call, `'m',2`, `'m',2,'m',3`, 1), `"m" appears twice`, ""},
		{"option in two cases (issue 22)", "", strings.Replace(call, `'m',2`, `'m',2,'M',3`, 1), `differ only in case`, ""},
		{"into missing", "", strings.Replace(call, `'into','out',`, ``, 1), `option "into"`, ""},
		{"into reserved", "", strings.Replace(call, `'into','out'`, `'into','dp_out'`, 1), `reserved`, ""},
		{"into not an identifier", "", strings.Replace(call, `'into','out'`, `'into','out; DROP TABLE t'`, 1), `not a plain table name`, ""},
		{"existing table", `CREATE TABLE out(a)`, call, `table "out" already exists`, ""},
		{"mu_select missing", "", strings.Replace(call, `'mu_select',0.5,`, ``, 1), `option "mu_select"`, ""},
		{"mu_release negative", "", strings.Replace(call, `'mu_release',0.5`, `'mu_release',-1`, 1), `option "mu_release" must be positive and finite`, ""},
		{"c zero", "", strings.Replace(call, `'c',1.0`, `'c',0`, 1), `option "c" must be positive and finite`, ""},
		{"c_release zero", "", strings.Replace(call, `'c',1.0`, `'c',1.0,'c_release',0`, 1), `option "c_release" must be positive`, ""},
		{"bad score", "", strings.Replace(call, `'m',2`, `'m',2,'score','gini'`, 1), `option "score" must be "distance" or "t"`, ""},
		{"bad labels", "", strings.Replace(call, `'labels','public'`, `'labels','secret'`, 1), `option "labels" must be "private" or "public"`, ""},
		{"private labels without eps_labels", "", strings.Replace(call, `,'labels','public'`, ``, 1), `needs option "eps_labels"`, ""},
		{"eps_labels with public labels", "", strings.Replace(call, `'labels','public'`, `'labels','public','eps_labels',1`, 1), `"eps_labels" applies to labels = "private"`, ""},
		{"options not JSON", "", `SELECT dp_select_topm('t', 'm=2')`, `options are not a JSON object`, ""},
		{"options NULL", "", `SELECT dp_select_topm('t', NULL)`, `options are NULL`, ""},
		{"table not TEXT", "", `SELECT dp_select_topm(1, ` + good + `)`, `table must be TEXT, got INTEGER`, ""},
		{"too few arguments", "", `SELECT dp_select_topm('t')`, `takes (table, options)`, ""},
		{"old aggregate form", "", `SELECT dp_select_topm(f, y, ` + good + `) FROM t`, `no longer accepted`, ""},
		{"old aggregate form with rowid", "", `SELECT dp_select_topm(f, y, ` + good + `, rowid) FROM t WHERE y = 1`, `SELECT dp_select_topm('train', json_object('features'`, ""},
		{"old aggregate form, no rows", "", `SELECT dp_select_topm(f, y, ` + good + `) FROM t WHERE 0`, `no longer accepted`, ""},
		{"empty table", `DELETE FROM t`, call, `table "t" has no rows`, ""},
		{"no such table", "", strings.Replace(call, `'t'`, `'nope'`, 1), `no table "nope" in the main schema`, ""},
		{"schema-qualified", "", strings.Replace(call, `'t'`, `'main.t'`, 1), `no table "main.t"`, ""},
		{"a view", `CREATE VIEW v AS SELECT * FROM t WHERE y = 1`, strings.Replace(call, `'t'`, `'v'`, 1), `"v" is a view`, ""},
		{"a temporary table", `CREATE TEMP TABLE tt AS SELECT * FROM t`, strings.Replace(call, `'t'`, `'tt'`, 1), `"tt" is a temporary table`, ""},
		{"a virtual table", `CREATE VIRTUAL TABLE vt USING fts4(f, y)`, strings.Replace(call, `'t'`, `'vt'`, 1), `"vt" is a virtual table`, ""},
		{"without rowid", `CREATE TABLE wr(k INTEGER PRIMARY KEY, f, y) WITHOUT ROWID`, strings.Replace(call, `'t'`, `'wr'`, 1), `WITHOUT ROWID`, ""},
		{"internal table", "", strings.Replace(call, `'t'`, `'dp_ledger'`, 1), `internal table`, ""},
		{"missing column", "", strings.Replace(call, `'features','f'`, `'features','g'`, 1), `table "t" has no column "g" (option "features"`, ""},
		{"default columns absent", "", strings.Replace(call, `'features','f','label','y',`, ``, 1), `has no column "features"`, ""},
		{"budget exceeded", "", call, `privacy budget exceeded`, `SELECT dp_init(1.0, 0.5, 'default', 'replace_one')`},
		{"no ledger", "", call, `dpsql init`, "-"},
		// A per-row release has no add/remove guarantee (issue 8 §2).
		{"add/remove scope", "", call, `scope "default" protects add/remove neighbours`, `SELECT dp_init(10)`},
		{"inside a writing statement", "", `CREATE TABLE w AS SELECT dp_select_topm('t', ` + good + `) AS s`, `this statement writes`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			init := `SELECT dp_init(10, 0.5, 'default', 'replace_one')`
			switch tt.init {
			case "":
			case "-":
				init = ""
			default:
				init = tt.init
			}
			db := openDB(t, init)
			if _, err := db.Exec(`CREATE TABLE t(f BLOB, y INTEGER)`); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 6; i++ {
				x := []float32{float32(i), 1, 0, float32(i % 2), 0.5}
				if _, err := db.Exec(`INSERT INTO t(f, y) VALUES (?, ?)`, vector.Encode(x), i%2); err != nil {
					t.Fatal(err)
				}
			}
			if tt.setup != "" {
				if _, err := db.Exec(tt.setup); err != nil {
					t.Fatal(err)
				}
			}
			var tablesBefore int
			db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'dp\_%' ESCAPE '\'`).Scan(&tablesBefore)
			var out string
			err := db.QueryRow(tt.query).Scan(&out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "dfs: ") || strings.Count(err.Error(), "dp_select_topm: ") > 1 {
				t.Errorf("err = %v: the function is named once, with no package prefix", err)
			}
			if !strings.Contains(err.Error(), "dp_select_topm") {
				t.Errorf("error %q does not name the function", err)
			}
			if init != "" {
				if c := ledgerRows(t, db); c != 0 {
					t.Errorf("bad input charged the budget: %d ledger rows", c)
				}
			}
			var tablesAfter, outRows int
			db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'dp\_%' ESCAPE '\'`).Scan(&tablesAfter)
			if tablesAfter != tablesBefore {
				t.Errorf("%d tables before, %d after a refused release", tablesBefore, tablesAfter)
			}
			if tt.name == "existing table" {
				if err := db.QueryRow(`SELECT count(*) FROM out`).Scan(&outRows); err != nil || outRows != 0 {
					t.Errorf("the existing table was written to: %d rows, %v", outRows, err)
				}
			}
		})
	}
}

// TestSelectTopmTwice: a second release into the same table is refused
// without a second charge; into another table it is charged again.
func TestSelectTopmTwice(t *testing.T) {
	db := openDB(t, `SELECT dp_init(50, 0.5, 'default', 'replace_one')`)
	topmTable(t, db, 300, 50, 2)
	q := `SELECT dp_select_topm('t', json_object('features', 'f', 'label', 'y', 'into', ?, 'm', 5, 'mu_select', 1, 'mu_release', 1, 'c', 1, 'classes', 2, 'labels', 'public'))`
	var out string
	if err := db.QueryRow(q, "a").Scan(&out); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(q, "a").Scan(&out); err == nil || !strings.Contains(err.Error(), `"a" already exists`) {
		t.Errorf("second release into a: %v", err)
	}
	if c := ledgerRows(t, db); c != 1 {
		t.Errorf("%d ledger rows after one release and one refusal", c)
	}
	if err := db.QueryRow(q, "b").Scan(&out); err != nil {
		t.Fatal(err)
	}
	if c := ledgerRows(t, db); c != 2 {
		t.Errorf("%d ledger rows after two releases", c)
	}
}

// An interrupted call charges nothing and leaves no table: interrupted while
// SQLite scans the rows, or while the release is written (the progress
// callback cancels the query at row 4096 of 20000).
func TestSelectTopmInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a larger table; skipped in -short")
	}
	db := openDB(t, `SELECT dp_init(100, 0.5, 'default', 'replace_one')`)
	topmTable(t, db, 20000, 64, 2)
	const q = `SELECT dp_select_topm('t', json_object('features', 'f', 'label', 'y', 'into', ?, 'm', 20, 'mu_select', 1, 'mu_release', 1, 'c', 1, 'classes', 2, 'labels', 'public'))`
	defer sqlfuncs.SetProgress(nil)
	for _, tt := range []struct {
		name     string
		scan     time.Duration // cancel after this long (0: never)
		release  bool          // cancel from the progress callback
		finishes bool
	}{
		{"during the scan", 20 * time.Millisecond, false, false},
		{"during the release", 0, true, false},
		{"not at all", 0, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.scan > 0 {
				ctx, cancel = context.WithTimeout(ctx, tt.scan)
				defer cancel()
			}
			released := 0
			sqlfuncs.SetProgress(func(fn string, done, total int) {
				if fn != "dp_select_topm" {
					return
				}
				released = done
				if tt.release && done >= 4096 {
					cancel()
					time.Sleep(50 * time.Millisecond) // let go-sqlite3 interrupt the connection
				}
			})
			into := "rel_" + strings.ReplaceAll(tt.name, " ", "_")
			before := ledgerRows(t, db)
			var out string
			err := db.QueryRowContext(ctx, q, into).Scan(&out)
			var tables int
			db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = ?`, into).Scan(&tables)
			charged := ledgerRows(t, db) - before
			if tt.finishes {
				if err != nil || charged != 1 || tables != 1 || released != 20000 {
					t.Fatalf("err %v, %d charges, table %d, %d rows released; want one charge and the table", err, charged, tables, released)
				}
				return
			}
			if err == nil || charged != 0 || tables != 0 {
				t.Fatalf("err %v, %d charges, table %d: an interrupted call must charge nothing and leave no table", err, charged, tables)
			}
			if tt.release && released < 4096 {
				t.Fatalf("the release never reached row 4096 (%d)", released)
			}
			// A 20 ms deadline may fall in the scan or, on a fast machine,
			// in the writing: either way nothing may be charged or left
			// (checked above); how far the writing got is only logged.
			t.Logf("interrupted after %d rows were written", released)
		})
	}
}

func TestVecSelect(t *testing.T) {
	db := openDB(t, `SELECT dp_init(20, 0.5, 'default', 'replace_one')`)
	topmTable(t, db, 500, 50, 2)
	var out string
	if err := db.QueryRow(`SELECT dp_select_topm('t', json_object('features','f','label','y','into','sel','m',5,'mu_select',1,'mu_release',1,'c',1,'classes',2,'labels','public'))`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var s topmSummary
	json.Unmarshal([]byte(out), &s)
	before := ledgerRows(t, db)

	// A new row, projected with the released selection in three spellings.
	x := make([]float32, 50)
	for j := range x {
		x[j] = float32(j) + 0.25
	}
	want := make([]float32, len(s.Indices))
	for r, j := range s.Indices {
		want[r] = x[j]
	}
	for _, q := range []string{
		`SELECT dp_vec_select(?, (SELECT json_extract(params, '$.indices') FROM dp_ledger WHERE id = ?))`,
		`SELECT dp_vec_select(?, (SELECT params FROM dp_ledger WHERE id = ?))`,
	} {
		var b []byte
		if err := db.QueryRow(q, vector.Encode(x), s.LedgerID).Scan(&b); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		got, err := vector.Decode(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v (%v), want %v", q, got, err, want)
		}
	}
	var b []byte
	if err := db.QueryRow(`SELECT dp_vec_select(?, ?)`, vector.Encode(x), out).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if got, _ := vector.Decode(b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with the summary: %v, want %v", got, want)
	}
	// Applied to the whole table in SQL, it matches the release's shape.
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE length(dp_vec_select(f, ?)) = 4 * 5`, out).Scan(&n); err != nil || n != 500 {
		t.Errorf("dp_vec_select over t: %d rows of 5 floats, %v", n, err)
	}

	tests := []struct{ q, want string }{
		{`SELECT dp_vec_select(x'0000803f00000040', '[0, 2]')`, "index 2 (entry 1 of indices) is outside the 2 dimensions of x"},
		{`SELECT dp_vec_select(x'0000803f00000040', '[-1]')`, "entry 0 of indices is -1"},
		{`SELECT dp_vec_select(x'0000803f00000040', '[0.5]')`, "entry 0 of indices is 0.5, not an integer"},
		{`SELECT dp_vec_select(x'0000803f00000040', '["a"]')`, "entry 0 of indices is a, not an integer"},
		{`SELECT dp_vec_select(x'0000803f00000040', '[]')`, "indices are empty"},
		{`SELECT dp_vec_select(x'0000803f00000040', '[0')`, "indices are not JSON"},
		{`SELECT dp_vec_select(x'0000803f00000040', '{"m": 2}')`, `must hold an "indices" array`},
		{`SELECT dp_vec_select(x'0000803f00000040', '7')`, "must be a JSON array"},
		{`SELECT dp_vec_select(x'0000803f00000040', NULL)`, "indices must be a JSON array of feature indices (TEXT), got NULL"},
		{`SELECT dp_vec_select(x'0000803f00000040', 3)`, "got INTEGER"},
		{`SELECT dp_vec_select(NULL, '[0]')`, "x is NULL"},
		{`SELECT dp_vec_select(x'0000803f0000', '[0]')`, "not a multiple of 4"},
		{`SELECT dp_vec_select(x'0000c07f', '[0]')`, "must be finite"},
		{`SELECT dp_vec_select(x'0000803f')`, "takes (x, indices_json)"},
	}
	for _, tt := range tests {
		var v []byte
		err := db.QueryRow(tt.q).Scan(&v)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "dp_vec_select") {
			t.Errorf("%s: err = %v, want it to say %q", tt.q, err, tt.want)
		}
	}
	// Duplicates and any order are allowed; a repeated query reuses the parse.
	for i := 0; i < 2; i++ {
		if err := db.QueryRow(`SELECT dp_vec_select(x'0000803f00000040', '[1, 0, 1]')`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		if got, _ := vector.Decode(b); fmt.Sprint(got) != "[2 1 2]" {
			t.Errorf("[1, 0, 1] of [1 2] = %v", got)
		}
	}
	if after := ledgerRows(t, db); after != before {
		t.Errorf("dp_vec_select charged: %d ledger rows, was %d", after, before)
	}
}

// BenchmarkSelectTopmSQL runs dp_select_topm end to end through SQL on n =
// 60000 rows of d = 784 features (MNIST's shape), 10 classes, m = 50: the scan
// and decoding of the rows, the selection, and the release of 60000 noisy rows
// into a new table, committed with the charge.
func BenchmarkSelectTopmSQL(b *testing.B) {
	const n, d, k = 60000, 784, 10
	db := openDB(b, `SELECT dp_init(1e9, 0.5, 'default', 'replace_one')`)
	if _, err := db.Exec(`CREATE TABLE t(f BLOB, y INTEGER)`); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO t(f, y) VALUES (?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, d)
	for i := 0; i < n; i++ {
		y := i % k
		for j := range x {
			x[j] = float32(rng.Float64())
			if j%k == y && j < 200 {
				x[j] += 0.5
			}
		}
		if _, err := ins.Exec(vector.Encode(x), y); err != nil {
			b.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	q := `SELECT dp_select_topm('t', json_object('features', 'f', 'label', 'y', 'into', ?, 'm', 50, 'mu_select', 0.5, 'mu_release', 1, 'c', 20, 'c_release', 5, 'classes', 10, 'eps_labels', 2))`
	i := 0
	var done float64
	for b.Loop() {
		var out string
		if err := db.QueryRow(q, fmt.Sprintf("sel%d", i)).Scan(&out); err != nil {
			b.Fatal(err)
		}
		var s struct{ Seconds float64 }
		json.Unmarshal([]byte(out), &s)
		done += s.Seconds
		i++
	}
	// done-s/op: the final step alone (checks, selection, release, commit);
	// the rest of ns/op is SQLite's scan and the buffering of the rows.
	b.ReportMetric(done/float64(i), "done-s/op")
}
