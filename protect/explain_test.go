package protect

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/calibrate"
)

// EXPLAIN reads nothing and charges nothing, and states what Query does: the
// statement's law and budget, the selection's threshold (the plan's tau),
// each value's scale, and each COUNT's and SUM's std and half-width, which
// are those of the plan's noise.
func TestExplain(t *testing.T) {
	e, db := testDB(t, 10, Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"x": {0, 100}}}, func(ins func(pid, g, x any)) {
		for i := range 500 {
			ins(i, []string{"a", "b"}[i%2], float64(i%100))
		}
	})
	ctx := context.Background()
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5) g, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a, MEDIAN(x) AS m FROM t GROUP BY g`
	before := chargeRows(t, db)
	res, err := e.Explain(ctx, "default", q)
	if err != nil {
		t.Fatal(err)
	}
	if n := chargeRows(t, db); n != before {
		t.Fatalf("EXPLAIN charged %d rows", n-before)
	}
	pl, _ := exact(t, e, q)
	col := map[string]int{}
	for i, c := range res.Columns {
		col[c] = i
	}
	got := map[string][]any{}
	for _, r := range res.Rows {
		got[r[0].(string)+":"+r[1].(string)] = r
	}
	st := got["statement:"]
	if st == nil || st[col["noise"]] != string(pl.cal.Law) || !strings.Contains(st[col["detail"]].(string), "noise = 'auto' chose") {
		t.Errorf("statement row %v", st)
	}
	sel := got["selection:count of persons"]
	if sel == nil || sel[col["threshold"]] != pl.tau {
		t.Errorf("selection row %v, want threshold %v", sel, pl.tau)
	}
	for _, out := range []string{"n", "s"} {
		r := got["aggregate:"+out]
		if r == nil {
			t.Fatalf("no row for %s: %v", out, res.Rows)
		}
		sd := statedSD(pl, out)
		if math.Abs(r[col["std"]].(float64)-sd) > 1e-9*sd || !(r[col["half_width"]].(float64) > 1.9*sd) || r[col["confidence"]] != 0.95 {
			t.Errorf("%s: %v, want std %v", out, r, sd)
		}
	}
	for _, out := range []string{"a", "m"} {
		if r := got["aggregate:"+out]; r == nil || !strings.Contains(r[col["detail"]].(string), "n") {
			t.Errorf("%s: %v", out, r)
		}
	}
	nValues := 0
	for _, r := range res.Rows {
		if r[0] == "value" || r[0] == "selection" {
			nValues++
			if r[col["noise"]] != string(calibrate.Laplace) && r[col["noise"]] != string(calibrate.Gaussian) {
				t.Errorf("value row %v", r)
			}
		}
	}
	if nValues != len(pl.values) {
		t.Errorf("%d value rows, the plan draws %d values", nValues, len(pl.values))
	}
	// A refused statement is refused by EXPLAIN too, with the same message.
	_, err = e.Explain(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, SUM(y) FROM t GROUP BY g`)
	if !IsRefusal(err) {
		t.Errorf("EXPLAIN of a bad statement: %v", err)
	}
}

// EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY through Query (what an analyst
// connection and the service run) answers the plan and charges nothing.
func TestExplainThroughQuery(t *testing.T) {
	e, db := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range 100 {
			ins(i, "a", 1.0)
		}
	})
	before := chargeRows(t, db)
	res, err := e.Query(context.Background(), "default", `EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) g, COUNT(*) AS n FROM t GROUP BY g`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Columns) != len(ExplainColumns) || res.Columns[0] != "part" || len(res.Rows) != 3 || res.Receipt.ID != 0 {
		t.Errorf("EXPLAIN through Query: %v %v receipt %+v", res.Columns, res.Rows, res.Receipt)
	}
	if n := chargeRows(t, db); n != before {
		t.Errorf("EXPLAIN charged %d rows", n-before)
	}
}
