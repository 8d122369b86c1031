package protect

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// The GROUP BY step with computed keys: what it accepts, the keys it sets,
// and what it refuses.
func TestCheckerGroupByExpressions(t *testing.T) {
	keys := Policy{MaxGroups: 2, MaxRows: 1, PublicKeys: map[string]string{"Sex": "sexes.s", "age": "ages.a"}}
	for _, tc := range []struct {
		sql  string
		p    Policy
		want string
		keys string // the plan's keys, joined by " | "
		srcs int    // the public key sources
	}{
		{"age / 10 * 10 AS decade, COUNT(*) FROM patients GROUP BY age / 10 * 10", stepPolicy, "",
			`(("age" / 10) * 10)`, 0},
		{"age / 10 * 10 AS decade, COUNT(*) FROM patients GROUP BY decade", stepPolicy, "", `(("age" / 10) * 10)`, 0},
		{"age / 10 * 10 AS decade, COUNT(*) FROM patients GROUP BY 1", stepPolicy, "", `(("age" / 10) * 10)`, 0},
		{"COUNT(*) FROM patients GROUP BY CAST(bmi AS INTEGER), substr(SEX, 1, 1)", stepPolicy, "",
			`CAST("bmi" AS INTEGER) | substr("Sex", 1, 1)`, 0},
		{"COUNT(*) FROM patients GROUP BY round(bmi, -1)", stepPolicy, "", `(round(("bmi" / 1e1)) * 1e1)`, 0},
		{"COUNT(*) FROM patients GROUP BY strftime('%Y', ward)", stepPolicy, "", `strftime('%Y', "ward")`, 0},
		{"COUNT(*) FROM patients GROUP BY (sex)", stepPolicy, "", "Sex", 0},
		// A computed key has no public list: the statement selects its groups.
		{"COUNT(*) FROM patients GROUP BY sex, age / 10", keys, "", `Sex | ("age" / 10)`, 0},
		{"COUNT(*) FROM patients GROUP BY sex, age", keys, "", "Sex | age", 2},
		{"COUNT(*) FROM patients GROUP BY age / 10, (age/10)", stepPolicy, "GROUP BY names", "", 0},
		{"COUNT(*) FROM patients GROUP BY abs(age)", stepPolicy, "abs() is not allowed in GROUP BY", "", 0},
		{"COUNT(*) FROM patients GROUP BY strftime('%Y', ward, 'localtime')", stepPolicy, "modifiers are not accepted", "", 0},
		{"COUNT(*) FROM patients GROUP BY strftime(sex, ward)", stepPolicy, "format literal", "", 0},
		{"COUNT(*) FROM patients GROUP BY height / 2", stepPolicy, `no column "height"`, "", 0},
		{"COUNT(*) FROM patients GROUP BY 2", stepPolicy, "between 1 and 1", "", 0},
		{"COUNT(*), age FROM patients GROUP BY 1", stepPolicy, "an aggregate", "", 0},
	} {
		c := checkerBefore(t, tc.sql, tc.p, stepGroupBy)
		if refusedWith(t, tc.sql, c.groupBy(), tc.want) && tc.want == "" {
			if got := strings.Join(c.pl.keys, " | "); got != tc.keys || len(c.pl.keySources) != tc.srcs {
				t.Errorf("%s: keys %q, sources %v", tc.sql, got, c.pl.keySources)
			}
		}
	}
}

// A SELECT-list expression must be a GROUP BY key, written the same way.
func TestCheckerComputedKeyItems(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"age/10*10, COUNT(*) FROM patients GROUP BY age / 10 * 10", ""},
		{"(age / 10) * 10 AS d, COUNT(*) FROM patients GROUP BY d", ""},
		{"age / 10 * 10 AS d, COUNT(*) FROM patients GROUP BY age / 10", "neither a GROUP BY key nor a DP aggregate"},
		{"age + 1, COUNT(*) FROM patients GROUP BY age", "neither a GROUP BY key"},
		{"age / 10, COUNT(*) FROM patients GROUP BY age / 10", ""},
	} {
		c := checkerBefore(t, tc.sql, stepPolicy, stepItems)
		refusedWith(t, tc.sql, c.items(), tc.want)
	}
}

