package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// Attacks on issue 25's forms (GROUP BY expressions, HAVING, COUNT(DISTINCT),
// PERCENTILE_CONT, APPROX_QUANTILES) by an analyst who writes the SQL and
// knows every other row: what one person moves must stay within what the
// statement is charged for.

// neighbours25 returns two engines over t(pid, g, x) that differ by one
// person (pid 999, in the second only) holding many rows: in every group
// key the attacks below compute (spellings 1, 1.0, '1', -0.0, 0, NULL; keys
// no one else has), values no one else holds, values others hold, NULLs and
// values outside the bounds. Every other person holds at most max_rows rows
// in at most max_groups groups, so the bounding keeps all of theirs and the
// neighbours' exact figures differ by the heavy person's kept rows alone.
func neighbours25(t *testing.T, p Policy, setup ...string) (e0, e1 *Engine) {
	t.Helper()
	fill := func(heavy bool) func(ins func(pid, g, x any)) {
		return func(ins func(pid, g, x any)) {
			for i := range 60 {
				g := []string{"a", "b", "1"}[i%3]
				ins(i, g, float64(i%5)) // values others share
				if i%2 == 0 {
					ins(i, g, nil)
				}
			}
			if !heavy {
				return
			}
			for i := range 60 {
				var x any = 1000.0 + float64(i) // its own values, beyond the bounds
				switch i % 4 {
				case 1:
					x = float64(i % 5) // values others hold
				case 2:
					x = nil
				case 3:
					x = float64(20 + i) // its own values, within the bounds
				}
				ins(999, []string{"a", "b", "1", "c", "d"}[i%5], x)
			}
		}
	}
	e0, db0 := testDB(t, 1e6, p, fill(false))
	e1, db1 := testDB(t, 1e6, p, fill(true))
	for _, q := range setup { // public tables (join_test.go), the same in both
		for _, db := range []*sql.DB{db0, db1} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e0, e1
}

// norms returns, for each of the plan's values, the L1 and L2 norms over
// groups (and a histogram's buckets) of the difference between the two
// neighbours' exact figures.
func norms(pl0 *plan, g0 []group, pl1 *plan, g1 []group) (l1, l2 []float64) {
	byKey := func(gs []group) map[string]*group {
		m := map[string]*group{}
		for i := range gs {
			m[canonKey(gs[i].keys)] = &gs[i]
		}
		return m
	}
	m0, m1 := byKey(g0), byKey(g1)
	empty := newGroup(nil, len(pl0.aggs))
	keys := map[string]bool{}
	for k := range m0 {
		keys[k] = true
	}
	for k := range m1 {
		keys[k] = true
	}
	l1, l2 = make([]float64, len(pl0.values)), make([]float64, len(pl0.values))
	for vi := range pl0.values {
		v0, v1 := &pl0.values[vi], &pl1.values[vi]
		for k := range keys {
			a, b := m0[k], m1[k]
			if a == nil {
				a = &empty
			}
			if b == nil {
				b = &empty
			}
			for d := range max(v0.Dim, 1) {
				x := math.Abs(v1.exact(b, d) - v0.exact(a, d))
				l1[vi] += x
				l2[vi] += x * x
			}
		}
		l2[vi] = math.Sqrt(l2[vi])
	}
	return l1, l2
}

// One person's effect on every figure a statement draws noise for is within
// the sensitivity the statement is charged for (L2 max_rows x bound x
// sqrt(max_groups), L1 with max_groups; 1 per group for the count of
// persons), whatever key expressions, distinct counts and quantiles it asks
// for; and the charge (mechanism and parts) is the same on both neighbours.
// Outcome: held.
func TestAttack25NeighbourSensitivity(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}}
	e0, e1 := neighbours25(t, p)
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	for _, q := range []string{
		`g, COUNT(*) AS n, COUNT(DISTINCT pid) AS persons, COUNT(DISTINCT x) AS xs, COUNT(x) AS nx, SUM(x) AS s,
			MEDIAN(x) AS m, PERCENTILE_CONT(x, 0.9) AS p90 FROM t GROUP BY g`,
		// A key that isolates the heavy person: each of its rows its own group.
		`CASE WHEN pid = 999 THEN x ELSE 1 END AS k, COUNT(*) AS n, COUNT(DISTINCT x) AS xs,
			APPROX_QUANTILES(x, 4) AS q FROM t GROUP BY k`,
		// Keys of one value in several spellings and types, and NULL.
		`iif(pid = 999, CASE CAST(x AS INTEGER) % 6 WHEN 0 THEN '1' WHEN 1 THEN 1 WHEN 2 THEN 1.0 WHEN 3 THEN -0.0
			WHEN 4 THEN 0 ELSE NULL END, g) AS k, COUNT(*) AS n, COUNT(DISTINCT x) AS xs, AVG(x) AS a FROM t GROUP BY k`,
		`substr(g, 1, 1) AS k, CAST(x AS INTEGER) % 2 AS odd, COUNT(DISTINCT pid) AS persons, COUNT(DISTINCT x) AS xs,
			VAR_POP(x) AS v FROM t GROUP BY k, odd`,
		`COUNT(DISTINCT x) AS xs, COUNT(DISTINCT pid) AS persons, APPROX_QUANTILES(x, 10) AS q FROM t`,
		`COUNT(DISTINCT g) AS gs, COUNT(*) AS n FROM t`,
		// max_groups_contributed lowers max_groups for the queries of their own too.
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, max_groups_contributed = 1) g, COUNT(DISTINCT x) AS xs,
			PERCENTILE_CONT(x, 0.5) AS m, COUNT(DISTINCT pid) AS p FROM t GROUP BY g`,
		// Through a CTE that filters and renames (inlined: the same statement over t).
		`WITH heavy AS (SELECT pid, g AS grp, x AS v FROM t WHERE x IS NOT 3) SELECT WITH DIFFERENTIAL_PRIVACY
			OPTIONS (mu = 1) grp, COUNT(DISTINCT v) AS vs, APPROX_QUANTILES(v, 2) AS q FROM heavy GROUP BY grp`,
	} {
		if !strings.HasPrefix(q, "SELECT") && !strings.HasPrefix(q, "WITH") {
			q = dp + q
		}
		for rep := range 8 {
			pl0, g0 := exact(t, e0, q)
			pl1, g1 := exact(t, e1, q)
			if fmt.Sprint(pl0.mech, pl0.details) != fmt.Sprint(pl1.mech, pl1.details) {
				t.Fatalf("%.60s: the charge depends on the data:\n%v\n%v", q, pl0.mech, pl1.mech)
			}
			l1, l2 := norms(pl0, g0, pl1, g1)
			tight := 0.0 // the largest share of its charged L2 one person moves a value by
			for vi, v := range pl0.values {
				norm := float64(v.Rows) * v.Bound
				if v.Fixed {
					norm = float64(v.Rows) * (v.Bound + v.Quantum/2)
				}
				G := float64(pl0.maxGroups)
				if l2[vi] > norm*math.Sqrt(G)+1e-9 || l1[vi] > norm*G+1e-9 {
					t.Errorf("%.60s (run %d): one person moves %s by L1 %g, L2 %g; charged for L2 %g (L1 %g)",
						q, rep, v.Name, l1[vi], l2[vi], norm*math.Sqrt(G), norm*G)
				}
				tight = max(tight, l2[vi]/(norm*math.Sqrt(G)))
			}
			// The heavy person fills its bounds: the test would see more.
			if tight < 0.99 {
				t.Errorf("%.60s (run %d): the heavy person moves no value by its full sensitivity (at most %.2f of it)", q, rep, tight)
			}
		}
	}
}

// A GROUP BY expression that isolates one person (CASE WHEN pid = 17 THEN
// x ELSE 0 END; x * 0 + pid) makes groups of one person, which the
// partition selection releases with probability at most delta_s: in 2,000
// releases none comes out, while the group of everyone else always does.
// Outcome: held.
func TestAttack25IsolatingKeyNotReleased(t *testing.T) {
	e, _ := testDB(t, 1e6, Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1}, func(ins func(pid, g, x any)) {
		for i := range 300 {
			ins(i, "a", 22.5)
		}
	})
	noise := release.NewNoise()
	for _, tc := range []struct {
		q      string
		common int // releases of the group of everyone else
	}{
		{`CASE WHEN pid = 17 THEN x ELSE 0 END AS k, COUNT(*) AS n FROM t GROUP BY k`, 2000},
		{`CASE WHEN pid = 17 THEN 'x' ELSE g END AS k, COUNT(*) AS n FROM t GROUP BY k`, 2000},
		{`x * 0 + pid AS k, COUNT(*) AS n FROM t GROUP BY k`, 0}, // everyone alone
	} {
		q := tc.q
		pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `+q)
		if !pl.selection() {
			t.Fatalf("%s: no partition selection", q)
		}
		lone, common := 0, 0
		for range 2000 {
			for _, r := range releaseRows(pl, gs, noise).Rows {
				if n, _ := r[1].(int64); n < 100 {
					lone++
				} else {
					common++
				}
			}
		}
		t.Logf("%s: %d groups, %d lone, %d common", q, len(gs), lone, common)
		if common != tc.common {
			t.Errorf("%s: the group of 299 persons came out %d times in 2,000 releases, want %d", q, common, tc.common)
		}
		if lone > 0 {
			t.Errorf("%s: a group of one person came out %d times in 2,000 releases", q, lone)
		}
	}
}

