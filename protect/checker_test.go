package protect

import (
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// The checker's steps, one test each: every step is run on statements whose
// earlier steps pass, and checked for what it sets and what it refuses.

var stepCols = map[string]string{"pid": "pid", "sex": "Sex", "age": "age", "bmi": "bmi", "ward": "ward"}

// stepPolicy is patients' policy in these tests, unless a case gives another.
var stepPolicy = Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3, Bounds: map[string][2]float64{"bmi": {10, 60}}}

// The steps in checkStatement's order (checkerSteps).
const (
	stepFrom = iota
	stepPrivacyUnit
	stepOptions
	stepGroupBy
	stepItems
	stepIntervals
	stepOrderBy
	stepWhere
	stepBudget
	stepRowWork
)

// checkerBefore parses src (OPTIONS (mu = 1) is prefixed when src does not
// start with SELECT) and returns its checker over patients under policy p,
// with the steps before step run.
func checkerBefore(t *testing.T, src string, p Policy, step int) *checker {
	t.Helper()
	if !strings.HasPrefix(src, "SELECT") {
		src = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) " + src
	}
	st, err := dpselect.Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	c := newChecker(st, map[string]Policy{"patients": p, "wards": {MaxGroups: 1, MaxRows: 1}}, stepCols, 1e-5)
	if err := c.run(checkerSteps[:step]...); err != nil {
		t.Fatalf("%s: an earlier step refused: %v", src, err)
	}
	return c
}

// refusedWith fails unless err is a refusal containing want ("" wants none).
func refusedWith(t *testing.T, what string, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: refused: %v", what, err)
	case want != "" && (!IsRefusal(err) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: got %v, want a refusal containing %q", what, err, want)
	default:
		return err == nil
	}
	return false
}

func TestCheckerFrom(t *testing.T) {
	c := checkerBefore(t, "COUNT(*) FROM PATIENTS", stepPolicy, stepFrom)
	if refusedWith(t, "PATIENTS", c.from(), "") && (c.pl.table != "patients" || c.pl.policy.MaxRows != 3) {
		t.Errorf("from: table %q policy %+v", c.pl.table, c.pl.policy)
	}
	c = checkerBefore(t, "COUNT(*) FROM visits", stepPolicy, stepFrom)
	refusedWith(t, "visits", c.from(), `table "visits" is not protected`)
}

func TestCheckerPrivacyUnit(t *testing.T) {
	c := checkerBefore(t, "COUNT(*) FROM patients", stepPolicy, stepPrivacyUnit)
	if refusedWith(t, "pid", c.privacyUnit(), "") && !c.pl.reads["pid"] {
		t.Errorf("the privacy unit is not among the reads %v", c.pl.reads)
	}
	person := Policy{PrivacyUnit: "person", MaxGroups: 1, MaxRows: 1}
	c = checkerBefore(t, "COUNT(*) FROM patients", person, stepPrivacyUnit)
	refusedWith(t, "person", c.privacyUnit(), `no column "person" in patients (privacy unit)`)
	c = checkerBefore(t, "COUNT(*) FROM patients", Policy{MaxGroups: 1, MaxRows: 1}, stepPrivacyUnit)
	if refusedWith(t, "no unit", c.privacyUnit(), "") && len(c.pl.reads) != 0 {
		t.Errorf("reads %v without a privacy unit", c.pl.reads)
	}
}

