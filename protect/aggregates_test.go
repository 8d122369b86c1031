package protect

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/dpsql/dpsql/release"
)

// COUNT(DISTINCT unit) is the count of persons: with GROUP BY it reads the
// selection's noisy count (one value drawn, one charged); COUNT(DISTINCT
// col) counts a group's distinct values after per-person bounding, so a
// person holding 500 distinct values adds at most max_rows of them, in at
// most max_groups groups.
func TestDistinctCounts(t *testing.T) {
	e, _ := testDB(t, 1000, Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 2}, func(ins func(pid, g, x any)) {
		for i := range 100 {
			ins(i, "a", 1.0) // 100 persons, one value
			ins(i, "a", 1.0)
			ins(100+i, "b", float64(i%7)) // 100 persons, 7 values
		}
		for i := range 500 {
			ins(999, "a", 1000.0+float64(i)) // one person, 500 distinct values
			ins(999, "b", 5000.0+float64(i))
		}
		ins(998, "a", nil) // NULL is not a value
	})
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(DISTINCT pid) AS persons, COUNT(DISTINCT x) AS xs,
		COUNT(*) AS n FROM t GROUP BY g`
	for range 20 {
		pl, gs := exact(t, e, q)
		if len(gs) != 2 {
			t.Fatalf("groups %v", gs)
		}
		// The selection, COUNT(DISTINCT pid) reading it, COUNT(DISTINCT x), COUNT(*): three values.
		if len(pl.values) != 3 || pl.aggs[0].val != pl.selectionValue() {
			t.Fatalf("values %+v; COUNT(DISTINCT pid) reads value %d", pl.values, pl.aggs[0].val)
		}
		if v := pl.values[pl.aggs[1].val]; v.Rows != 2 || v.Bound != 1 {
			t.Errorf("COUNT(DISTINCT x): rows %d bound %v, want max_rows = 2 and 1", v.Rows, v.Bound)
		}
		heavy := 0
		for _, g := range gs {
			persons, xs := g.persons, g.vals[1]
			switch g.keys[0] {
			case "a":
				if persons != 101 && persons != 102 || xs < 1 || xs > 3 {
					t.Fatalf("group a: %d persons, %d distinct values (want 101 or 102 and 1 to 3)", persons, xs)
				}
				heavy += int(persons - 101)
			case "b":
				if persons != 100 && persons != 101 || xs < 7 || xs > 9 {
					t.Fatalf("group b: %d persons, %d distinct values (want 100 or 101 and 7 to 9)", persons, xs)
				}
				heavy += int(persons - 100)
			}
		}
		if heavy != 1 {
			t.Fatalf("the heavy person is in %d groups, want max_groups = 1", heavy)
		}
	}
	// Without GROUP BY, and each row a person: COUNT(DISTINCT pid) is a
	// value of its own of sensitivity 1, COUNT(DISTINCT x) one of max_rows.
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(DISTINCT pid), COUNT(DISTINCT x) FROM t`)
	if len(pl.values) != 2 || pl.values[0].Rows != 1 || pl.values[1].Rows != 2 {
		t.Fatalf("values %+v", pl.values)
	}
	if len(gs) != 1 || gs[0].persons != 202 || gs[0].vals[1] != 7+1+2 && gs[0].vals[1] != 7+1+1 {
		t.Errorf("no GROUP BY: %+v", gs)
	}
	// And through the engine: the released columns.
	res, err := e.Query(context.Background(), "default", q+` ORDER BY g`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || strings.Join(res.Columns, ",") != "g,persons,xs,n" {
		t.Fatalf("%v %v", res.Columns, res.Rows)
	}
	if d := res.Rows[1][2].(int64); d < 0 || d > 30 {
		t.Errorf("COUNT(DISTINCT x) of group b released %d, want about 8", d)
	}
}