// HAVING is post-processing of the released rows: it must evaluate any
// released key without failing. A DATE column's key comes back from the
// driver as a time.Time, and HAVING d + 0 > 0 panicked (interface
// conversion) after the charge, taking the analyst's process (or the
// service's request) down. Outcome: not a leak (whether a row is released is
// the selection's), a crash: fixed, HAVING reads a time.Time as its text.
func TestAttack25HavingOnDateKey(t *testing.T) {
	rows := [][]any{{dateKey("2020-01-02"), int64(40)}, {dateKey("2020-01-01"), int64(7)}, {"garbage", int64(50)}}
	// A BOOLEAN column's key comes back as a bool: its integer to SQLite.
	hb := havingFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) d, COUNT(*) AS n FROM t GROUP BY d HAVING d = 1 AND d + 1 = 2`)
	if got := len(hb.filterRows([][]any{{true, int64(1)}, {false, int64(1)}})); got != 1 {
		t.Errorf("HAVING d = 1 over BOOLEAN keys true and false kept %d rows, want 1", got)
	}
	for _, tc := range []struct {
		having string
		want   int
	}{
		{"d + 0 > 0", 2}, // text '2020-...' is 2020 as a number; 'garbage' is 0
		{"d > '2020-01-01 00:00:00+00:00'", 2},
		{"d = '2020-01-01 00:00:00+00:00'", 1},
		{"-d < 0 AND n > 10", 1},
		{"d BETWEEN 1 AND 'z' AND d IN ('x', 2)", 0},
		{"NOT d", 1},
	} {
		h := havingFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) d, COUNT(*) AS n FROM t GROUP BY d HAVING `+tc.having)
		var got int
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("HAVING %s over a time.Time key panicked: %v", tc.having, r)
				}
			}()
			got = len(h.filterRows(append([][]any(nil), rows...)))
		}()
		if got != tc.want {
			t.Errorf("HAVING %s kept %d rows, want %d", tc.having, got, tc.want)
		}
	}
}