func TestCheckerOptions(t *testing.T) {
	for _, tc := range []struct {
		opts, want string
		check      func(c *checker) bool
	}{
		{"mu = 0.5", "", func(c *checker) bool { return c.pl.mu == 0.5 && c.pl.maxGroups == 2 && c.pl.maxRows == 3 }},
		{"epsilon = 1, delta = 1e-6", "", func(c *checker) bool { return c.pl.eps == 1 && c.pl.delta == 1e-6 }},
		{"MU = 1, max_groups_contributed = 1", "", func(c *checker) bool { return c.pl.maxGroups == 1 }},
		{"epsilon = 1, delta = 1e-6, noise = 'LAPLACE'", "", func(c *checker) bool {
			return c.pl.noise == calibrate.Laplace
		}},
		{"mu = 1, noise = 'gaussian', selection_delta = 1e-9", "", func(c *checker) bool {
			return c.pl.noise == calibrate.Gaussian && c.opt.selectionDelta == 1e-9
		}},
		{"mu = 1", "", func(c *checker) bool { return c.pl.noise == calibrate.Auto && c.pl.conf == 0 }},
		{"mu = 1, noise = 'auto', confidence = 0.95", "", func(c *checker) bool {
			return c.pl.noise == calibrate.Auto && c.pl.conf == 0.95
		}},
		{"mu = 1, confidence = 1", "confidence must lie in [0.5, 1), got 1", nil},
		{"mu = 1, confidence = 0.4", "confidence must lie in [0.5, 1)", nil},
		{"mu = 1, mu = 2", "option mu is given twice", nil},
		{"mu = 'x'", "option mu takes a number, not the string 'x'", nil},
		{"mu = 1, noise = 2", "option noise takes 'auto', 'laplace' or 'gaussian'", nil},
		{"mu = 1, noise = 'uniform'", "unknown noise 'uniform'", nil},
		{"mu = 1, max_groups_contributed = 3", "max_groups_contributed must be an integer in [1, 2]", nil},
		{"mu = 1, max_groups_contributed = 1.5", "max_groups_contributed must be an integer", nil},
		{"mu = 1, selection_delta = 1", "selection_delta must lie in (0, 1), got 1", nil},
		{"mu = 1, privacy_unit_column = 1", "set by the owner's policy", nil},
		{"mu = 1, seed = 1", `unknown option "seed"`, nil},
		{"mu = 1, delta = 1e-6", "give mu, or epsilon and delta, not both", nil},
		{"mu = 0", "mu must lie in (0, 100], got 0", nil},
		{"mu = 101", "mu must lie in (0, 100]", nil},
		{"epsilon = 1, delta = 1", "epsilon must be positive and finite and delta in (0, 1)", nil},
		{"epsilon = -1, delta = 1e-6", "epsilon must be positive", nil},
		{"epsilon = 1", "OPTIONS must give mu, or epsilon and delta", nil},
		{"max_groups_contributed = 1", "OPTIONS must give mu, or epsilon and delta", nil},
		{"mu = 1, noise = 'laplace'", "noise = 'laplace' is calibrated from an epsilon budget", nil},
	} {
		src := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (" + tc.opts + ") COUNT(*) FROM patients"
		c := checkerBefore(t, src, stepPolicy, stepOptions)
		if refusedWith(t, tc.opts, c.options(), tc.want) && tc.check != nil && !tc.check(c) {
			t.Errorf("%s: options %+v, plan %+v", tc.opts, c.opt, c.pl)
		}
	}
}

func TestCheckerGroupBy(t *testing.T) {
	keys := Policy{MaxGroups: 2, MaxRows: 1, PublicKeys: map[string]string{"Sex": "sexes.s", "ward": "wardlist.w"}}
	protectedKeys := Policy{MaxGroups: 2, MaxRows: 1, PublicKeys: map[string]string{"Sex": "wards.name"}}
	for _, tc := range []struct {
		sql  string
		p    Policy
		want string
		keys string // the plan's keys
		srcs int    // the public key sources
		g    int    // max_groups after the step
	}{
		{"COUNT(*) FROM patients", stepPolicy, "", "", 0, 1},
		{"COUNT(*) FROM patients GROUP BY SEX, age", stepPolicy, "", "Sex age", 0, 2},
		{"COUNT(*) FROM patients GROUP BY sex, ward", keys, "", "Sex ward", 2, 2},
		{"COUNT(*) FROM patients GROUP BY sex, age", keys, "", "Sex age", 0, 2},
		{"COUNT(*) FROM patients GROUP BY sex, SEX", stepPolicy, "GROUP BY names Sex twice", "", 0, 0},
		{"COUNT(*) FROM patients GROUP BY height", stepPolicy, `no column "height" in patients (GROUP BY)`, "", 0, 0},
		{"COUNT(*) FROM patients GROUP BY sex", protectedKeys,
			"the public keys of Sex come from wards, which is now protected", "", 0, 0},
	} {
		c := checkerBefore(t, tc.sql, tc.p, stepGroupBy)
		if refusedWith(t, tc.sql, c.groupBy(), tc.want) {
			if got := strings.Join(c.pl.keys, " "); got != tc.keys || len(c.pl.keySources) != tc.srcs || c.pl.maxGroups != tc.g {
				t.Errorf("%s: keys %q, sources %v, max_groups %d", tc.sql, got, c.pl.keySources, c.pl.maxGroups)
			}
		}
	}
}

