package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A Laplace charge (no finite mu: +Inf in the ledger) is shown by its
// epsilon and delta, never as +Inf: in the remote shell's .audit (table,
// csv and json), in GET /v1/ledger, and in the local dpsql audit's table,
// which keeps the recorded +Inf in csv and json (the hashed value).
func TestAuditLaplaceCost(t *testing.T) {
	db := newClinicDB(t)
	mustRun(t, "protect", db, "patients", "--privacy-unit", "pid")
	tok := strings.TrimSpace(mustRun(t, "analyst", "add", db, "alice", "--scope", "default"))
	url := startServe(t, db, "--listen", "127.0.0.1:0")
	t.Setenv(tokenEnv, tok)
	const laplace = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-7, noise = 'laplace')
       sex, COUNT(*) AS n FROM patients GROUP BY sex;`
	mustRun(t, "query", "--remote", url, laplace)
	mustRun(t, "query", "--remote", url, issueStatement) // Gaussian, mu 0.5

	shell := func(format string) string {
		r := run(t, ".audit\n", "shell", "--remote", url, "-f", format)
		if r.code != 0 {
			t.Fatalf("remote .audit -f %s: exit %d: %s", format, r.code, r.stderr)
		}
		return r.stdout
	}
	table := shell("table")
	for _, want := range []string{"| cost ", "| epsilon 0.5, delta 1e-07 |", "| mu 0.5 ", "| mu 2 "} {
		if !strings.Contains(table, want) {
			t.Errorf("remote .audit lacks %q:\n%s", want, table)
		}
	}
	if csv := shell("csv"); !strings.Contains(csv, "id,at,kind,mechanism,mu,epsilon,delta,query\n") ||
		!strings.Contains(csv, ",charge,composite,,0.5,1e-07,\"SELECT WITH DIFFERENTIAL_PRIVACY") ||
		!strings.Contains(csv, ",charge,gaussian_inf,0.5,,,\"SELECT WITH DIFFERENTIAL_PRIVACY") {
		t.Errorf("remote .audit -f csv:\n%s", csv)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(shell("json")), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("remote .audit -f json: %v, %d rows", err, len(rows))
	}
	if r := rows[1]; r["mu"] != nil || r["epsilon"] != 0.5 || r["delta"] != 1e-7 {
		t.Errorf("remote .audit -f json, the Laplace charge: %v", r)
	}
	for _, out := range []string{table, shell("csv"), shell("json")} {
		if strings.Contains(out, "Inf") {
			t.Errorf("remote .audit prints an infinity:\n%s", out)
		}
	}

	// The service's JSON: mu null (JSON has no +Inf), epsilon and delta given.
	req, _ := http.NewRequestWithContext(context.Background(), "GET", url+"/v1/ledger", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"mechanism":"composite","mu":null,"epsilon":0.5,"delta":1e-7,"query":`) ||
		!strings.Contains(string(body), `"mechanism":"gaussian_inf","mu":0.5,"query":`) {
		t.Errorf("GET /v1/ledger: %s", body)
	}

	local := mustRun(t, "audit", db)
	if !strings.Contains(local, "| epsilon 0.5, delta 1e-07 |") || strings.Contains(local, "Inf") {
		t.Errorf("dpsql audit:\n%s", local)
	}
	if csv := mustRun(t, "audit", db, "-f", "csv"); !strings.Contains(csv, ",default,composite,+Inf,") {
		t.Errorf("dpsql audit -f csv keeps the recorded mu:\n%s", csv)
	}
}