// PERCENTILE_CONT and APPROX_QUANTILES read the histogram MEDIAN reads: one
// histogram drawn for all of them; each quantile within about a bucket of
// the data's; APPROX_QUANTILES gives k+1 non-decreasing values as JSON.
func TestQuantilesStatistical(t *testing.T) {
	const n = 10000
	e, _ := testDB(t, 1000, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range n {
			ins(i, "a", float64(i%1000)/10) // uniform on [0, 100)
		}
	})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) MEDIAN(x, contribution_bounds_per_group => (0, 100)) AS m,
		PERCENTILE_CONT(x, 0.9, contribution_bounds_per_row => (0, 100)) AS p90,
		PERCENTILE_CONT(x, 0, contribution_bounds_per_row => (0, 100)) AS p0, APPROX_QUANTILES(x, 4, contribution_bounds_per_row => (0, 100)) AS q FROM t`)
	if len(pl.values) != 1 || pl.values[0].Dim != MedianBuckets {
		t.Fatalf("values %+v, want one histogram", pl.values)
	}
	w := 100.0 / MedianBuckets
	noise := release.NewNoise()
	for range 200 {
		res := releaseRows(pl, gs, noise)
		r := res.Rows[0]
		for _, c := range []struct {
			got, want float64
		}{{r[0].(float64), 49.95}, {r[1].(float64), 89.91}, {r[2].(float64), 0}} {
			if math.Abs(c.got-c.want) > 2*w {
				t.Fatalf("quantile %v, want %v within two buckets (%v): %v", c.got, c.want, 2*w, r)
			}
		}
		var qs []float64
		if err := json.Unmarshal([]byte(r[3].(string)), &qs); err != nil || len(qs) != 5 {
			t.Fatalf("APPROX_QUANTILES %q: %v", r[3], err)
		}
		if !sort.Float64sAreSorted(qs) {
			t.Fatalf("quantiles not sorted: %v", qs)
		}
		for i, want := range []float64{0, 24.975, 49.95, 74.925, 99.9} {
			if math.Abs(qs[i]-want) > 2*w {
				t.Fatalf("APPROX_QUANTILES %v, want about %v at %d", qs, want, i)
			}
		}
	}
}

// quantileRange holds the data's PERCENTILE_CONT(p) whenever every noisy
// bucket is within h of the data's: random histograms, noise within h,
// every p.
func TestQuantileRangeHoldsTruth(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 25))
	const nb, lo, hi = 16, 0.0, 16.0
	for trial := range 3000 {
		var vals []float64
		hist := make([]float64, nb)
		nv := 1 + trial%40
		for range nv {
			b := int(math.Abs(rng.NormFloat64()*4)) % nb
			if trial%3 == 0 {
				b = trial % nb
			}
			vals = append(vals, float64(b)+0.5)
			hist[b]++
		}
		sort.Float64s(vals)
		const h = 1.5
		noisy := make([]float64, nb)
		for b := range noisy {
			noisy[b] = hist[b] + math.Max(-h, math.Min(h, rng.NormFloat64()))
		}
		for _, p := range []float64{0, 0.1, 0.25, 0.5, 0.9, 1} {
			r := p * float64(nv-1)
			f, c := math.Floor(r), math.Ceil(r)
			truth := vals[int(f)] + (r-f)*(vals[int(c)]-vals[int(f)])
			l, u := quantileRange(noisy, h, lo, hi, p)
			if truth < l || truth > u {
				t.Fatalf("p %v: the data's quantile %v outside [%v, %v] (hist %v, noisy %v)", p, truth, l, u, hist, noisy)
			}
		}
	}
}

// The released PERCENTILE_CONT on neighbouring tables (with and without a
// person whose value is the maximum, or the median's) is within the charged
// mu-GDP: for every event made of outcome bins ordered by their likelihood
// ratio, P1(E) <= Phi(Phi^-1(P0(E)) + mu) up to sampling error, both ways.
// With the histogram's noise a twentieth of its calibration the same audit
// finds the violation (the test has the power to fail).
func TestPercentileNeighboursAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("4 x 4 x 10^4 releases")
	}
	cryptotest.SetGlobalRandom(t, 2525)
	mk := func(extra bool) (*Engine, func(q string) (*plan, []group)) {
		e, _ := testDB(t, 1000, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
			for i := range 10 {
				ins(i, "a", 10.0)
				ins(100+i, "a", 90.0)
			}
			if extra {
				ins(999, "a", 99.0)
			}
		})
		return e, func(q string) (*plan, []group) { return exact(t, e, q) }
	}
	_, q0 := mk(false)
	_, q1 := mk(true)
	const reps = 40000
	for _, c := range []struct {
		name   string
		p      string
		shrink float64
		fail   bool
	}{{"max", "1", 1, false}, {"median", "0.5", 1, false}, {"p90", "0.9", 1, false}, {"median_weak_noise", "0.5", 20, true}} {
		q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) PERCENTILE_CONT(x, ` + c.p + `,
			contribution_bounds_per_row => (0, 100)) FROM t`
		pl0, g0 := q0(q)
		pl1, g1 := q1(q)
		mu := pl0.cal.Mu
		for _, pl := range []*plan{pl0, pl1} {
			pl.values[0].Sigma /= c.shrink
		}
		noise := release.NewNoise()
		bins := func(pl *plan, gs []group) map[int]float64 {
			h := map[int]float64{}
			for range reps {
				v := releaseRows(pl, gs, noise).Rows[0][0].(float64)
				h[int(math.Floor(v/(100.0/MedianBuckets/4)))]++
			}
			return h
		}
		h0, h1 := bins(pl0, g0), bins(pl1, g1)
		worst := gdpAudit(h0, h1, reps, mu)
		if w := gdpAudit(h1, h0, reps, mu); w > worst {
			worst = w
		}
		t.Logf("%s: largest excess over the mu = %v trade-off curve, in standard errors: %.2f", c.name, mu, worst)
		if c.fail != (worst > 4) {
			t.Errorf("%s: excess %.2f standard errors (a violation is > 4; want violation %v)", c.name, worst, c.fail)
		}
	}
}