func TestCheckerItems(t *testing.T) {
	for _, tc := range []struct {
		sql, want string
		items     []int
		bounds    [][2]float64 // per aggregate
	}{
		{"sex, COUNT(*) AS n, SUM(bmi), AVG(age, contribution_bounds_per_group => (0, 120)) " +
			"FROM patients GROUP BY sex, age", "", []int{-1, 0, 1, 2}, [][2]float64{{}, {10, 60}, {0, 120}}},
		{"COUNT(*), AGE FROM patients GROUP BY sex, age", "", []int{0, -2}, [][2]float64{{}}},
		{"SUM(bmi, contribution_bounds_per_group => (0, 1)) FROM patients", "", []int{0}, [][2]float64{{0, 1}}},
		{"COUNT(*) AS n, SUM(bmi) AS N FROM patients", "two outputs are named N", nil, nil},
		{"sex, COUNT(*) FROM patients", "column sex is neither a GROUP BY key nor inside a DP aggregate", nil, nil},
		{"sex FROM patients GROUP BY sex", "needs at least one aggregate", nil, nil},
		{"AVG(height) FROM patients", `no column "height" in patients (AVG)`, nil, nil},
		{"MEDIAN(age) FROM patients", "MEDIAN(age) needs bounds", nil, nil},
		{"SUM(age, contribution_bounds_per_group => (5, 5)) FROM patients", "must satisfy lo < hi", nil, nil},
		{"SUM(age, contribution_bounds_per_group => (0, 2e15)) FROM patients", "|lo|, |hi| <= 1e15", nil, nil},
	} {
		c := checkerBefore(t, tc.sql, stepPolicy, stepItems)
		if !refusedWith(t, tc.sql, c.items(), tc.want) {
			continue
		}
		if len(c.pl.items) != len(tc.items) || len(c.pl.aggs) != len(tc.bounds) {
			t.Fatalf("%s: items %v, aggregates %+v", tc.sql, c.pl.items, c.pl.aggs)
		}
		for i, k := range tc.items {
			if c.pl.items[i] != k {
				t.Errorf("%s: items %v, want %v", tc.sql, c.pl.items, tc.items)
			}
		}
		for i, b := range tc.bounds {
			if a := c.pl.aggs[i]; a.lo != b[0] || a.hi != b[1] {
				t.Errorf("%s: aggregate %d bounds (%v, %v), want %v", tc.sql, i, a.lo, a.hi, b)
			}
		}
	}
}

func TestCheckerOrderBy(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"sex, COUNT(*) AS n FROM patients GROUP BY sex ORDER BY N DESC, sex, 1", ""},
		{"sex, COUNT(*) FROM patients GROUP BY sex ORDER BY age", "ORDER BY age: order by an output name or position"},
	} {
		c := checkerBefore(t, tc.sql, stepPolicy, stepOrderBy)
		refusedWith(t, tc.sql, c.orderBy(), tc.want)
	}
}

func TestCheckerWhere(t *testing.T) {
	for _, tc := range []struct{ where, want, rendered string }{
		{"SEX = 'F' AND lower(WARD) LIKE 'a%'", "", `(("Sex" = 'F') AND (lower("ward") LIKE 'a%'))`},
		{"coalesce(age, 0) > min(bmi, 3)", "", `(coalesce("age", 0) > min("bmi", 3))`},
		{"height > 1", `no column "height" in patients (WHERE)`, ""},
		{"abs(age) > 1", "function abs() is not allowed in WHERE: only functions that cannot fail on any input", ""},
		{"max(age) > 1", "max() needs at least 2 arguments here", ""},
	} {
		c := checkerBefore(t, "COUNT(*) FROM patients WHERE "+tc.where, stepPolicy, stepWhere)
		if refusedWith(t, tc.where, c.where(), tc.want) && c.pl.where != tc.rendered {
			t.Errorf("WHERE %s renders as %s, want %s", tc.where, c.pl.where, tc.rendered)
		}
		if tc.want == "" && (!c.pl.reads["sex"] && !c.pl.reads["age"]) {
			t.Errorf("WHERE %s: reads %v", tc.where, c.pl.reads)
		}
	}
	c := checkerBefore(t, "COUNT(*) FROM patients", stepPolicy, stepWhere)
	if err := c.where(); err != nil || c.pl.where != "" {
		t.Errorf("no WHERE: %v %q", err, c.pl.where)
	}
}

