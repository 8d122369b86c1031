package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/release"
)

// testDB creates a file with a ledger (scope "default", mu, delta 1e-5), a
// table t(pid, g, x) filled by rows, protected by p; it returns the engine.
func testDB(t testing.TB, mu float64, p Policy, rows func(ins func(pid any, g any, x any))) (*Engine, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	b, err := accountant.NewBudget("default", mu, 0, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Init(ctx, db, b); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (pid INTEGER, g TEXT, x REAL)`); err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin()
	st, _ := tx.Prepare(`INSERT INTO t VALUES (?, ?, ?)`)
	rows(func(pid, g, x any) {
		if _, err := st.Exec(pid, g, x); err != nil {
			t.Fatal(err)
		}
	})
	st.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := Protect(ctx, db, "t", p); err != nil {
		t.Fatal(err)
	}
	e, err := EngineFor(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Release() })
	return e, db
}

// exact plans q and returns the plan and the bounded exact groups.
func exact(t testing.TB, e *Engine, q string) (*plan, []group) {
	t.Helper()
	ctx := context.Background()
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pl, err := e.plan(ctx, conn, "default", q)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := e.readAll(ctx, conn, pl)
	if err != nil {
		t.Fatal(err)
	}
	return pl, gs
}

// A group held by one person never appears in 1,000 releases (each appears
// with probability at most delta_s = 1e-7), while a group of 200 persons
// always does: partition selection, not the raw GROUP BY of curator mode,
// decides which keys come out.
func TestOnePersonGroupAbsent(t *testing.T) {
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range 200 {
			ins(i, "common", 1.0)
		}
		ins(1000, "rare-diagnosis", 1.0)
	})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) FROM t GROUP BY g`)
	if len(gs) != 2 {
		t.Fatalf("exact groups: %d, want 2 (the raw GROUP BY sees the rare key)", len(gs))
	}
	noise := release.NewNoise()
	common := 0
	for range 1000 {
		res := releaseRows(pl, gs, noise)
		for _, r := range res.Rows {
			switch r[0] {
			case "rare-diagnosis":
				t.Fatalf("the one-person group was released: %v", res.Rows)
			case "common":
				common++
			}
		}
	}
	if common != 1000 {
		t.Errorf("the 200-person group appeared %d times out of 1000", common)
	}
	// The threshold is the documented one: a one-person group's rounded
	// noise must reach (tau - 1)/g, which it does with probability at most
	// P(Z >= (tau - 1 - g/2)/sigma).
	z := normalQuantileUpper(pl.deltaS / float64(pl.maxGroups))
	s := pl.values[pl.selectionValue()]
	if want := 1 + s.Grid()/2 + s.Sigma*z; pl.tau != want || math.Abs(pl.deltaS-SelectionDeltaShare*1e-5) > 1e-20 {
		t.Errorf("tau %v delta_s %v, want %v and %v", pl.tau, pl.deltaS, want, SelectionDeltaShare*1e-5)
	}
	if p := 0.5 * math.Erfc(z/math.Sqrt2); p > pl.deltaS {
		t.Errorf("P(N > z) = %g > delta_s %g", p, pl.deltaS)
	}
}

