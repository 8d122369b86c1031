package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalystWithoutScope: an analyst who forgets --scope (or mistypes it) is
// asked for their scope, not told how to create one (the owner's job), and
// nothing runs.
func TestAnalystWithoutScope(t *testing.T) {
	db := filepath.Join(t.TempDir(), "clinic.db")
	mustRun(t, "init", db, "--mu", "2", "--scope", "alice")
	mustRun(t, "query", db, "CREATE TABLE patients(pid, sex); INSERT INTO patients VALUES (1, 'F'), (2, 'M')")
	mustRun(t, "protect", db, "patients", "--privacy-unit", "pid")
	stmt := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) COUNT(*) AS n FROM patients"
	for _, tc := range []struct {
		code int
		want string
		args []string
	}{
		{2, `has no budget scope "default", which an analyst session charges when no --scope is given: pass --scope NAME (your scope`, []string{"query", "--analyst", db, stmt}},
		{2, `pass --scope NAME (your scope`, []string{"shell", "--analyst", db}},
		{1, `has no budget scope "bob": pass --scope NAME (your scope`, []string{"query", "--analyst", "--scope", "bob", db, stmt}},
	} {
		r := mustFail(t, tc.code, tc.want, tc.args...)
		if strings.Contains(r.stderr, "dpsql init") || strings.Contains(r.stderr, "dp_init") {
			t.Errorf("dpsql %s tells an analyst how to create a scope: %s", strings.Join(tc.args, " "), r.stderr)
		}
	}
	if out := mustRun(t, "audit", db, "-f", "csv"); strings.Contains(out, "gaussian") {
		t.Errorf("a refused session charged:\n%s", out)
	}
	mustRun(t, "query", "--analyst", "--scope", "alice", db, stmt)
}
