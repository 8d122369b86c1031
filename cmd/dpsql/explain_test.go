package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// dpsql explain prints a DP statement's plan (with or without a leading
// EXPLAIN), as a table or JSON, charges nothing, and refuses what protected
// mode refuses.
func TestExplainCommand(t *testing.T) {
	db := newClinicDB(t)
	mustRun(t, "protect", db, "patients", "--privacy-unit", "pid", "--bounds", "bmi=10:60")
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5) sex, COUNT(*) AS n, AVG(bmi) AS mean_bmi FROM patients GROUP BY sex`
	out := mustRun(t, "explain", db, q)
	for _, want := range []string{"| part", "| statement", "| selection", "| aggregate | n", "| aggregate | mean_bmi", "noise = 'auto' chose"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "explain", db, "EXPLAIN "+q, "-f", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	var sel map[string]any
	for _, r := range rows {
		if r["part"] == "selection" {
			sel = r
		}
	}
	if sel == nil || !(sel["threshold"].(float64) > 1) || sel["confidence"] != 0.95 {
		t.Errorf("selection row %v", sel)
	}
	if out := mustRun(t, "query", db, "SELECT count(*) AS n FROM dp_ledger WHERE kind = 'charge'", "-f", "csv"); out != "n\n0\n" {
		t.Errorf("explain charged: %q", out)
	}
	// EXPLAIN in an analyst's statements (split like any other) answers
	// the plan and charges nothing; the statement after it runs.
	out = mustRun(t, "query", "--analyst", db, "EXPLAIN "+q+"; "+q, "-f", "csv")
	if !strings.HasPrefix(out, "part,name,noise,") || !strings.Contains(out, "\nsex,n,mean_bmi\n") {
		t.Errorf("EXPLAIN then the statement: %q", out)
	}
	if out := mustRun(t, "query", db, "SELECT count(*) AS n FROM dp_ledger WHERE kind = 'charge'", "-f", "csv"); out != "n\n1\n" {
		t.Errorf("EXPLAIN and the statement charged: %q, want the statement's one charge", out)
	}
	mustFail(t, 1, "needs bounds", "explain", db, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) SUM(age) FROM patients`)
	mustFail(t, 2, "", "explain", db)
}