// A person with many rows in many groups contributes at most max_rows rows
// to at most max_groups groups, and their values are clamped to the bounds.
func TestManyRowsPersonBounded(t *testing.T) {
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid", MaxGroups: 3, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 10}}},
		func(ins func(pid, g, x any)) {
			for g := range 20 {
				for range 50 {
					ins(7, fmt.Sprintf("g%02d", g), 1e9) // one person, 20 groups, 50 huge rows each
				}
			}
			ins(8, "h", math.Inf(1))
			ins(8, "h", "not a number") // dropped from SUM, counted by COUNT(*)
			ins(nil, "g00", 5.0)        // no privacy unit: dropped
		})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, max_groups_contributed = 3) g, COUNT(*), SUM(x) FROM t GROUP BY g`)
	var rows, persons int64
	var sum float64
	for _, g := range gs {
		if g.keys[0] == "h" {
			// person 8's two rows: inf clamped to 10, text dropped from SUM
			if g.persons != 1 || g.vals[0] != 2 || float64(g.vals[1])*pl.aggs[1].quant != 10 {
				t.Errorf("person 8: %+v, want 1 person, 2 rows, sum 10", g)
			}
			continue
		}
		rows += g.vals[0]
		sum += float64(g.vals[1]) * pl.aggs[1].quant
		persons += g.persons
	}
	if persons > 3 || rows != persons*2 || sum != float64(rows)*10 {
		t.Errorf("person 7 reached %d groups, %d rows, sum %v; want at most 3 groups, 2 rows each, each value clamped to 10 (exact groups %+v)", persons, rows, sum, gs)
	}
	// The sensitivities the noise is calibrated to cover this contribution.
	if s := pl.values[pl.aggs[0].val].Sensitivity; s != 2*math.Sqrt(3) {
		t.Errorf("COUNT sensitivity %v, want 2 sqrt(3)", s)
	}
	if s := pl.values[pl.aggs[1].val].Sensitivity; s < 2*math.Sqrt(3)*10 {
		t.Errorf("SUM sensitivity %v below 2 sqrt(3) 10", s)
	}
}

// Noisy counts and means on 10^5 rows are within their stated noise: the
// standardised errors of 400 releases have mean about 0 and variance about 1.
func TestAccuracyStatistical(t *testing.T) {
	const n = 100000
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range n {
			ins(i, []string{"a", "b", "c", "d"}[i%4], float64(i%100)) // x uniform on 0..99
		}
	})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) g, COUNT(*) AS n, AVG(x, contribution_bounds_per_group => (0, 100)) AS m FROM t GROUP BY g`)
	noise := release.NewNoise()
	var zc, zc2, zm, zm2 float64
	var k int
	for range 100 {
		res := releaseRows(pl, gs, noise)
		if len(res.Rows) != 4 {
			t.Fatalf("released %d groups, want 4", len(res.Rows))
		}
		for _, r := range res.Rows {
			z := (float64(r[1].(int64)) - n/4) / pl.values[pl.aggs[0].val].Sigma
			zc += z
			zc2 += z * z
			// AVG: group a holds x = 0, 4, ..., 96 (mean 48), b 49, c 50,
			// d 51; the error is about noise_sum/count.
			truth := 48 + float64(r[0].(string)[0]-'a')
			zmv := (r[2].(float64) - truth) / (pl.values[pl.aggs[1].val].Sigma / (n / 4))
			zm += zmv
			zm2 += zmv * zmv
			k++
		}
	}
	for name, m := range map[string][2]float64{"count": {zc, zc2}, "mean": {zm, zm2}} {
		mean, v := m[0]/float64(k), m[1]/float64(k)
		if math.Abs(mean) > 5/math.Sqrt(float64(k)) || math.Abs(v-1) > 5*math.Sqrt(2/float64(k)) {
			t.Errorf("%s: standardised error mean %.3f variance %.3f over %d, want about 0 and 1", name, mean, v, k)
		}
	}
}

// With max_groups = max_rows = 1 (the one-row rewrite), a person with 1,000
// rows in 20 groups still counts once, in one group, with one clamped value.
func TestOneRowPerPersonBounded(t *testing.T) {
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"x": {-5, 5}}}, func(ins func(pid, g, x any)) {
		for i := range 1000 {
			ins(7, fmt.Sprintf("g%02d", i%20), -1e9)
		}
		ins(9, "g00", nil) // COUNT(x) and AVG drop NULL
	})
	for _, q := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*), SUM(x), COUNT(x), AVG(x) FROM t GROUP BY g`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*), SUM(x), COUNT(x), AVG(x) FROM t`,
	} {
		pl, gs := exact(t, e, q)
		var rows, persons, nonNull, avgCount int64
		var sum float64
		for _, g := range gs {
			persons += g.persons
			rows += g.vals[0]
			sum += float64(g.vals[1]) * pl.aggs[1].quant
			nonNull += g.vals[2]
			avgCount += g.counts[3]
		}
		if persons != 2 || rows != 2 || sum != -5 || nonNull != 1 || avgCount != 1 {
			t.Errorf("%s\n persons %d rows %d sum %v non-null %d avg count %d; want 2, 2, -5, 1, 1", q, persons, rows, sum, nonNull, avgCount)
		}
	}
}

// The second line of defence: if the checker let through a function or a
// column read it should not have, the authorizer the rewritten SQL is
// prepared under refuses it.
func TestExecutionAuthorizer(t *testing.T) {
	e, db := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) { ins(1, "a", 1.0) })
	if _, err := db.Exec(`CREATE TABLE other (secret)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ where, want string }{
		{`abs("pid") > 0`, `"abs"`},
		{`json_extract("g", '$') = 1`, `"json_extract"`},
		{`"x" IN (SELECT "secret" FROM other)`, `"other"`},
		{`load_extension('x') IS NULL`, `"load_extension"`},
	} {
		conn, err := e.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := e.plan(ctx, conn, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		pl.where = tc.where // as if the checker had missed it
		_, err = e.read(ctx, conn, pl)
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "did not approve") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WHERE %s: %v", tc.where, err)
		}
	}
	// An unapproved column of the protected table is refused too.
	conn, _ := e.db.Conn(ctx)
	defer conn.Close()
	pl, _ := e.plan(ctx, conn, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`)
	pl.where = `"x" > 0`
	delete(pl.reads, "x")
	if _, err := e.read(ctx, conn, pl); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("unapproved column: %v", err)
	}
}

