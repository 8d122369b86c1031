package dpselect

import (
	"errors"
	"strings"
	"testing"
)

const issueExample = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5)
       sex, COUNT(*) AS n, AVG(bmi, contribution_bounds_per_group => (10, 60)) AS mean_bmi
FROM patients WHERE age >= 18 GROUP BY sex;`

func TestParseIssueExample(t *testing.T) {
	st, err := Parse(issueExample)
	if err != nil {
		t.Fatal(err)
	}
	if st.Table != "patients" || len(st.Items) != 3 || len(st.GroupBy) != 1 || String(st.GroupBy[0]) != `"sex"` {
		t.Fatalf("parsed %+v", st)
	}
	if st.Options[0] != (Option{Name: "mu", Value: 0.5}) {
		t.Errorf("options %+v", st.Options)
	}
	if it := st.Items[2]; it.Agg != Avg || it.Column != "bmi" || *it.Bounds != [2]float64{10, 60} || it.Name() != "mean_bmi" {
		t.Errorf("AVG item %+v", it)
	}
	if it := st.Items[1]; it.Agg != Count || it.Column != "" || it.Name() != "n" {
		t.Errorf("COUNT item %+v", it)
	}
	if got := String(st.Where); got != `("age" >= 18)` {
		t.Errorf("WHERE renders as %s", got)
	}
}

func TestParseForms(t *testing.T) {
	for _, src := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, VAR_POP(x, contribution_bounds_per_group => (0, 1)), STDDEV_POP(x) AS s FROM t GROUP BY g`,
		`select with differential_privacy options (epsilon = 1, delta = 1e-6) count(*) from t`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, MEDIAN(x, contribution_bounds_per_group => (0, 1)) AS m, median(y) FROM t GROUP BY g`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, max_groups_contributed = 2) a, b, SUM(x, contribution_bounds_per_group => (-1, 1.5)) s FROM t WHERE a IN (1, 2) AND NOT b IS NULL AND x BETWEEN 0 AND 3 OR name LIKE 'a%' GROUP BY a, t.b ORDER BY s DESC, 1 LIMIT 10`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(x) FROM "my table" WHERE CASE WHEN x > 1 THEN 1 ELSE 0 END = 1 AND CAST(y AS INTEGER) <> 3 AND lower(z) = 'q' -- comment
		`,
		`/* c */ SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) AVG([x y]) FROM t WHERE -x * 2 + 3 % 2 / 1 >= x'00' AND y IS NOT 3`,
	} {
		if _, err := Parse(src); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// GROUP BY takes expressions, aliases and positions; the SELECT list takes
// key expressions; HAVING takes a condition whose aggregates name outputs.
func TestParseGroupByExpressionsAndHaving(t *testing.T) {
	st, err := Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) age / 10 * 10 AS decade, substr(zip, 1, 3) z3,
		COUNT(*) AS n FROM t GROUP BY age/10*10, substr(zip, 1, 3) HAVING n > 10 AND COUNT(*) < 1e6 ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	if got := String(st.Items[0].Expr); got != `(("age" / 10) * 10)` || st.Items[0].Name() != "decade" {
		t.Errorf("item 0: %s named %s", got, st.Items[0].Name())
	}
	if got := String(st.GroupBy[0]); got != String(st.Items[0].Expr) {
		t.Errorf("GROUP BY renders as %s, the item as %s", got, String(st.Items[0].Expr))
	}
	if got := String(st.Having); got != `(("n" > 10) AND (COUNT(*) < 1e6))` {
		t.Errorf("HAVING renders as %s", got)
	}
	st, err = Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) CAST(x AS INTEGER), COUNT(*) FROM t GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items[0].Name() != `CAST("x" AS INTEGER)` || String(st.GroupBy[0]) != "1" {
		t.Errorf("parsed %+v", st)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`SELECT * FROM t`, "not a SELECT WITH"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY count(*) FROM t`, "expected OPTIONS"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) * FROM t`, "SELECT * is not accepted"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t GROUP BY a HAVING sum(x, contribution_bounds_per_group => (0, 1)) > 1`, "names an output"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t GROUP BY count(*)`, "aggregates are not accepted inside expressions"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) min(x) FROM t`, "not a DP aggregate"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t UNION SELECT 1`, "compound"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t, u`, "this join is not accepted"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t JOIN u`, "a join needs ON or USING"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE x IN (SELECT 1)`, "subqueries"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE EXISTS (SELECT 1)`, "subqueries"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE x = (SELECT 1)`, "subqueries"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) max(x) FROM t`, "not a DP aggregate"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) * 2 FROM t`, "expressions are not accepted"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE x LIKE y`, "literal pattern"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE x LIKE 'a' ESCAPE 'b'`, "ESCAPE"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE x || y = 'a'`, "||"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE x LIKE '` + strings.Repeat("%a", 30000) + `'`, "at most 1000 bytes"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t; DROP TABLE t`, "one statement"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE u.x = 1`, "qualifier"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM main.t`, "schema-qualified"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) OVER () FROM t`, "window"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t LIMIT 1 OFFSET 2`, "OFFSET"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) count(*) FROM t WHERE ` + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200), "nested deeper"},
	} {
		_, err := Parse(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
	if _, err := Parse("SELECT 1"); !errors.Is(err, ErrNotDP) {
		t.Errorf("plain SELECT: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(issueExample)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) a, SUM(x, contribution_bounds_per_group => (-1, 1.5)) s FROM t WHERE a IN (1, 'x', x'00') AND CASE a WHEN 1 THEN 2 END ORDER BY 1 LIMIT 3`)
	f.Fuzz(func(t *testing.T, src string) {
		st, err := Parse(src)
		if err != nil || st.Where == nil {
			return
		}
		// The rendered WHERE must parse again to the same rendering.
		w := String(st.Where)
		again, err := Parse("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM " + QuoteIdent(st.Table) + " WHERE " + w)
		if err != nil {
			t.Fatalf("rendered WHERE %q does not parse: %v", w, err)
		}
		if w2 := String(again.Where); w2 != w {
			t.Fatalf("rendering not stable: %q then %q", w, w2)
		}
	})
}

// EXPLAIN before the DP form asks for its plan: IsDP routes it to protected
// mode and Parse marks it; other EXPLAINs stay SQLite's.
func TestExplainForm(t *testing.T) {
	for _, tc := range []struct {
		src     string
		dp      bool
		explain bool
	}{
		{`EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`, true, true},
		{"/* why */ explain\n select with differential_privacy options (mu = 1) count(*) from t", true, true},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`, true, false},
		{`EXPLAIN QUERY PLAN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`, false, false},
		{`EXPLAIN SELECT 1`, false, false},
		{`EXPLAIN`, false, false},
		{`"EXPLAIN" SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`, false, false},
	} {
		if got := IsDP(tc.src); got != tc.dp {
			t.Errorf("IsDP(%q) = %v, want %v", tc.src, got, tc.dp)
		}
		if !tc.dp {
			continue
		}
		st, err := Parse(tc.src)
		if err != nil || st.Explain != tc.explain {
			t.Errorf("Parse(%q): explain %v, %v; want %v", tc.src, st != nil && st.Explain, err, tc.explain)
		}
	}
	if _, err := Parse(`EXPLAIN EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`); err == nil {
		t.Error("EXPLAIN EXPLAIN parsed")
	}
}

// A number beyond a double's range is refused in words a user knows, not
// strconv's (issue 23: mu = 1e309).
func TestOptionOutOfRange(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1e309) COUNT(*) AS n FROM t":                  "option mu: 1e309 is too large (the largest number is about 1.8e308)",
		"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (delta = 0x1FFFFFFFFFFFFFFFF) COUNT(*) AS n FROM t": "is too large",
	} {
		_, err := Parse(q)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "strconv") {
			t.Errorf("%s: %v, want %q", q, err, want)
		}
	}
}

// The aggregates of issue 25: COUNT(DISTINCT col), PERCENTILE_CONT(col, p
// [, contribution_bounds_per_row => (lo, hi)]), APPROX_QUANTILES(col, k [, ...]).
func TestParseDistinctAndQuantiles(t *testing.T) {
	st, err := Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(DISTINCT pid) AS persons, count(distinct t.x),
		PERCENTILE_CONT(x, 0.9, contribution_bounds_per_row => (0, 100)) p90, percentile_cont(x, 1),
		APPROX_QUANTILES(x, 4, contribution_bounds_per_row => (-1, 1)), MEDIAN(x, contribution_bounds_per_row => (0, 1)) FROM t GROUP BY g`)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		agg, col, name string
		distinct       bool
		param          float64
		bounds         bool
	}{
		{"", "g", "g", false, 0, false},
		{Count, "pid", "persons", true, 0, false},
		{Count, "x", "COUNT(DISTINCT x)", true, 0, false},
		{Percentile, "x", "p90", false, 0.9, true},
		{Percentile, "x", "PERCENTILE_CONT(x, 1)", false, 1, false},
		{Quantiles, "x", "APPROX_QUANTILES(x, 4)", false, 4, true},
		{Median, "x", "MEDIAN(x)", false, 0, true},
	}
	for i, w := range want {
		it := st.Items[i]
		if it.Agg != w.agg || it.Column != w.col || it.Name() != w.name || it.Distinct != w.distinct ||
			it.Param != w.param || (it.Bounds != nil) != w.bounds {
			t.Errorf("item %d: %+v (name %s), want %+v", i, it, it.Name(), w)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{`COUNT(DISTINCT *)`, "expected a column name"},
		{`SUM(DISTINCT x)`, "SUM(DISTINCT ...) is not accepted: DISTINCT is for COUNT(DISTINCT col)"},
		{`AVG(DISTINCT x)`, "DISTINCT is for COUNT"},
		{`PERCENTILE_CONT(x)`, "takes the percentile p as a number literal in [0, 1]"},
		{`PERCENTILE_CONT(x, y)`, "takes the percentile p as a number literal"},
		{`PERCENTILE_CONT(x, 0.5 + 0.1)`, `expected ")"`},
		{`PERCENTILE_CONT(x, 0.5, contribution_bounds_per_group => (0, 1))`, "takes contribution_bounds_per_row"},
		{`APPROX_QUANTILES(x)`, "takes the number of quantiles k as an integer literal"},
		{`APPROX_QUANTILES(x, 4, bounds => (0, 1))`, "the only named argument of APPROX_QUANTILES"},
		{`SUM(x, contribution_bounds_per_row => (0, 1))`, "SUM takes contribution_bounds_per_group"},
		{`COUNT(DISTINCT x, contribution_bounds_per_row => (0, 1))`, "COUNT takes no contribution bounds"},
		{`PERCENTILE_DISC(x, 0.5)`, "PERCENTILE_CONT(col, p)"},
	} {
		_, err := Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ` + tc.src + ` FROM t`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestOutline(t *testing.T) {
	src := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM "my t" WHERE x IN (1) GROUP BY g ORDER BY 1 LIMIT 2`
	for _, tc := range []struct {
		at, clause string
	}{{"SELECT", ""}, {"mu", ClauseOptions}, {"COUNT", ClauseSelect}, {`"my t"`, ClauseFrom}, {"x IN", ClauseWhere},
		{"(1)", ClauseWhere}, {"g ORDER", ClauseGroupBy}, {"1 LIMIT", ClauseOrderBy}, {"2", ClauseLimit}} {
		c, table := Outline(src, strings.Index(src, tc.at)+1)
		if c != tc.clause || table != "my t" {
			t.Errorf("at %q: clause %q table %q, want %q and %q", tc.at, c, table, tc.clause, "my t")
		}
	}
	if _, table := Outline(`WITH a AS (SELECT * FROM patients) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a`, -1); table != "a" {
		t.Errorf("the outermost FROM: %q", table)
	}
}

func TestTables(t *testing.T) {
	got := Tables(`WITH a AS (SELECT * FROM patients WHERE x IN (SELECT 1 FROM "other t")) SELECT WITH DIFFERENTIAL_PRIVACY
		OPTIONS (mu = 1) COUNT(*) FROM a JOIN wards ON 1 JOIN PATIENTS`)
	if strings.Join(got, ",") != "a,patients,other t,wards" {
		t.Errorf("Tables: %q", got)
	}
}

// The one join form: [INNER] JOIN or LEFT [OUTER] JOIN of one table, ON
// equalities of columns or USING; everything else refused with what is
// accepted.
func TestParseJoin(t *testing.T) {
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	st, err := Parse(dp + `q.region, COUNT(*), SUM(p.x) FROM t AS p LEFT OUTER JOIN lookup q ON p.g = q.g AND q.k = p.k WHERE q.region IS NOT NULL GROUP BY q.region`)
	if err != nil {
		t.Fatal(err)
	}
	j := st.Join
	if j == nil || j.Table != "lookup" || j.Alias != "q" || !j.Left || st.Alias != "p" || len(j.On) != 2 ||
		j.On[1][0].Qual != "q" || j.On[1][0].Name != "k" || st.Items[0].Qual != "q" || st.Items[2].Qual != "p" {
		t.Fatalf("parsed %+v, join %+v", st, j)
	}
	st, err = Parse(dp + `COUNT(*) FROM t INNER JOIN lookup USING (g, k)`)
	if err != nil || st.Join == nil || st.Join.Left || len(st.Join.Using) != 2 {
		t.Fatalf("USING: %v %+v", err, st)
	}
	if st, err = Parse(dp + `COUNT(*) FROM t JOIN lookup ON t.g == lookup.g`); err != nil || len(st.Join.On) != 1 {
		t.Fatalf("ON ==: %v", err)
	}
	for _, tc := range []struct{ src, want string }{
		{`COUNT(*) FROM t CROSS JOIN u`, "CROSS joins are not accepted"},
		{`COUNT(*) FROM t NATURAL JOIN u`, "NATURAL joins are not accepted"},
		{`COUNT(*) FROM t RIGHT JOIN u USING (g)`, "RIGHT joins are not accepted"},
		{`COUNT(*) FROM t FULL OUTER JOIN u USING (g)`, "FULL joins are not accepted"},
		{`COUNT(*) FROM t JOIN u ON t.g > u.g`, "ON takes equalities"},
		{`COUNT(*) FROM t JOIN u ON t.g = u.g OR t.h = u.h`, "ON takes equalities"},
		{`COUNT(*) FROM t JOIN u ON lower(t.g) = u.g`, "ON takes equalities"},
		{`COUNT(*) FROM t JOIN u ON t.g = 1`, "ON takes equalities"},
		{`COUNT(*) FROM t JOIN u USING (g) JOIN v USING (g)`, "one join only"},
		{`COUNT(*) FROM t JOIN (SELECT g FROM u) AS v USING (g)`, "subquery is not accepted"},
		{`COUNT(*) FROM t JOIN main.u USING (g)`, "schema-qualified"},
		{`COUNT(*) FROM t AS p WHERE p.x = 1`, "aliases are accepted with a join only"},
		{`COUNT(*) FROM (SELECT pid, g FROM t) AS s JOIN u USING (g)`, "not through CTEs or subqueries"},
	} {
		if _, err := Parse(dp + tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
	}
}
