package protect

import (
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// FuzzCheck: whatever parses, the checker and rewriter never panic, and an
// accepted plan's WHERE reads only the table's columns and calls only the
// allowed functions, and its per-row work bound is within MaxRowWork.
func FuzzCheck(f *testing.F) {
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, COUNT(*) AS n, AVG(bmi, contribution_bounds_per_group => (10, 60)) AS m FROM patients WHERE age >= 18 GROUP BY sex`)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 2) age, SUM(bmi) FROM patients WHERE lower(sex) IN ('f') GROUP BY age ORDER BY 2 LIMIT 3`)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, selection_delta = 1e-9) sex, MEDIAN(bmi) AS m, VAR_POP(age, contribution_bounds_per_group => (0, 120)) FROM patients GROUP BY sex`)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM patients WHERE trim(CASE WHEN pid = 17 THEN 'aaaa' ELSE '' END, 'ba') = 'x' AND sex LIKE '%a%' AND instr(substr(sex, 1, 9), 'b') > 0`)
	f.Add(`WITH a AS (SELECT pid, age AS years, bmi FROM patients WHERE sex = 'F'), b AS (SELECT * FROM a WHERE years > 3) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) years / 10 * 10 AS d, COUNT(*) AS n FROM b GROUP BY d HAVING n > 10 AND d IS NOT NULL ORDER BY d`)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.9) round(bmi, -1) AS r, substr(sex, 1, 1), AVG(bmi) AS m FROM (SELECT * FROM patients WHERE age < 90) AS s GROUP BY 1, substr(sex, 1, 1) HAVING m_lo > 0 OR m_hi IN (1, 'x', NULL)`)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) CAST(age AS INTEGER) % 7, strftime('%Y', sex) AS y, COUNT(*) AS n FROM patients GROUP BY CAST(age AS INTEGER) % 7, y HAVING -n / 0 IS NULL`)
	f.Add(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) sex, COUNT(DISTINCT pid) AS p, COUNT(DISTINCT age) AS a, PERCENTILE_CONT(bmi, 0.9) AS p90, APPROX_QUANTILES(bmi, 4, contribution_bounds_per_row => (0, 100)) AS q FROM patients GROUP BY sex`)
	policies := map[string]Policy{"patients": {PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3, Bounds: map[string][2]float64{"bmi": {10, 60}}}}
	cols := map[string]string{"pid": "pid", "sex": "sex", "age": "age", "bmi": "bmi"}
	f.Fuzz(func(t *testing.T, src string) {
		st, err := dpselect.Parse(src)
		if err != nil {
			return
		}
		pl, err := checkStatement(st, policies, cols, 1e-5)
		if err != nil {
			return
		}
		var keyValues [][]any
		for range pl.keySources {
			keyValues = append(keyValues, []any{"a", "b"})
		}
		if err := completePlan(pl, nil, false, SchemaFacts{}, keyValues); err != nil {
			return
		}
		if err := pl.mech.Validate(); err != nil {
			t.Fatalf("charges an invalid mechanism: %v", err)
		}
		_ = rewrite(pl)
		for _, a := range pl.aggs {
			switch {
			case a.distinct && !a.persons:
				_ = rewriteDistinct(pl, a)
			case histogramKind(a.kind):
				_ = rewriteHistogram(pl, a)
			}
			if a.kind == dpselect.Quantiles && !(a.param >= 1 && a.param <= MaxQuantiles) {
				t.Fatalf("APPROX_QUANTILES with k = %v accepted", a.param)
			}
			if a.kind == dpselect.Percentile && !(a.param >= 0 && a.param <= 1) {
				t.Fatalf("PERCENTILE_CONT with p = %v accepted", a.param)
			}
		}
		if tv := pl.details.NoiseTVTotal; !(tv >= 0) || tv > 1e-9 {
			t.Fatalf("noise_tv %v", tv)
		}
		if pl.deltaS < 0 || pl.deltaS >= 1 {
			t.Fatalf("delta_s %v", pl.deltaS)
		}
		if !strings.EqualFold(pl.table, "patients") || len(st.With) != 0 {
			t.Fatalf("reads %q with CTEs %v left", pl.table, st.With)
		}
		if pl.having != nil { // post-processing never panics, whatever the released values
			vals := []any{nil, int64(-1), 2.5, "12abc", []byte{1}, int64(0), "", 1e308}
			for k := range vals {
				row := make([]any, len(pl.columns()))
				for i := range row {
					row[i] = vals[(i+k)%len(vals)]
				}
				pl.having.keep(row)
			}
		}
		exprs := []dpselect.Expr{st.Where}
		for _, info := range pl.keyInfo {
			exprs = append(exprs, info.expr)
		}
		for _, x := range exprs {
			dpselect.Walk(x, func(e dpselect.Expr) {
				switch e := e.(type) {
				case *dpselect.Col:
					if _, ok := cols[strings.ToLower(e.Name)]; !ok {
						t.Fatalf("accepted a read of %q", e.Name)
					}
				case *dpselect.Call:
					if _, ok := safeFunctions[e.Name]; !ok {
						t.Fatalf("accepted a call of %s", e.Name)
					}
				}
			})
		}
		if !(pl.mu > 0) && !(pl.eps > 0 && pl.delta > 0 && pl.delta < 1) {
			t.Fatalf("accepted mu %v, epsilon %v, delta %v", pl.mu, pl.eps, pl.delta)
		}
		if !(pl.rowWork >= 0 && pl.rowWork <= MaxRowWork) {
			t.Fatalf("accepted a per-row work bound of %v (limit %d)", pl.rowWork, MaxRowWork)
		}
	})
}
