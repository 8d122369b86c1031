package protect

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Reusing statistics spends no privacy twice: a statement releasing keys,
// COUNT(*) twice, SUM and AVG of one column charges the same two parts as
// one releasing AVG alone (the selection's count of persons and the centred
// sum; on a STRICT NOT NULL column AVG's count is the selection's), each
// certified at the requested (epsilon, delta), and its ledger row says
// which outputs read which part. Both COUNT(*)s are one draw, and SUM and
// AVG agree with it (SUM = AVG * COUNT up to COUNT's rounding).
func TestReuseSpendsOnce(t *testing.T) {
	e, db := testDB(t, 1000, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {})
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE v (pid INTEGER, g TEXT, x REAL NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := db.Exec(`INSERT INTO v VALUES (?, ?, ?)`, i, []string{"a", "b"}[i%2], float64(i%100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Protect(ctx, db, "v", Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"x": {0, 100}}}); err != nil {
		t.Fatal(err)
	}
	charged := func() (mechanism.Mechanism, StatementDetails) {
		var params string
		if err := db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&params); err != nil {
			t.Fatal(err)
		}
		var m mechanism.Mechanism
		var d StatementDetails
		if err := json.Unmarshal([]byte(params), &m); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(params), &d); err != nil {
			t.Fatal(err)
		}
		return m, d
	}
	for _, q := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5) g, AVG(x) AS a FROM v GROUP BY g`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5) g, COUNT(*) AS n, COUNT(*) AS n2, SUM(x) AS s, AVG(x) AS a, COUNT(x) AS nx FROM v GROUP BY g`,
	} {
		res, err := e.Query(ctx, "default", q)
		if err != nil {
			t.Fatal(err)
		}
		m, d := charged()
		if m.Kind != mechanism.KindComposite || len(m.Parts) != 2 || m.Parts[0].Kind != mechanism.KindLaplaceInf || m.Parts[1].Kind != mechanism.KindLaplace {
			t.Fatalf("%s: charged %+v, want the selection and one sum", q, m)
		}
		got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, 1e-5)
		if err != nil || got > 1 || got < 0.99 {
			t.Errorf("%s: certified epsilon %v (%v), want at most and within 1%% of 1", q, got, err)
		}
		if len(d.Parts) != 2 || d.Parts[0].Part != "selection" || d.Parts[1].Part != "sum" || d.Parts[1].Centre != 50 {
			t.Fatalf("%s: details %+v", q, d.Parts)
		}
		if !strings.Contains(q, "n2") {
			continue
		}
		if sel := d.Parts[0].Outputs; !slices.Equal(sel, []string{"n", "n2", "a", "nx", "s"}) {
			t.Errorf("the selection's count is read by %v, want n, n2, a, nx, s", sel)
		}
		if sum := d.Parts[1].Outputs; !slices.Equal(sum, []string{"a", "s"}) {
			t.Errorf("the centred sum is read by %v, want a, s", sum)
		}
		for _, r := range res.Rows {
			n, n2, s, a, nx := r[1].(int64), r[2].(int64), r[3].(float64), r[4].(float64), r[5].(int64)
			if n != n2 || n != nx {
				t.Errorf("COUNT(*) %d, %d and COUNT(x) %d: one draw, want equal", n, n2, nx)
			}
			if math.Abs(s/float64(n)-a) > 100.0/float64(n) {
				t.Errorf("SUM %v / COUNT %d = %v, AVG %v: one sum and one count", s, n, s/float64(n), a)
			}
		}
	}
}

