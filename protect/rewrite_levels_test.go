package protect

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// levelPlan checks src over table t (pid, g, x) under policy p, as the engine
// would plan it for a table whose x is REAL.
func levelPlan(t *testing.T, src string, p Policy) *plan {
	t.Helper()
	st, err := dpselect.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := checkStatement(st, map[string]Policy{"t": p}, map[string]string{"pid": "pid", "g": "g", "x": "x"}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if err := completePlan(pl, map[string]bool{"x": true}, false, SchemaFacts{}, nil); err != nil {
		t.Fatal(err)
	}
	return pl
}

// Each level's builder, on one plan: what it reads, and the figures level 3
// takes from each of its three inputs.
func TestRewriteLevels(t *testing.T) {
	pl := levelPlan(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*), COUNT(x), SUM(x), AVG(x), `+
		`VAR_POP(x) FROM t WHERE x > 0 GROUP BY g`, Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3,
		Bounds: map[string][2]float64{"x": {0, 10}}})
	// x is compared only with a literal, so it needs no max_length guard.
	if got := rowFilter(pl); got != `("x" > 0)` {
		t.Errorf("rowFilter = %s", got)
	}
	r := newRewriter(pl)
	var keys, values sqlList
	r.keyColumns(&keys)
	r.valueColumns(&values)
	if r.unit != `"pid"` || keys.String() != `"g" AS _k0` {
		t.Errorf("unit %s, key columns %s", r.unit, keys.String())
	}
	vals := values.String()
	for _, want := range []string{`("x" IS NOT NULL) AS _v1`, "AS _v2", "AS _v3", "AS _v4", "AS _w4"} {
		if !strings.Contains(vals, want) {
			t.Errorf("value columns %s lack %s", vals, want)
		}
	}
	if strings.Contains(vals, "_v0") || strings.Contains(vals, "_w2") || strings.Contains(vals, "_w3") {
		t.Errorf("value columns %s: COUNT(*) needs none, SUM and AVG no square", vals)
	}
	// Level 3's figures per input: COUNT(*), COUNT(x), SUM, AVG (sum,
	// count), VAR_POP (sum, count, squares).
	for in, want := range map[groupInput]string{
		overPersons: "count(*), sum(_v1), coalesce(sum(_v2), 0), coalesce(sum(_v3), 0), count(_v3), " +
			"coalesce(sum(_v4), 0), count(_v4), coalesce(sum(_w4), 0)",
		overPersonGroups: "sum(_n), sum(_s1), sum(_s2), sum(_s3), sum(_c3), sum(_s4), sum(_c4), sum(_q4)",
	} {
		var got sqlList
		for j, a := range pl.aggs {
			groupFigures(&got, in, j, a)
		}
		if got.String() != want {
			t.Errorf("figures from input %d: %s\nwant %s", in, got.String(), want)
		}
	}
	var count, variance sqlList
	groupFigures(&count, overRows, 1, pl.aggs[1])
	groupFigures(&variance, overRows, 4, pl.aggs[4])
	if count.String() != `count("x")` {
		t.Errorf("COUNT(x) over the rows: %s", count.String())
	}
	if variance.n != 3 || !strings.Contains(variance.String(), "), count(*) FILTER") {
		t.Errorf("VAR_POP over the rows: %s", variance.String())
	}
	// Which levels rewrite composes.
	for _, tc := range []struct {
		p     Policy
		parts []string
	}{
		{Policy{MaxGroups: 1, MaxRows: 1}, []string{`FROM main."t" WHERE`}},
		{Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1},
			[]string{"min(random()) AS _r", `GROUP BY "pid") GROUP BY _k0`}},
		{Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3},
			[]string{"AS _rn", "WHERE _rn <= 3", "WHERE _gn <= 2 GROUP BY _k0"}},
	} {
		q := rewrite(levelPlan(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) FROM t GROUP BY g`, tc.p))
		for _, part := range tc.parts {
			if !strings.Contains(q, part) {
				t.Errorf("policy %+v: %s lacks %s", tc.p, q, part)
			}
		}
	}
}

// When every person has one row, bounding keeps every row: level 3 gives the
// same figures (in the same fixed point) whether it reads the rows (no unit),
// one row per person, or the (person, group) sums; and a MEDIAN's histogram
// query, with or without a unit, counts the same buckets.
func TestRewriteLevelsAgree(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (pid INTEGER, g TEXT, x REAL)`); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		var x any = float64(i%37) / 3
		switch i % 11 {
		case 0:
			x = nil
		case 1:
			x = "text"
		case 2:
			x = -5.0 // clamped
		}
		if _, err := db.Exec(`INSERT INTO t VALUES (?, ?, ?)`, i, fmt.Sprintf("g%d", i%4), x); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*), COUNT(x), SUM(x), AVG(x), VAR_POP(x), ` +
		`MEDIAN(x) FROM t WHERE pid <> 7 GROUP BY g`
	bounds := map[string][2]float64{"x": {0, 10}}
	var want, wantHist []string
	var first *plan
	for _, p := range []Policy{
		{MaxGroups: 1, MaxRows: 1, Bounds: bounds},
		{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1, Bounds: bounds},
		{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3, Bounds: bounds},
	} {
		pl := levelPlan(t, q, p)
		if first == nil {
			first = pl
		}
		for i := range pl.aggs { // the same fixed point (the quanta follow the sensitivities)
			pl.aggs[i].quant, pl.aggs[i].sqQuant = first.aggs[i].quant, first.aggs[i].sqQuant
		}
		got := queryRows(t, db, rewrite(pl))
		hist := queryRows(t, db, rewriteHistogram(pl, pl.aggs[5]))
		if len(got) != 4 || len(hist) < 4 {
			t.Fatalf("policy %+v: %d groups, %d histogram rows", p, len(got), len(hist))
		}
		if want == nil {
			want, wantHist = got, hist
			continue
		}
		if !slices.Equal(got, want) || !slices.Equal(hist, wantHist) {
			t.Errorf("policy %+v:\n got %q\nwant %q\nhistograms %q\nwant %q", p, got, want, hist, wantHist)
		}
	}
}

// queryRows runs q and returns its rows, each rendered as one string, sorted.
func queryRows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals...))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
