package protect_test

import (
	"context"
	"strings"
	"testing"
)

// Every refusal names the part of the statement it is about and ends with
// a statement over the same table, built from its columns and policy, that
// would be accepted; nothing refused is charged, and each suggestion, run,
// is answered.
func TestRefusalsNameClauseAndExample(t *testing.T) {
	path, owner := newClinic(t, 100, `json_object('privacy_unit', 'pid', 'bounds', json_object('bmi', json_array(10, 60)))`,
		insertPatients(300, func(i int) (int, string, int, any) { return i, []string{"F", "M"}[i%2], 20 + i%50, 22.5 }))
	a := openAnalyst(t, path)
	const dp = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) "
	const base = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, COUNT(*) AS n FROM patients"
	for _, tc := range []struct{ sql, want, try string }{
		{"SELECT * FROM patients", "refused: table patients is protected", base + " GROUP BY sex"},
		{"SELECT sex, count(*) FROM patients GROUP BY sex", "refused: table patients is protected", base + " GROUP BY sex"},
		{"SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM patients", "refused: OPTIONS: syntax error", base + " GROUP BY sex"},
		{"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0) COUNT(*) FROM patients", "refused: OPTIONS: mu must lie in (0, 100]", base},
		{"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, privacy_unit_column = 'sex') COUNT(*) FROM patients",
			"refused: OPTIONS: the privacy unit is set by the owner's policy", base},
		{"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM patients",
			"refused: OPTIONS: OPTIONS must give mu, or epsilon and delta", base},
		{dp + "SUM(age) FROM patients", "refused: SELECT list: SUM(age) needs bounds: write contribution_bounds_per_group",
			"sex, COUNT(*) AS n, AVG(bmi) AS mean_bmi FROM patients GROUP BY sex"},
		{dp + "PERCENTILE_CONT(age, 0.5) FROM patients",
			"refused: SELECT list: PERCENTILE_CONT(age) needs bounds: write contribution_bounds_per_row", "AVG(bmi)"},
		{dp + "PERCENTILE_CONT(bmi, 1.5) FROM patients", "refused: SELECT list: PERCENTILE_CONT(bmi, 1.5): the percentile p must lie in [0, 1]", "AVG(bmi)"},
		{dp + "APPROX_QUANTILES(bmi, 1000000) FROM patients",
			"refused: SELECT list: APPROX_QUANTILES(bmi, 1000000): the number of quantiles k must be an integer in [1, 128]", "AVG(bmi)"},
		{dp + "APPROX_QUANTILES(bmi, 2.5) FROM patients", "refused: SELECT list: APPROX_QUANTILES(bmi, 2.5): the number of quantiles k must be an integer", "AVG(bmi)"},
		{dp + "PERCENTILE_CONT(bmi, age) FROM patients", "refused: SELECT list: syntax error", "AVG(bmi)"},
		{dp + "SUM(DISTINCT bmi) FROM patients", "refused: SELECT list: syntax error at offset 63: SUM(DISTINCT ...) is not accepted", "AVG(bmi)"},
		{dp + "age, COUNT(*) FROM patients GROUP BY sex", "refused: SELECT list: column age is neither a GROUP BY key", "AVG(bmi)"},
		{dp + "sex, COUNT(*) FROM patients", "refused: SELECT list: column sex is neither a GROUP BY key", "AVG(bmi)"},
		{dp + "sex FROM patients GROUP BY sex", "refused: SELECT list: a DP SELECT needs at least one aggregate", "AVG(bmi)"},
		{dp + "* FROM patients", "refused: SELECT list: syntax error at offset 50: SELECT * is not accepted", "AVG(bmi)"},
		{"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, confidence = 0.9) COUNT(*) FROM patients",
			"refused: SELECT list: with OPTIONS confidence, every aggregate needs an alias", "AVG(bmi)"},
		{dp + "COUNT(*) FROM patients WHERE abs(age) > 3", "refused: WHERE: function abs() is not allowed in WHERE",
			base + " WHERE bmi >= 10 GROUP BY sex"},
		{dp + "COUNT(*) FROM patients WHERE age IN (SELECT 1)", "refused: WHERE: syntax error", "WHERE bmi >= 10"},
		{dp + "COUNT(*) FROM patients WHERE nosuch = 1", `refused: WHERE: no column "nosuch" in patients`, "WHERE bmi >= 10"},
		{dp + "COUNT(*) FROM patients GROUP BY nosuch", `refused: GROUP BY: no column "nosuch" in patients`, base + " GROUP BY sex"},
		{dp + "COUNT(*) FROM patients GROUP BY sex, sex", "refused: GROUP BY: GROUP BY names sex twice", base},
		{dp + "COUNT(*) AS n FROM patients ORDER BY m", "refused: ORDER BY: ORDER BY m: order by an output name or position",
			base + " GROUP BY sex ORDER BY n DESC LIMIT 10"},
		{dp + "COUNT(*) AS n FROM patients LIMIT -1", "refused: LIMIT: syntax error", "ORDER BY n DESC LIMIT 10"},
		{dp + "COUNT(*) AS n FROM patients LIMIT 1 OFFSET 2", "refused: LIMIT: syntax error", "ORDER BY n DESC LIMIT 10"},
		{dp + "COUNT(*) FROM patients GROUP BY sex HAVING age > 3", "refused: HAVING: HAVING age: HAVING filters the released rows by their output names",
			base + " GROUP BY sex HAVING n >= 10"},
		{dp + "COUNT(*) FROM patients GROUP BY sex HAVING COUNT(*) > 3 ORDER BY", "refused: ORDER BY: syntax error", base + " GROUP BY sex ORDER BY n DESC LIMIT 10"},
		{dp + "COUNT(*) FROM patients p", "refused: FROM: syntax error", base + " GROUP BY sex"},
		{dp + "COUNT(*) FROM main.patients", "refused: FROM: syntax error", ""},
		{dp + "COUNT(*) FROM wards", `refused: FROM: table "wards" is not protected`, ""},
		{"WITH adults AS (SELECT pid, sex FROM patients WHERE age >= 18) " + dp + "SUM(bmi) FROM adults", `refused: FROM: no column "bmi" in adults`,
			"sex, COUNT(*) AS n"},
		{"WITH adults AS (SELECT pid, sex, bmi FROM patients WHERE age >= 18) " + dp + "PERCENTILE_CONT(bmi, 2) FROM adults",
			"refused: SELECT list: PERCENTILE_CONT(bmi, 2): the percentile p must lie in [0, 1]", "AVG(bmi) AS mean_bmi FROM patients"},
	} {
		charges := ledgerRows(t, owner)
		_, _, err := queryAll(context.Background(), a, tc.sql)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s\n  got %v\n  want a refusal starting %q", tc.sql, err, tc.want)
			continue
		}
		msg := err.Error()
		try := ""
		if i := strings.LastIndex(msg, "; try "); i >= 0 {
			try = msg[i+len("; try "):]
		}
		switch {
		case tc.try == "" && try != "":
			t.Errorf("%s\n  suggests %q for a table that is not protected", tc.sql, try)
		case tc.try != "" && !strings.Contains(try, tc.try):
			t.Errorf("%s\n  suggests %q, want it to contain %q", tc.sql, try, tc.try)
		}
		if ledgerRows(t, owner) != charges {
			t.Errorf("%s: a refused statement charged", tc.sql)
		}
		if try != "" {
			if _, rows, err := queryAll(context.Background(), a, try); err != nil || len(rows) == 0 {
				t.Errorf("the suggestion %s: %v (%d rows)", try, err, len(rows))
			}
		}
	}
}