// HAVING names an aggregate by its function and column (HAVING SUM(x) > 10,
// HAVING PERCENTILE_CONT(x) > 5). With two outputs of that function and
// column (two percentiles, or two sums with different bounds) it silently
// filtered on the first. Outcome: not a leak (both are released values), a
// wrong answer: fixed, refused as ambiguous with the aliases to use.
func TestAttack25HavingAmbiguousAggregate(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{`g, PERCENTILE_CONT(x, 0.1) AS p10, PERCENTILE_CONT(x, 0.9) AS p90 FROM t GROUP BY g HAVING PERCENTILE_CONT(x) > 30`,
			"p10 or p90"},
		{`g, SUM(x, contribution_bounds_per_group => (0, 1)) AS s1, SUM(x) AS s2 FROM t GROUP BY g HAVING SUM(x) > 3`,
			"s1 or s2"},
		{`g, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY g HAVING SUM(x) > 3 AND COUNT(*) > 1`, ""},
		{`g, COUNT(x) AS n1, COUNT(DISTINCT x) AS n2 FROM t GROUP BY g HAVING COUNT(DISTINCT x) > 3`, ""},
	} {
		src := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ` + tc.sql
		_, err := checkerFor(t, src)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.sql, err)
		case tc.want != "" && (err == nil || !IsRefusal(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want a refusal naming %q", tc.sql, err, tc.want)
		}
	}
}

// dateKey is a DATE column's value as go-sqlite3 returns it.
func dateKey(s string) any {
	v, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return v
}

// checkerFor checks src over t(pid, g, x, d) with bounds on x.
func checkerFor(t *testing.T, src string) (*plan, error) {
	t.Helper()
	st, err := dpselect.Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return checkStatement(st, map[string]Policy{"t": {PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1,
		Bounds: map[string][2]float64{"x": {0, 100}}}}, map[string]string{"pid": "pid", "g": "g", "x": "x", "d": "d"}, 1e-5)
}

// havingFor returns the checked HAVING of src.
func havingFor(t *testing.T, src string) *havingClause {
	t.Helper()
	pl, err := checkerFor(t, src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return pl.having
}

// A computed GROUP BY key is evaluated per row several times (its canonical
// form, the bounding's partition, each query of its own): over rows built to
// be slow, random accepted keys (and the costliest shapes just within the
// limits, chosen by a CASE on one person) cost at most their rowWork per row
// beyond reading the row and grouping it by a key of a kilobyte, with TestRowWorkBound's margin
// for a shared machine; keys beyond MaxRowWork are refused. Outcome: held.
func TestAttack25KeyWorkBound(t *testing.T) {
	const rows = 100
	var es []*Engine
	for kind := range workValues {
		es = append(es, workTable(t, rows, kind))
	}
	ctx := context.Background()
	conn, err := es[0].meta.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	planOf := func(key string) (*plan, error) {
		return es[0].plan(ctx, conn, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `+key+
			` AS k, COUNT(*) AS n, COUNT(DISTINCT n) AS d FROM t GROUP BY k`)
	}
	cpu := func(pl *plan) []time.Duration {
		var out []time.Duration
		for _, e := range es {
			c, err := e.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			best := time.Duration(1 << 62)
			for range 3 {
				c0 := processCPU()
				if _, err := e.readAll(ctx, c, pl); err != nil {
					t.Fatalf("%s: %v", pl.keys, err)
				}
				best = min(best, processCPU()-c0)
			}
			c.Close()
			out = append(out, best/rows)
		}
		return out
	}
	// The base reads both columns and groups by one of a kilobyte (keys
	// are sorted and compared, which costs in proportion to their length,
	// outside rowWork: see cost.go).
	base, err := planOf("b")
	if err != nil {
		t.Fatal(err)
	}
	baseCPU := cpu(base)
	fixed := []string{
		"CASE WHEN pid = 17 THEN trim(substr(a, 1, 30), " + dpselect.QuoteString(strings.Repeat("b", 9)+"a") + ") ELSE '' END",
		"instr(a, " + dpselect.QuoteString(strings.Repeat("a", 5)+"b") + ")",
		"substr(a, 1, 100) LIKE " + dpselect.QuoteString(strings.Repeat("%a_", 4)+"b"),
		"CAST(a AS BLOB)",
		"substr(b, 2, 1000)",
		"strftime('" + strings.Repeat("%J", 100) + "', pid)",
	}
	g := exprGen{rand.New(rand.NewPCG(25, 2))}
	var accepted, refused int
	for i := 0; accepted < 30 && i < 3000; i++ {
		key := g.expr(3)
		if i < len(fixed) {
			key = fixed[i]
		}
		if key == "a" || key == "b" || key == "n" || key == "pid" {
			continue // a column key: the base's cost
		}
		pl, err := planOf(key)
		if err != nil {
			if !IsRefusal(err) || i < len(fixed) {
				t.Fatalf("GROUP BY %s: %v", key, err)
			}
			refused++
			continue
		}
		if pl.rowWork > MaxRowWork {
			t.Fatalf("GROUP BY %s: accepted with rowWork %g over %d", key, pl.rowWork, MaxRowWork)
		}
		accepted++
		for k, c := range cpu(pl) {
			bound := 3 * (pl.rowWork + float64(baseCPU[k].Nanoseconds()) + 200)
			if float64(c.Nanoseconds()) > bound {
				t.Errorf("GROUP BY %.200s: %v of CPU per row on table %d, over the bound of %.0f ns (rowWork %.0f units)",
					key, c, k, bound, pl.rowWork)
			}
		}
	}
	t.Logf("%d keys accepted, %d refused; reading and grouping a row: %v", accepted, refused, baseCPU)
	if refused == 0 {
		t.Errorf("no key refused: the generator does not reach the limit")
	}
}

