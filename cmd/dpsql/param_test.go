package main

import (
	"strings"
	"testing"
)

// A DP statement with a bind parameter gets protected mode's refusal, in
// words, from an analyst connection and from the service, never SQLite's
// `near "OPTIONS": syntax error`.
func TestBindParameterRefusal(t *testing.T) {
	db := newClinicDB(t)
	mustRun(t, "protect", db, "patients", "--privacy-unit", "pid")
	const stmt = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) COUNT(*) AS n FROM patients WHERE age >= :min_age"
	const want = "refused: WHERE: bind parameters are not accepted in a protected statement (found :min_age at offset 93): " +
		"write the value inline as a literal, e.g. age >= 18 rather than age >= ?"
	mustFail(t, 1, want, "query", "--analyst", db, stmt)
	t.Setenv(tokenEnv, strings.TrimSpace(mustRun(t, "analyst", "add", db, "alice", "--scope", "default")))
	url := startServe(t, db, "--listen", "127.0.0.1:0")
	mustFail(t, 1, want, "query", "--remote", url, stmt)
	if out := mustRun(t, "audit", db, "-f", "csv"); strings.Contains(out, ",charge,") || strings.Contains(out, "gaussian") {
		t.Errorf("a refused statement was charged:\n%s", out)
	}
}
