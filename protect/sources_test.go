package protect

import (
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// CTEs and subqueries in FROM are inlined: the statement becomes one over
// the protected table, with the sources' filters ANDed to WHERE and their
// names replaced by the table's columns; a source that drops or renames the
// privacy unit, computes, or reads a table that is not protected is refused.
func TestInlineSources(t *testing.T) {
	const dp = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) "
	for _, tc := range []struct {
		sql   string
		want  string // refusal
		where string // the inlined WHERE
		items string // the output names
	}{
		{"WITH adults AS (SELECT pid, age, bmi FROM patients WHERE age >= 18) " + dp +
			"COUNT(*) AS n, AVG(bmi) AS b FROM adults", "", `("age" >= 18)`, "n b"},
		{"WITH a AS (SELECT * FROM patients WHERE age >= 18), b AS (SELECT pid, bmi AS weight, sex AS s FROM a " +
			"WHERE sex = 'F') " + dp + "s, AVG(weight) FROM b WHERE weight < 40 GROUP BY s", "",
			`((("age" >= 18) AND ("Sex" = 'F')) AND ("bmi" < 40))`, "s AVG(weight)"},
		{dp + "COUNT(*) AS n FROM (SELECT pid, age FROM patients p WHERE p.age > 65) AS old WHERE age < 90", "",
			`(("age" > 65) AND ("age" < 90))`, "n"},
		{"WITH d AS (SELECT pid, age FROM patients) " + dp + "age / 10 * 10 AS decade, COUNT(*) FROM d GROUP BY decade",
			"", "", "decade COUNT(*)"},
		{"WITH x AS (SELECT pid FROM patients) " + dp + "COUNT(*) FROM patients", "", "", "COUNT(*)"},
		// The privacy unit must pass through under its own name.
		{"WITH r AS (SELECT pid AS person, age FROM patients) " + dp + "COUNT(*) FROM r",
			"r renames patients's privacy unit pid to person", "", ""},
		{"WITH r AS (SELECT age, bmi FROM patients) " + dp + "COUNT(*) FROM r", "r drops patients's privacy unit pid", "", ""},
		{"WITH r AS (SELECT age AS pid FROM patients) " + dp + "COUNT(*) FROM r", "r names column age after", "", ""},
		{"WITH r AS (SELECT pid, age + 1 AS a FROM patients) " + dp + "COUNT(*) FROM r", "CTE r computes", "", ""},
		{"WITH r AS (SELECT pid FROM patients) " + dp + "COUNT(*) FROM r WHERE age > 3", `no column "age" in r`, "", ""},
		{"WITH r AS (SELECT pid FROM patients WHERE height > 3) " + dp + "COUNT(*) FROM r", `no column "height"`, "", ""},
		{"WITH r AS (SELECT * FROM wards) " + dp + "COUNT(*) FROM r", "", "", ""}, // wards is "protected" in these tests
	} {
		st, err := dpselect.Parse(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		c := newChecker(st, map[string]Policy{"patients": stepPolicy}, stepCols, 1e-5)
		err = c.inlineSources()
		if !refusedWith(t, tc.sql, err, tc.want) || tc.want != "" {
			continue
		}
		where := ""
		if st.Where != nil {
			where = dpselect.String(st.Where)
		}
		var names []string
		for _, it := range st.Items {
			names = append(names, it.Name())
		}
		if where != tc.where || (tc.items != "" && strings.Join(names, " ") != tc.items) {
			t.Errorf("%s:\n  WHERE %s, outputs %q\n  want %s, %q", tc.sql, where, names, tc.where, tc.items)
		}
	}
}

// The rewritten SQL of a statement over a CTE is the rewritten SQL of the
// statement over the table with the CTE's filter in WHERE.
func TestRewriteThroughCTE(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1, Bounds: map[string][2]float64{"x": {0, 10}}}
	via := levelPlan(t, `WITH big AS (SELECT pid, g AS grp, x FROM t WHERE x > 5) SELECT WITH DIFFERENTIAL_PRIVACY `+
		`OPTIONS (mu = 1) grp, COUNT(*) AS n, SUM(x) AS s FROM big GROUP BY grp`, p)
	direct := levelPlan(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g AS grp, COUNT(*) AS n, SUM(x) AS s `+
		`FROM t WHERE x > 5 GROUP BY g`, p)
	got, want := rewrite(via), rewrite(direct)
	if got != want {
		t.Errorf("through the CTE:\n%s\ndirect:\n%s", got, want)
	}
	const runs = `SELECT _k0, count(*), count(*), coalesce(sum(_v1), 0) FROM (SELECT "g" AS _k0, `
	if !strings.HasPrefix(got, runs) || !strings.Contains(got, `FROM main."t" WHERE (("x" > 5)) AND "pid" IS NOT NULL GROUP BY "pid")`) {
		t.Errorf("rewrite: %s", got)
	}
	if cols := via.columns(); strings.Join(cols, " ") != "grp n s" {
		t.Errorf("outputs %v", cols)
	}
}

// IsDP recognises a DP statement after its CTEs, and only then.
func TestIsDPWithCTEs(t *testing.T) {
	for src, want := range map[string]bool{
		`WITH a AS (SELECT * FROM t WHERE (x > (1))) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a`:   true,
		`EXPLAIN WITH a(x) AS MATERIALIZED (SELECT 1), b AS NOT MATERIALIZED (SELECT 2) SELECT WITH DIFFERENTIAL_PRIVACY`: true,
		`WITH a AS (SELECT * FROM t) SELECT * FROM a`:                                                                     false,
		`WITH RECURSIVE a(x) AS (SELECT 1) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a`:             false,
		`WITH a AS (SELECT 1 SELECT WITH DIFFERENTIAL_PRIVACY`:                                                            false,
	} {
		if got := dpselect.IsDP(src); got != want {
			t.Errorf("IsDP(%s) = %v, want %v", src, got, want)
		}
	}
}