// A computed key over the row-work limit (or a literal over its cap in one)
// is refused naming GROUP BY, where the cost is, not WHERE. Outcome: a
// misleading message: fixed.
func TestAttack25KeyWorkRefusalNamesGroupBy(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{`trim(g, '` + strings.Repeat("b", 99) + `a') AS k, COUNT(*) AS n FROM t WHERE x > 1 GROUP BY k`, "refused: GROUP BY: the statement may do"},
		{`g = '` + strings.Repeat("b", 1001) + `' AS k, COUNT(*) AS n FROM t GROUP BY k`, "refused: GROUP BY: a literal of 1001 bytes"},
		{`g, COUNT(*) AS n FROM t WHERE instr(g, g) > 0 GROUP BY g`, "refused: WHERE: the statement may do"},
	} {
		_, err := checkerFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `+tc.sql)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.80s: got %v, want %q", tc.sql, err, tc.want)
		}
	}
}

// GROUP BY may name a column key by its alias, as it names a computed key's
// (SELECT g AS grp ... GROUP BY grp); it was refused with "no column grp".
// Outcome: a wrong refusal: fixed (the key is the column; its released
// column keeps the alias).
func TestAttack25GroupByColumnAlias(t *testing.T) {
	pl, err := checkerFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g AS grp, COUNT(*) AS n FROM t GROUP BY grp`)
	if err != nil || len(pl.keys) != 1 || pl.keys[0] != "g" || pl.columns()[0] != "grp" {
		t.Fatalf("GROUP BY the alias of a column: %v (keys %v)", err, pl)
	}
	// A column of the table still wins over an alias of that name, as in SQLite.
	if _, err := checkerFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g AS x, COUNT(*) AS n FROM t GROUP BY x`); err == nil {
		t.Errorf("g AS x ... GROUP BY x grouped by the alias, not by the column x")
	}
}

// HAVING reads text as SQLite does: its leading decimal number ('12abc' is
// 12, 'inf', 'nan' and '0x10' are 0, '1e999' is infinite), in time linear in
// its length (a released key of a megabyte took minutes, trying every
// prefix). Outcome: wrong answers on released keys, and a statement that
// spins after its charge: fixed.
func TestAttack25HavingTextAsNumber(t *testing.T) {
	h := havingFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) AS n FROM t GROUP BY g HAVING g + 0 > 5`)
	for _, tc := range []struct {
		key  any
		keep bool
	}{
		{"12abc", true}, {"  7", true}, {"inf", false}, {"infinity", false}, {"nan", false}, {"0x10", false},
		{"1_000", false}, {"1e999", true}, {"-1e999", false}, {".6e1", true}, {"6.", true}, {"+6", true},
		{[]byte("9"), true}, {"", false}, {"99999999999999999999", true},
	} {
		if got := h.keep([]any{tc.key, int64(1)}); got != tc.keep {
			t.Errorf("HAVING g + 0 > 5 with g = %q: kept %v, want %v", tc.key, got, tc.keep)
		}
	}
	// Infinity minus infinity is NULL in SQLite, not a NaN that is true.
	h = havingFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) AS n FROM t GROUP BY g HAVING (g * 1e308 * 10 - g * 1e308 * 10) IS NULL`)
	if !h.keep([]any{int64(1), int64(1)}) {
		t.Errorf("HAVING (Inf - Inf) IS NULL: not kept")
	}
	h = havingFor(t, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) AS n FROM t GROUP BY g HAVING g + 0 > 5`)
	long := strings.Repeat("7", 1<<20)
	t0 := time.Now()
	if !h.keep([]any{long, int64(1)}) {
		t.Errorf("a megabyte of 7s is not > 5")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("HAVING over a key of a megabyte took %v", d)
	}
}