func TestCheckerIntervals(t *testing.T) {
	for _, tc := range []struct{ opts, items, want string }{
		{"mu = 1", "COUNT(*), SUM(bmi)", ""},
		{"mu = 1, confidence = 0.9", "sex, COUNT(*) AS n, SUM(bmi) AS s", ""},
		{"mu = 1, confidence = 0.9", "sex, COUNT(*) AS n, SUM(bmi)", "every aggregate needs an alias"},
		{"mu = 1, confidence = 0.9", "COUNT(*) AS n, SUM(bmi) AS n_lo",
			"n's interval is released as n_lo, which another output"},
		{"mu = 1, confidence = 0.9", "COUNT(*) AS n_HI, SUM(bmi) AS n", "n's interval is released as n_hi"},
	} {
		src := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (" + tc.opts + ") " + tc.items + " FROM patients GROUP BY sex"
		c := checkerBefore(t, src, stepPolicy, stepIntervals)
		if refusedWith(t, src, c.intervals(), tc.want) && c.pl.conf > 0 && (!c.outputs["n_lo"] || !c.outputs["s_hi"]) {
			t.Errorf("%s: outputs %v lack the intervals'", src, c.outputs)
		}
	}
	// ORDER BY may name an interval.
	c := checkerBefore(t, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.9) COUNT(*) AS n "+
		"FROM patients ORDER BY n_lo", stepPolicy, stepOrderBy)
	refusedWith(t, "ORDER BY n_lo", c.orderBy(), "")
}

func TestCheckerBudget(t *testing.T) {
	keys := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3, Bounds: stepPolicy.Bounds,
		PublicKeys: map[string]string{"Sex": "sexes.s"}}
	for _, tc := range []struct {
		opts, sql string
		p         Policy
		want      string
		deltaS    float64
		set       bool
	}{
		{"mu = 1", "sex, COUNT(*) FROM patients GROUP BY sex", stepPolicy, "", SelectionDeltaShare * 1e-5, false},
		{"mu = 1", "COUNT(*) FROM patients", stepPolicy, "", 0, false},
		{"mu = 1", "sex, COUNT(*) FROM patients GROUP BY sex", keys, "", 0, false},
		{"epsilon = 1, delta = 1e-6", "sex, COUNT(*) FROM patients GROUP BY sex", stepPolicy, "", 0, false},
		{"epsilon = 1, delta = 1e-6, selection_delta = 5e-7", "sex, COUNT(*) FROM patients GROUP BY sex", stepPolicy,
			"", 5e-7, true},
		{"mu = 1, selection_delta = 1e-9", "sex, COUNT(*) FROM patients GROUP BY sex", stepPolicy, "", 1e-9, true},
		{"mu = 1, selection_delta = 1e-9", "sex, COUNT(*) FROM patients GROUP BY sex", keys,
			"every GROUP BY column has public keys", 0, false},
		{"mu = 1, selection_delta = 1e-9", "COUNT(*) FROM patients", stepPolicy, "this statement has none", 0, false},
		{"epsilon = 1, delta = 1e-6, selection_delta = 1e-6", "sex, COUNT(*) FROM patients GROUP BY sex", stepPolicy,
			"selection_delta 1e-06 must be below the statement's delta 1e-06", 0, false},
	} {
		src := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (" + tc.opts + ") " + tc.sql
		c := checkerBefore(t, src, tc.p, stepBudget)
		if refusedWith(t, src, c.budget(), tc.want) && (c.pl.deltaS != tc.deltaS || c.pl.deltaSSet != tc.set) {
			t.Errorf("%s: delta_s %v (set %v), want %v (%v)", src, c.pl.deltaS, c.pl.deltaSSet, tc.deltaS, tc.set)
		}
	}
}

func TestCheckerRowWork(t *testing.T) {
	c := checkerBefore(t, "COUNT(*) FROM patients WHERE lower(sex) = 'f'", stepPolicy, stepRowWork)
	if refusedWith(t, "lower(sex)", c.rowWork(), "") &&
		(!(c.pl.rowWork > 0) || !strings.Contains(c.pl.where, "octet_length")) {
		t.Errorf("row work %v, WHERE %s", c.pl.rowWork, c.pl.where)
	}
	c = checkerBefore(t, "COUNT(*) FROM patients WHERE sex LIKE '%"+strings.Repeat("a", 200)+"%'", stepPolicy, stepRowWork)
	refusedWith(t, "a long LIKE", c.rowWork(), "units of work per row")
}

// checkStatement runs the steps in order: of two faults, the earlier
// clause's is the one refused.
func TestCheckerStepOrder(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"OPTIONS (mu = 0) height, COUNT(*) FROM visits", "is not protected"},
		{"OPTIONS (mu = 0) height, COUNT(*) FROM patients GROUP BY weight", "mu must lie"},
		{"OPTIONS (mu = 1) height, COUNT(*) FROM patients GROUP BY weight", "(GROUP BY)"},
		{"OPTIONS (mu = 1) height, COUNT(*) FROM patients WHERE abs(1) = 1", "column height"},
	} {
		st, err := dpselect.Parse("SELECT WITH DIFFERENTIAL_PRIVACY " + tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		_, err = checkStatement(st, map[string]Policy{"patients": stepPolicy}, stepCols, 1e-5)
		refusedWith(t, tc.sql, err, tc.want)
	}
}