// The rewritten SQL of a computed key: grouped and released in its
// canonical form (an integral REAL as its INTEGER; text folded as the
// collation it inherits through CAST), the key's columns guarded by their
// max_length like WHERE's.
func TestRewriteComputedKeys(t *testing.T) {
	pl := levelPlan(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) x / 10 * 10 AS d, CAST(g AS TEXT) AS h, `+
		`COUNT(*) AS n FROM t GROUP BY d, h`, Policy{MaxGroups: 1, MaxRows: 1})
	if err := pl.setKeyForms(map[string]KeyForm{`(("x" / 10) * 10)`: {"BLOB", "BINARY"},
		`CAST("g" AS TEXT)`: {"BLOB", "NOCASE"}}); err != nil {
		t.Fatal(err)
	}
	got := rewrite(pl)
	const want = `SELECT (CASE typeof((("x" / 10) * 10)) WHEN 'real' THEN CASE WHEN (("x" / 10) * 10) = ` +
		`CAST((("x" / 10) * 10) AS INTEGER) THEN CAST((("x" / 10) * 10) AS INTEGER) ELSE (("x" / 10) * 10) END ELSE ` +
		`(("x" / 10) * 10) END) COLLATE BINARY, (CASE typeof(CAST("g" AS TEXT)) WHEN 'text' THEN lower(CAST("g" AS TEXT)) ` +
		`WHEN 'real' THEN CASE WHEN CAST("g" AS TEXT) = CAST(CAST("g" AS TEXT) AS INTEGER) THEN ` +
		`CAST(CAST("g" AS TEXT) AS INTEGER) ELSE CAST("g" AS TEXT) END ELSE CAST("g" AS TEXT) END) COLLATE BINARY, ` +
		`count(*), count(*) FROM main."t" WHERE (octet_length("x") > 1024) IS NOT 1 AND (octet_length("g") > 1024) IS NOT 1 GROUP BY `
	if !strings.HasPrefix(got, want) {
		t.Errorf("rewrite:\n%s\nwant it to start with\n%s", got, want)
	}
	if pl.rowWork < keyEvaluations*2 {
		t.Errorf("row work %v does not count the keys", pl.rowWork)
	}
}

// Run over SQLite, computed keys group as their canonical forms: a REAL
// 30.0 and INTEGER 30 are one key, released as 30; round(x, -1) rounds to
// tens (BigQuery's reading; SQLite's round() would ignore the negative
// digits); CAST keeps NOCASE, substr does not.
func TestComputedKeysRun(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE t (pid INTEGER, g TEXT COLLATE NOCASE, x)`,
		`INSERT INTO t VALUES (1, 'SMITH', 30.0), (2, 'smith', 30), (3, 'Smith', 35), (4, 'jones', 44.9), (5, 'JONES', -15)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		keys string
		want []string
	}{
		{"x / 10 * 10", []string{"-10 1 1", "30 3 3", "44.900000000000006 1 1"}}, // / of a REAL is not integral
		{"CAST(x AS INTEGER) / 10 * 10", []string{"-10 1 1", "30 3 3", "40 1 1"}},
		{"round(x, -1)", []string{"-20 1 1", "30 2 2", "40 2 2"}},
		{"CAST(g AS TEXT)", []string{"jones2 2", "smith3 3"}},
		{"substr(g, 1, 2)", []string{"JO1 1", "SM1 1", "Sm1 1", "jo1 1", "sm1 1"}},
	} {
		pl := levelPlan(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t GROUP BY `+tc.keys,
			Policy{MaxGroups: 1, MaxRows: 1})
		forms, err := pl.readKeyForms(t.Context(), conn)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.setKeyForms(forms); err != nil {
			t.Fatal(err)
		}
		got := queryRows(t, db, rewrite(pl))
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("GROUP BY %s: %q, want %q", tc.keys, got, tc.want)
		}
	}
}