// Reusing the selection's count hides nothing: the released COUNT is the
// very draw that decided the release, with the selection's Laplace law and
// no less noise (variance 2 b^2 + 1/12, kurtosis about 6), and a released
// group's COUNT is never below the threshold's floor. And the empirical
// privacy loss of the released COUNT between neighbours (a group of 25
// persons or 26, at the threshold's edge, 10^5 releases each) stays within
// the charged epsilon: every outcome's frequency ratio (not released, or
// each count) is within e^epsilon up to sampling error.
func TestReuseHidesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("2 x 10^5 releases")
	}
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-3) g, COUNT(*) AS n FROM t GROUP BY g`
	mk := func(edge int) (*plan, []group) {
		e, _ := testDB(t, 1000, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
			for i := range 5000 {
				ins(i, "big", 1.0)
			}
			for i := range edge {
				ins(10000+i, "edge", 1.0)
			}
		})
		return exact(t, e, q)
	}
	pl, gs := mk(25)
	sel := pl.values[pl.selectionValue()]
	if len(pl.values) != 1 || sel.Law != "laplace" {
		t.Fatalf("values %+v", pl.values)
	}
	b := sel.Lap.Scale
	noise := release.NewNoise()
	const reps = 100000
	var m2, m4 float64
	outcomes := func(pl *plan, gs []group) map[int64]float64 {
		h := map[int64]float64{}
		for range reps {
			res := releaseRows(pl, gs, noise)
			edge := int64(-1) // not released
			for _, r := range res.Rows {
				n := r[1].(int64)
				switch r[0] {
				case "big":
					z := float64(n) - 5000
					m2 += z * z
					m4 += z * z * z * z
				case "edge":
					edge = n
					if float64(n) < math.Floor(pl.tau) {
						t.Fatalf("released COUNT %d below the threshold %v", n, pl.tau)
					}
				}
			}
			h[edge]++
		}
		return h
	}
	h0 := outcomes(pl, gs)
	m2 /= reps
	m4 /= reps
	if want := 2*b*b + 1.0/12; math.Abs(m2/want-1) > 0.03 {
		t.Errorf("COUNT's variance %.3f, the selection's law gives %.3f", m2, want)
	}
	if k := m4 / (m2 * m2); k < 5.3 || k > 6.7 {
		t.Errorf("COUNT's kurtosis %.2f, want about 6 (Laplace)", k)
	}
	pl1, gs1 := mk(26)
	h1 := outcomes(pl1, gs1)
	eps := sel.Epsilon
	worst := 0.0
	for o, c0 := range h0 {
		c1 := h1[o]
		if c0 < 2000 || c1 < 2000 {
			continue
		}
		// log ratio's standard error about sqrt(1/c0 + 1/c1)
		l := math.Abs(math.Log(c1 / c0))
		se := math.Sqrt(1/c0 + 1/c1)
		if l > eps+4*se {
			t.Errorf("outcome %d: frequencies %v and %v, log ratio %.3f beyond epsilon %.3f + 4 se", o, c0, c1, l, eps)
		}
		worst = math.Max(worst, l)
	}
	t.Logf("largest empirical log ratio %.3f, charged epsilon of the count %.3f, threshold %.2f", worst, eps, pl.tau)
}

// OPTIONS confidence: alias_lo and alias_hi follow each aggregate, ORDER BY
// may name them, COUNT's bounds are integers around it; an aggregate
// without an alias, or an alias whose _lo or _hi names another output, is
// refused before anything is read or charged.
func TestConfidenceColumns(t *testing.T) {
	e, db := testDB(t, 100, Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"x": {0, 10}}}, func(ins func(pid, g, x any)) {
		for i := range 3000 {
			ins(i, []string{"a", "b", "c"}[i%3], float64(i%3)*3)
		}
	})
	ctx := context.Background()
	res, err := e.Query(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, confidence = 0.9)
		g, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY g ORDER BY m_hi DESC`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"g", "n", "n_lo", "n_hi", "m", "m_lo", "m_hi"}; !slices.Equal(res.Columns, want) {
		t.Fatalf("columns %v, want %v", res.Columns, want)
	}
	if len(res.Rows) != 3 || res.Rows[0][0] != "c" || res.Rows[2][0] != "a" {
		t.Errorf("ORDER BY m_hi DESC: %v", res.Rows)
	}
	for _, r := range res.Rows {
		n, lo, hi := r[1].(int64), r[2].(int64), r[3].(int64)
		if !(lo <= n && n <= hi && hi-lo < 30) {
			t.Errorf("COUNT %d, interval [%d, %d]", n, lo, hi)
		}
		m, mlo, mhi := r[4].(float64), r[5].(float64), r[6].(float64)
		if !(mlo <= m && m <= mhi && mhi-mlo < 1) {
			t.Errorf("AVG %v, interval [%v, %v]", m, mlo, mhi)
		}
	}
	before := chargeRows(t, db)
	for _, tc := range []struct{ q, want string }{
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.95) g, COUNT(*) FROM t GROUP BY g`, "every aggregate needs an alias"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.95) g, COUNT(*) AS n, SUM(x) AS n_lo FROM t GROUP BY g`, "released as n_lo, which another output"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.95) g AS x_hi, COUNT(*) AS x FROM t GROUP BY g`, "released as x_hi"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 1) COUNT(*) AS n FROM t`, "confidence must lie in [0.5, 1)"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t ORDER BY n_lo`, "ORDER BY n_lo"},
	} {
		if _, err := e.Query(ctx, "default", tc.q); !IsRefusal(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal containing %q", tc.q, err, tc.want)
		}
	}
	if n := chargeRows(t, db); n != before {
		t.Errorf("refusals charged %d rows", n-before)
	}
}

func chargeRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
