package protect

import (
	"context"
	"math"
	"testing"

	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/release"
)

// coverageDB is a table of four groups of 2000 persons each (x on a grid in
// [0, 100], each group its own spread), STRICT or not, and its exact
// statistics per group.
func coverageDB(t *testing.T, strict bool) (*Engine, map[string]truth) {
	e, db := testDB(t, 1000, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {})
	tbl := `CREATE TABLE v (pid INTEGER, g TEXT, x REAL NOT NULL)`
	if strict {
		tbl += ` STRICT`
	}
	if _, err := db.Exec(tbl); err != nil {
		t.Fatal(err)
	}
	vals := map[string][]float64{}
	tx, _ := db.Begin()
	st, _ := tx.Prepare(`INSERT INTO v VALUES (?, ?, ?)`)
	for i := range 8000 {
		g := []string{"a", "b", "c", "d"}[i%4]
		x := float64((i*37)%1000) / 10 // 0 .. 99.9
		switch g {
		case "b":
			x = x / 4 // [0, 25)
		case "c":
			x = 100 - x/10
		case "d":
			x = math.Mod(x*x, 100)
		}
		if _, err := st.Exec(i, g, x); err != nil {
			t.Fatal(err)
		}
		vals[g] = append(vals[g], x)
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := Protect(context.Background(), db, "v", Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"x": {0, 100}}}); err != nil {
		t.Fatal(err)
	}
	tr := map[string]truth{}
	for g, vs := range vals {
		tr[g] = truths([][]float64{vs})[0]
	}
	return e, tr
}

// Error bars over 10^4 releases: COUNT's and SUM's intervals cover the exact
// figure in 95% +- 1% of releases (groups of 2000 persons, which the
// selection keeps in every release; COUNT reads the selection's count, so
// its coverage is conditional on selection, which here always holds), under
// Laplace and Gaussian noise and for a SUM centred on a count or not; AVG's,
// VAR_POP's, STDDEV_POP's and MEDIAN's conservative intervals cover in at
// least 95%. The released COUNT and SUM are unbiased and their variances
// are the ones the plan states (calibrate.SD).
func TestCoverageStatistical(t *testing.T) {
	if testing.Short() {
		t.Skip("10^4 releases")
	}
	const reps = 10000
	for _, tc := range []struct {
		name   string
		strict bool
		q      string
	}{
		{"laplace centred", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, confidence = 0.95, noise = 'laplace')
			g, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a, VAR_POP(x) AS v, STDDEV_POP(x) AS sd FROM v GROUP BY g`},
		{"gaussian centred", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, confidence = 0.95, noise = 'gaussian')
			g, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a, VAR_POP(x) AS v, STDDEV_POP(x) AS sd FROM v GROUP BY g`},
		{"laplace uncentred", false, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, confidence = 0.95, noise = 'laplace')
			g, SUM(x) AS s, COUNT(*) AS n FROM v GROUP BY g`},
		{"gaussian uncentred, mu", false, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, confidence = 0.95) g, SUM(x) AS s, COUNT(*) AS n FROM v GROUP BY g`},
		{"median laplace", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, confidence = 0.95) g, MEDIAN(x) AS m FROM v GROUP BY g`},
		{"median gaussian", true, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.95) g, MEDIAN(x) AS m FROM v GROUP BY g`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, tr := coverageDB(t, tc.strict)
			pl, gs := exact(t, e, tc.q)
			if len(gs) != 4 {
				t.Fatalf("%d groups", len(gs))
			}
			noise := release.NewNoise()
			cols := releaseRows(pl, gs, noise).Columns
			idx := map[string]int{}
			for i, c := range cols {
				idx[c] = i
			}
			type stat struct {
				in, n       int
				err, errSq  float64
				exact, body bool // exact coverage expected; track bias and variance
			}
			stats := map[string]*stat{}
			for _, out := range []string{"n", "s", "a", "v", "sd", "m"} {
				if _, ok := idx[out]; ok {
					stats[out] = &stat{exact: out == "n" || out == "s", body: out == "n" || out == "s"}
				}
			}
			for range reps {
				res := releaseRows(pl, gs, noise)
				if len(res.Rows) != 4 {
					t.Fatalf("released %d groups", len(res.Rows))
				}
				for _, r := range res.Rows {
					want := tr[r[0].(string)]
					for out, s := range stats {
						w := map[string]float64{"n": want.n, "s": want.sum, "a": want.avg, "v": want.vr, "sd": want.sd, "m": want.med}[out]
						v, lo, hi := num64(r[idx[out]]), num64(r[idx[out+"_lo"]]), num64(r[idx[out+"_hi"]])
						if !(lo <= v && v <= hi) && out != "m" {
							t.Fatalf("%s = %v outside its interval [%v, %v]", out, v, lo, hi)
						}
						if lo <= w && w <= hi {
							s.in++
						}
						s.n++
						s.err += v - w
						s.errSq += (v - w) * (v - w)
					}
				}
			}
			for out, s := range stats {
				cov := float64(s.in) / float64(s.n)
				switch {
				case s.exact && math.Abs(cov-0.95) > 0.01:
					t.Errorf("%s: coverage %.4f, want 95%% +- 1%%", out, cov)
				case !s.exact && cov < 0.95:
					t.Errorf("%s: coverage %.4f, want at least 95%%", out, cov)
				}
				t.Logf("%s: coverage %.4f over %d", out, cov, s.n)
				if !s.body {
					continue
				}
				// Unbiased, with the stated variance (COUNT is rounded to an
				// integer: plus 1/12).
				sd := statedSD(pl, out)
				if out == "n" {
					sd = math.Sqrt(sd*sd + 1.0/12)
				}
				mean, v := s.err/float64(s.n), s.errSq/float64(s.n)
				if math.Abs(mean) > 5*sd/math.Sqrt(float64(s.n)) {
					t.Errorf("%s: mean error %.4g, want 0 +- %.4g", out, mean, 5*sd/math.Sqrt(float64(s.n)))
				}
				if math.Abs(v/(sd*sd)-1) > 0.05 {
					t.Errorf("%s: error variance %.4g, stated %.4g", out, v, sd*sd)
				}
			}
		})
	}
}

// statedSD returns the standard deviation the plan states for output out
// (COUNT or SUM): its value's noise, or the centred sum's plus the
// midpoint's times the count's.
func statedSD(pl *plan, out string) float64 {
	names := pl.itemNames()
	for ai, a := range pl.aggs {
		if names[ai] != out {
			continue
		}
		terms := []calibrate.Term{{N: pl.values[a.val].Noisy, Coef: 1}}
		if a.centred && a.cnt >= 0 {
			terms = append(terms, calibrate.Term{N: pl.values[a.cnt].Noisy, Coef: a.mid})
		}
		return calibrate.SD(terms...)
	}
	panic("no output " + out)
}

func num64(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return math.NaN()
}