// A subquery in FROM named like its table (FROM (SELECT * FROM t WHERE x >
// 5) AS t), or a chain of CTEs ending in one named like the table, is that
// source: its filter applies. It was dropped (the statement read the whole
// table: its rows, not the ones asked for). Outcome: not a leak (the whole
// table under DP), a silent wrong answer: fixed.
func TestAttack25SourceNamedLikeItsTable(t *testing.T) {
	for _, src := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM (SELECT * FROM t WHERE x > 5) AS t`,
		`WITH a AS (SELECT * FROM t WHERE x > 5), t AS (SELECT pid, x FROM a) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t`,
		`WITH a AS (SELECT * FROM t WHERE x > 5) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM (SELECT * FROM a) AS t`,
	} {
		pl, err := checkerFor(t, src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if !strings.Contains(rowFilter(pl), `"x" > 5`) {
			t.Errorf("%s: the source's filter is dropped: the statement reads rows WHERE %s", src, rowFilter(pl))
		}
	}
	// Reading the table itself beside unused CTEs stays as it was.
	pl, err := checkerFor(t, `WITH a AS (SELECT * FROM t WHERE x > 5) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t`)
	if err != nil || strings.Contains(rowFilter(pl), `"x" > 5`) {
		t.Errorf("an unused CTE: %v, WHERE %s", err, rowFilter(pl))
	}
}

// APPROX_QUANTILES is read off a noisy histogram (negative counts, a total
// near or below 0): whatever the noise, its k+1 values are numbers within
// the bounds and non-decreasing, and PERCENTILE_CONT agrees with it at i/k.
// Outcome: held.
func TestAttack25QuantilesOfNoisyHistograms(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 25))
	for trial := range 3000 {
		h := make([]float64, MedianBuckets)
		scale := []float64{0.1, 1, 10, 1000}[trial%4]
		for b := range h {
			h[b] = r.NormFloat64() * scale
			if r.IntN(10) == 0 {
				h[b] += float64(r.IntN(50))
			}
		}
		lo, hi := -5.0, 7.0
		prev := math.Inf(-1)
		const k = 16
		for i := 0; i <= k; i++ {
			q := quantileOf(h, lo, hi, float64(i)/k)
			if math.IsNaN(q) || q < lo || q > hi || q < prev {
				t.Fatalf("trial %d: quantile %d/%d is %v after %v (bounds %v, %v)", trial, i, k, q, prev, lo, hi)
			}
			prev = q
		}
	}
}

// An engine outside SQLite (dpsql-beam) refuses the aggregates read by a
// query of their own, naming the aggregate (the refusal named only its
// alias: "d is not computed outside SQLite"), and plans the other new forms.
func TestAttack25ExternalRefusalNamesAggregate(t *testing.T) {
	in := StatementInputs{Table: "t", Policy: Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1,
		Bounds: map[string][2]float64{"x": {0, 100}}}, Columns: map[string]string{"pid": "pid", "g": "g", "x": "x"},
		ScopeDelta: 1e-5, KeyForms: map[string]KeyForm{`("x" / 10)`: {"BLOB", "BINARY"}, "g": {"TEXT", "BINARY"}}}
	for _, tc := range []struct{ q, want string }{
		{`COUNT(DISTINCT x) AS d FROM t`, "COUNT(DISTINCT x) (output d) is not computed outside SQLite"},
		{`g, PERCENTILE_CONT(x, 0.3) AS p FROM t GROUP BY g`, "PERCENTILE_CONT(x) (output p)"},
		{`g, APPROX_QUANTILES(x, 3) AS q FROM t GROUP BY g`, "APPROX_QUANTILES(x) (output q)"},
		{`x / 10 AS k, COUNT(DISTINCT pid) AS p, COUNT(*) AS n FROM t GROUP BY k HAVING n > 2`, ""},
	} {
		in.Query = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ` + tc.q
		_, err := NewStatement(in)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.q, err, tc.want)
		}
	}
}