// A GROUP BY on columns with public key tables releases every listed key,
// held or not, never an unlisted one, with no partition selection.
func TestPublicKeys(t *testing.T) {
	e, db := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range 300 {
			ins(i, []string{"a", "b"}[i%2], 1.0)
		}
		ins(1000, "zz-unlisted", 1.0)
	})
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE g_values (v TEXT); INSERT INTO g_values VALUES ('a'), ('b'), ('c'), (NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := Protect(ctx, db, "t", Policy{PrivacyUnit: "pid", PublicKeys: map[string]string{"g": "g_values.v"}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Query(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) AS n FROM t GROUP BY g ORDER BY g`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 || res.Rows[0][0] != "a" || res.Rows[1][0] != "b" || res.Rows[2][0] != "c" {
		t.Fatalf("rows %v, want a, b, c", res.Rows)
	}
	if n := res.Rows[0][1].(int64); math.Abs(float64(n)-150) > 10 {
		t.Errorf("count of a: %d, want about 150 (sigma 1)", n)
	}
	if res.Receipt.Params["mechanism"] != "gaussian" {
		t.Errorf("mechanism %v, want gaussian (no selection)", res.Receipt.Params["mechanism"])
	}
	// Key tables must exist, and cannot be the protected table.
	for _, bad := range []map[string]string{{"g": "nope"}, {"g": "t.g"}, {"g": "g_values.w"}, {"nope": "g_values"}} {
		if err := Protect(ctx, db, "t", Policy{PrivacyUnit: "pid", PublicKeys: bad}); err == nil {
			t.Errorf("public keys %v accepted", bad)
		}
	}
}

// VAR_POP and STDDEV_POP on 10^5 rows are within their stated noise.
func TestVarianceStatistical(t *testing.T) {
	const n = 100000
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range n {
			ins(i, []string{"a", "b", "c", "d"}[i%4], float64(i%100))
		}
	})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) g, VAR_POP(x, contribution_bounds_per_group => (0, 100)) AS v, STDDEV_POP(x, contribution_bounds_per_group => (0, 100)) AS s FROM t GROUP BY g`)
	// Group a holds x = 0, 4, ..., 96 (25 values, 1000 times each): variance
	// 16 (25^2 - 1)/12 = 832, whatever the shift of b, c, d.
	const truth, m = 832.0, n / 4
	a := pl.aggs[0]
	ey2 := truth + 4 // E[(x - 50)^2] for group a; b, c, d differ by under 5
	sd := math.Hypot(pl.values[a.sq].Sigma/m, ey2*pl.values[a.cnt].Sigma/m)
	noise := release.NewNoise()
	var z, z2 float64
	var k int
	for range 100 {
		res := releaseRows(pl, gs, noise)
		for _, r := range res.Rows {
			v, s := r[1].(float64), r[2].(float64)
			zv := (v - truth) / sd
			z += zv
			z2 += zv * zv
			k++
			if math.Abs(s-math.Sqrt(truth)) > 0.5 {
				t.Errorf("stddev %v, want about %v", s, math.Sqrt(truth))
			}
		}
	}
	mean, v := z/float64(k), z2/float64(k)
	if math.Abs(mean) > 5/math.Sqrt(float64(k)) || v > 1.5 || v < 0.6 {
		t.Errorf("variance: standardised error mean %.3f variance %.3f over %d, want about 0 and at most 1", mean, v, k)
	}
}

// The exact figures of VAR_POP on the window rewrite (max_rows 2): one
// person's values 0 and 10 in bounds (0, 10) are -5 and 5 centred, squares
// 25 each, which centred on 12.5 sum to 25.
func TestVarianceExactFigures(t *testing.T) {
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2}, func(ins func(pid, g, x any)) {
		ins(1, "g", 0.0)
		ins(1, "g", 10.0)
	})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) VAR_POP(x, contribution_bounds_per_group => (0, 10)) FROM t`)
	if len(gs) != 1 {
		t.Fatalf("groups %+v", gs)
	}
	a, g := pl.aggs[0], gs[0]
	if float64(g.vals[0])*a.quant != 0 || g.counts[0] != 2 || float64(g.sqs[0])*a.sqQuant != 25 || a.sqMid != 12.5 {
		t.Errorf("exact figures %+v (quantum %v, squares quantum %v)", g, a.quant, a.sqQuant)
	}
	if s := pl.values[a.sq].Sensitivity; s < 2*12.5 {
		t.Errorf("squares sensitivity %v below max_rows * c^2/2 = 25", s)
	}
}
