package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const issueStatement = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5)
       sex, COUNT(*) AS n, AVG(bmi, contribution_bounds_per_group => (10, 60)) AS mean_bmi
FROM patients WHERE age >= 18 GROUP BY sex;`

func newClinicDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clinic.db")
	mustRun(t, "init", path, "--mu", "2")
	mustRun(t, "query", path, `CREATE TABLE patients(pid, sex, age, bmi);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 1000)
INSERT INTO patients SELECT i, CASE i % 2 WHEN 0 THEN 'F' ELSE 'M' END, 10 + i % 70, 15 + i % 30 FROM s;`)
	return path
}

func TestProtectAnalystQueryShell(t *testing.T) {
	db := newClinicDB(t)
	out := mustRun(t, "protect", db, "patients", "--privacy-unit", "pid", "--max-groups", "1", "--max-rows", "2", "--bounds", "bmi=10:60")
	if !strings.Contains(out, "privacy unit pid, at most 1 group(s) and 2 row(s)") || !strings.Contains(out, "bmi in [10, 60]") {
		t.Errorf("protect output %q", out)
	}
	mustFail(t, 1, "table patients is protected", "query", "--analyst", "--scope", "default", db, "SELECT * FROM patients")
	out = mustRun(t, "query", "--analyst", "--scope", "default", db, issueStatement, "-f", "csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || lines[0] != "sex,n,mean_bmi" {
		t.Errorf("analyst query output %q", out)
	}
	r := run(t, issueStatement+"\nSELECT * FROM patients;\n", "shell", "--analyst", "--scope", "default", db, "-f", "csv")
	if !strings.Contains(r.stdout, "sex,n,mean_bmi") || !strings.Contains(r.stderr, "is protected") || r.code != 1 {
		t.Errorf("analyst shell: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if out := mustRun(t, "audit", "verify", db); !strings.Contains(out, "policies OK: 1 changes") {
		t.Errorf("audit verify: %q", out)
	}
	mustFail(t, 2, "COL=LO:HI", "protect", db, "patients", "--bounds", "bmi")
	mustFail(t, 2, "COL=BYTES", "protect", db, "patients", "--max-length", "sex")
	mustFail(t, 1, "max_length of sex must lie", "protect", db, "patients", "--max-length", "sex=0")
	if out := mustRun(t, "protect", db, "patients", "--privacy-unit", "pid", "--max-length", "SEX=16"); !strings.Contains(out, "sex at most 16 bytes") {
		t.Errorf("protect --max-length: %q", out)
	}
	// sex is at most 16 bytes: instr of sex in itself costs 16 x 17 units a row, accepted.
	mustRun(t, "query", "--analyst", db, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.1) COUNT(*) AS n FROM patients WHERE instr(sex, sex) > 0")
	mustRun(t, "query", db, "CREATE TABLE sexes(sex); INSERT INTO sexes VALUES ('F'), ('M'), ('X')")
	out = mustRun(t, "protect", db, "patients", "--privacy-unit", "pid", "--public-keys", "sex=sexes")
	if !strings.Contains(out, "keys of sex from sexes.sex") {
		t.Errorf("protect --public-keys: %q", out)
	}
	out = mustRun(t, "query", "--analyst", db, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, COUNT(*) AS n FROM patients GROUP BY sex ORDER BY sex", "-f", "csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[3], "X,") {
		t.Errorf("public keys: %q, want F, M and X", out)
	}
	mustFail(t, 1, "does not exist", "protect", db, "patients", "--privacy-unit", "nope")
	mustRun(t, "unprotect", db, "patients")
	mustRun(t, "query", "--analyst", db, "SELECT count(*) FROM patients")
	mustFail(t, 1, "not protected", "unprotect", db, "patients")
}

// A file written before policy records (protect/testdata) keeps working
// from the command line: the analyst session carries its dp_policy_log over
// into the ledger, and audit verify checks both.
func TestAnalystUpgradesLegacyPolicies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "protect", "testdata", "legacy_policy_log.db"))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "legacy.db")
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "audit", "verify", db); !strings.Contains(out, "policies OK: 4 changes") {
		t.Errorf("audit verify of the old file: %q", out)
	}
	mustFail(t, 1, "table patients is protected", "query", "--analyst", db, "SELECT * FROM patients")
	if out := mustRun(t, "audit", "verify", db); !strings.Contains(out, "policies OK: 5 changes") {
		t.Errorf("audit verify after the upgrade: %q", out)
	}
	out := mustRun(t, "query", db, "SELECT mechanism, json_extract(params, '$.action') FROM dp_ledger WHERE kind = 'policy'", "-f", "csv")
	if !strings.Contains(out, "dp_policy_log,upgrade") {
		t.Errorf("policy records: %q", out)
	}
}