// No computed key raises an error for one row's value (the error would come
// after the charge and say whether the row is there): dates that are not
// dates, integer overflow, division by zero, huge substr and round
// arguments, blobs and invalid UTF-8, the extreme integers and reals.
// Outcome: held (each runs; SQLite gives NULL, a REAL or a clamped
// integer).
func TestAttack25KeysCannotFail(t *testing.T) {
	e, _ := testDB(t, 1e6, Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2}, func(ins func(pid, g, x any)) {
		gs := []any{"", "now", "2020-13-45", "  12abc", "\xff\xfe", []byte{0, 1, 2}, "9e999", nil, "9223372036854775808"}
		xs := []any{1e308, -1e308, math.Inf(1), math.Inf(-1), math.Copysign(0, -1), nil, 2.5, -9.2233720368547758e18}
		pids := []int64{math.MinInt64, math.MaxInt64, -1, 0, 1}
		for i := range 60 {
			ins(pids[i%len(pids)], gs[i%len(gs)], xs[i%len(xs)])
		}
	})
	for _, key := range []string{
		"strftime('%Y-%j %J %s %f', g)", "strftime('%s', x)", "strftime('%', pid)",
		"CAST(x * 1e308 AS INTEGER)", "x * 1e308 * 10", "pid * pid", "pid + pid", "pid - 9223372036854775807 - 2",
		"-pid", "pid / 0", "pid % 0", "pid / -1", "pid % -1", "x % 0.5", "x / 0",
		"substr(g, -9223372036854775807 - 1, 9223372036854775807)", "substr(g, pid, pid)", "substr(g, x, x)",
		"round(x, 9223372036854775807)", "round(x, -300)", "round(pid, pid)", "round(g, x)",
		"unicode(g)", "instr(substr(g, 1, 8), substr(x, 1, 8))", "lower(g)", "upper(g)", "trim(substr(g, 1, 8), substr(g, 2, 4))", "length(g)", "octet_length(g)",
		"CAST(g AS INTEGER)", "CAST(g AS REAL)", "CAST(g AS NUMERIC)", "CAST(g AS BLOB)", "CAST(x AS TEXT)",
		"sign(g)", "min(g, x)", "max(pid, g)", "nullif(g, x)", "iif(g, x, pid)", "coalesce(g, x, pid)",
		"g LIKE '%\xff%'", "CASE g WHEN x THEN pid END", "x BETWEEN g AND pid", "g IN (x, pid, '')",
	} {
		q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ` + key + ` AS k, COUNT(*) AS n, COUNT(DISTINCT g) AS d,
			MEDIAN(x, contribution_bounds_per_group => (0, 10)) AS m FROM t GROUP BY k`
		ctx := context.Background()
		conn, err := e.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := e.plan(ctx, conn, "default", q)
		if err != nil {
			conn.Close()
			t.Errorf("GROUP BY %s: %v", key, err)
			continue
		}
		if _, err := e.readAll(ctx, conn, pl); err != nil {
			t.Errorf("GROUP BY %s: the read failed after acceptance: %v", key, err)
		}
		conn.Close()
	}
}

// Through a CTE that renames a column, HAVING names an aggregate output by
// the CTE's name for it (HAVING SUM(w) > 1 with SUM(w) AS s): it was refused
// as "not an output" (the output's column had been renamed to the table's).
// Outcome: a wrong refusal: fixed.
func TestAttack25HavingAggregateThroughCTE(t *testing.T) {
	pl, err := checkerFor(t, `WITH a AS (SELECT pid, g, x AS w FROM t) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1)
		g, SUM(w) AS s, COUNT(DISTINCT w) AS d FROM a GROUP BY g HAVING SUM(w) > 1 AND COUNT(DISTINCT w) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	if got := dpselect.String(pl.having.cond); !strings.Contains(got, `"s"`) || !strings.Contains(got, `"d"`) {
		t.Errorf("HAVING reads %s, want the outputs s and d", got)
	}
}