// gdpAudit returns the largest excess, in standard errors, of P1(E) over
// Phi(Phi^-1(P0(E)) + mu) among the events E made of the outcomes with the
// highest empirical ratio h1/h0 (the most powerful tests).
func gdpAudit(h0, h1 map[int]float64, reps int, mu float64) float64 {
	type bin struct {
		k      int
		p0, p1 float64
	}
	var bs []bin
	for k := range union(h0, h1) {
		bs = append(bs, bin{k, h0[k] / float64(reps), h1[k] / float64(reps)})
	}
	sort.Slice(bs, func(i, j int) bool {
		ri, rj := (bs[i].p1+1e-9)/(bs[i].p0+1e-9), (bs[j].p1+1e-9)/(bs[j].p0+1e-9)
		if ri != rj {
			return ri > rj
		}
		return bs[i].k < bs[j].k
	})
	worst := math.Inf(-1)
	var a, b float64
	for _, x := range bs {
		a += x.p0
		b += x.p1
		if b < 200.0/float64(reps) || b > 1-200.0/float64(reps) {
			continue
		}
		// The bound at P0's upper confidence limit, against P1's lower one.
		se0 := math.Sqrt(a*(1-a)/float64(reps)) + 1/float64(reps)
		se1 := math.Sqrt(b * (1 - b) / float64(reps))
		bound := 0.5 * math.Erfc(-(math.Sqrt2*math.Erfinv(2*math.Min(1, a+2*se0)-1)+mu)/math.Sqrt2)
		worst = math.Max(worst, (b-bound)/se1-2)
	}
	return worst
}

func union(a, b map[int]float64) map[int]bool {
	u := map[int]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}