// The HAVING step: output names, aggregates that are outputs, and the
// refusals that say how to write it.
func TestCheckerHaving(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING n > 10", ""},
		{"sex, COUNT(*) FROM patients GROUP BY sex HAVING COUNT(*) > 10 AND sex <> 'x'", ""},
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING count(*) BETWEEN 1 AND 5 OR n IS NULL", ""},
		{"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.9) sex, COUNT(*) AS n FROM patients " +
			"GROUP BY sex HAVING n_lo > 10", ""},
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING SUM(bmi) > 10", "SUM(\"bmi\") is not an output"},
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING COUNT(age) > 10", "is not an output"},
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING age > 10", "filter rows before aggregation in WHERE"},
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING m > 10", "no output is named m"},
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex HAVING lower(sex) = 'f'", "HAVING takes output names"},
	} {
		c := checkerBefore(t, tc.sql, stepPolicy, len(checkerSteps)-1)
		refusedWith(t, tc.sql, c.having(), tc.want)
	}
}

// HAVING's evaluation follows SQLite's: NULL is unknown, integers divide as
// integers, a number sorts before text.
func TestHavingEvaluation(t *testing.T) {
	row := []any{"f", int64(12), 2.5, nil}
	cols := map[string]int{"k": 0, "n": 1, "m": 2, "z": 3}
	for _, tc := range []struct {
		cond string
		want bool
	}{
		{"n > 10", true}, {"n / 5 = 2", true}, {"m * 2 = 5", true}, {"n % 5 = 2", true},
		{"z > 1", false}, {"NOT z > 1", false}, {"z IS NULL", true}, {"z > 1 OR n > 1", true}, {"z > 1 AND n > 1", false},
		{"k = 'f'", true}, {"k > 100", true}, {"n BETWEEN 12 AND 12", true}, {"n NOT BETWEEN 1 AND 20", false},
		{"k IN ('a', 'f')", true}, {"n IN (1, z)", false}, {"NOT n IN (1, z)", false}, {"n NOT IN (1, 2)", true},
		{"n / 0 IS NULL", true}, {"-n < 0", true}, {"n IS NOT z", true}, {"m = 2.5", true}, {"n + m > 14.4", true},
	} {
		st, err := dpselect.Parse("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t HAVING " + tc.cond)
		if err != nil {
			t.Fatal(err)
		}
		h := &havingClause{cond: st.Having, cols: cols}
		if got := h.keep(row); got != tc.want {
			t.Errorf("HAVING %s on %v: %v, want %v", tc.cond, row, got, tc.want)
		}
	}
}

// Attack: HAVING on a count that would be 1 without noise. HAVING filters
// the released rows by their noisy values, never by exact ones: a group
// whose exact count is 1 passes HAVING n = 1 only when its noise happens to
// round to 0 (about 38% of releases at sigma 1), and every kept row
// satisfies the condition on its released value. HAVING evaluated on exact
// counts would keep it every time.
func TestHavingSeesNoisyValuesOnly(t *testing.T) {
	st, err := dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) AS n FROM t GROUP BY g HAVING n = 1`)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := checkStatement(st, map[string]Policy{"t": {MaxGroups: 1, MaxRows: 1, PublicKeys: map[string]string{"g": "gl.g"}}},
		map[string]string{"g": "g"}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if err := completePlan(pl, nil, false, SchemaFacts{}, [][]any{{"one", "many"}}); err != nil {
		t.Fatal(err)
	}
	groups := []group{newGroup([]any{"one"}, 1), newGroup([]any{"many"}, 1)}
	groups[0].persons, groups[0].vals[0] = 1, 1
	groups[1].persons, groups[1].vals[0] = 1000, 1000
	noise := release.NewNoise()
	const n = 2000
	kept := 0
	for range n {
		res := releaseRows(pl, groups, noise)
		for _, r := range res.Rows {
			if r[1] != int64(1) {
				t.Fatalf("HAVING n = 1 kept %v", r)
			}
			if r[0] != "one" {
				t.Fatalf("HAVING kept the group of 1000: %v", r)
			}
			kept++
		}
	}
	if f := float64(kept) / n; f < 0.2 || f > 0.6 {
		t.Errorf("the one-person group passed HAVING n = 1 in %.2f of releases, want about 0.38 (noisy, not exact)", f)
	}
}