// A syntax error inside a CTE is refused naming WITH, not OPTIONS (which
// the statement's OPTIONS did not cause). Outcome: a misleading message:
// fixed.
func TestAttack25CTESyntaxErrorNamesWith(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{`WITH patients AS (SELECT * FROM patients) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients`, "refused: WITH: "},
		{`EXPLAIN WITH a AS (SELECT * FROM t LIMIT 1) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM a`, "refused: WITH: "},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = = 1) COUNT(*) AS n FROM t`, "refused: OPTIONS: "},
		{`WITH a AS (SELECT * FROM t) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = = 1) COUNT(*) AS n FROM a`, "refused: OPTIONS: "},
	} {
		_, err := dpselect.Parse(tc.q)
		if err == nil {
			t.Fatalf("%s parsed", tc.q)
		}
		if got := syntaxRefusal(tc.q, err).Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %s, want it to start %q", tc.q, got, tc.want)
		}
	}
}

// A join's public key column under NOCASE: the heavy person's rows join to
// 'NORTH', everyone else's to 'north'; the released key is the canonical
// 'north' (lower()) with or without them, never the spelling of the row
// SQLite happened to keep. Outcome: held.
func TestAttack25JoinPublicKeySpelling(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}}
	e0, e1 := neighbours25(t, p, `CREATE TABLE regions (g TEXT, region TEXT COLLATE NOCASE)`,
		`INSERT INTO regions VALUES ('c', 'NORTH'), ('d', 'NoRtH'), ('a', 'north'), ('b', 'north'), ('1', 'north')`)
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) region, COUNT(*) AS n FROM t JOIN regions USING (g) GROUP BY region`
	for _, e := range []*Engine{e0, e1} {
		for range 5 {
			_, gs := exact(t, e, q)
			if len(gs) != 1 || gs[0].keys[0] != "north" {
				t.Fatalf("GROUP BY a NOCASE public column: groups %v, want one keyed 'north'", gs)
			}
		}
	}
}
