package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"
)

// A file written by a version-1 dpsql (ledger/testdata/ledger_v1.db) is read
// by every reading command without a byte of it changing, and says its
// version in `audit verify`; the first charge upgrades it to this version.
func TestVersion1FileReadUnchanged(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "v1.db")
	copyFile(t, filepath.Join("..", "..", "ledger", "testdata", "ledger_v1.db"), db, 0o644)
	before := fileBytes(t, db)
	out := mustRun(t, "audit", "verify", db)
	if !strings.Contains(out, "\nschema version 1, an earlier dpsql's: its next charge or dp_init upgrades it to version 2") {
		t.Errorf("audit verify of a version-1 file:\n%s", out)
	}
	for _, args := range [][]string{
		{"query", db, "SELECT count(*) FROM dp_ledger"},
		{"query", db, "SELECT scope, mu_remaining FROM dp_budget_status"},
		{"query", db, "SELECT dp_budget_remaining()"},
		{"budget", db},
		{"audit", db},
		{"audit", "head", db},
	} {
		mustRun(t, args...)
		if !bytes.Equal(fileBytes(t, db), before) {
			t.Fatalf("dpsql %s changed the version-1 file", strings.Join(args, " "))
		}
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"v1.db"}) {
		t.Errorf("reading left %v beside the file", names)
	}
	if v := userVersion(t, db); v != 1 {
		t.Errorf("after reading: user_version %d", v)
	}
	r := run(t, "", "query", db, "SELECT gdp_spend(0.1)")
	if r.code != 0 || strings.Count(r.stderr, "dpsql: upgraded the ledger of "+db+" from schema version 1 to 2") != 1 {
		t.Errorf("the upgrading charge: exit %d, stderr %q; want the upgrade said once", r.code, r.stderr)
	}
	if r := run(t, "", "query", db, "SELECT gdp_spend(0.1)"); r.code != 0 || strings.Contains(r.stderr, "upgraded") {
		t.Errorf("the next charge: exit %d, stderr %q", r.code, r.stderr)
	}
	if v := userVersion(t, db); v != ledger.SchemaVersion {
		t.Errorf("after a charge: user_version %d, want %d", v, ledger.SchemaVersion)
	}
	if out := mustRun(t, "audit", "verify", db); !strings.Contains(out, fmt.Sprintf("\nschema version %d\n", ledger.SchemaVersion)) {
		t.Errorf("audit verify after the upgrade:\n%s", out)
	}
}

// A file of a later schema version is refused in words by every command,
// not reported as tampered.
func TestNewerFileRefusedInWords(t *testing.T) {
	db := newDB(t) // with a budget
	mustRun(t, "query", db, "SELECT gdp_spend(0.1)")
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, ledger.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	want := fmt.Sprintf("this file was written by a newer dpsql (ledger schema version %d; this dpsql reads up to %d): upgrade dpsql",
		ledger.SchemaVersion+1, ledger.SchemaVersion)
	for _, args := range [][]string{
		{"query", db, "SELECT gdp_spend(0.1)"},
		{"query", db, "SELECT dp_budget_remaining()"},
		{"budget", db},
		{"audit", "verify", db},
	} {
		r := run(t, "", args...)
		if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "replaced") || strings.Contains(r.stderr, "do not match") {
			t.Errorf("dpsql %s: exit %d, stderr %q; want a refusal saying %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
}

// The standalone verifier reads versions 0, 1 and 2, says which, and
// refuses a later one.
func TestPythonVerifierVersions(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.db")
	copyFile(t, filepath.Join("..", "..", "ledger", "testdata", "ledger_v1.db"), v1, 0o644)
	if r := pyVerify(t, v1); r.code != 0 || !strings.HasPrefix(r.stdout, "ledger chain OK: 15 rows (schema version 1)\n") {
		t.Errorf("verify_ledger.py on the version-1 fixture: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	v2 := filepath.Join(dir, "v2.db")
	copyFile(t, filepath.Join("..", "..", "ledger", "testdata", "ledger_v2.db"), v2, 0o644)
	agreeRowByRow(t, v2) // and says version 2

	mustRun(t, "query", v1, "SELECT gdp_spend(0.1)") // upgrades it
	agreeRowByRow(t, v1)
	if r := pyVerify(t, v1); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf(" rows (schema version %d)\n", ledger.SchemaVersion)) {
		t.Errorf("verify_ledger.py on the upgraded file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	raw, err := sql.Open("sqlite3", v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, ledger.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	want := fmt.Sprintf("was written by a newer dpsql (ledger schema version %d; this verifier reads up to %d)", ledger.SchemaVersion+1, ledger.SchemaVersion)
	if r := pyVerify(t, v1); r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("verify_ledger.py on a later version: exit %d, stderr %q; want exit 2 saying %q", r.code, r.stderr, want)
	}
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v int
	if err := raw.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// `dpsql budget` shows dp_budget_status only when the view is dpsql's: the
// look-alike view of issue 23 (an invented budget) is refused, not shown.
func TestBudgetRefusesLookAlikeView(t *testing.T) {
	db := newDB(t)
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP VIEW dp_budget_status`, `CREATE VIEW dp_budget_status AS SELECT 'default' AS scope, 1e9 AS mu_budget,
		0 AS mu_spent, 1e9 AS mu_remaining, 0 AS epsilon_spent, 1e-5 AS delta, NULL AS epsilon_budget, NULL AS epsilon_rigorous, 0 AS entries,
		'add_remove' AS neighbours, 'mu-GDP' AS guarantee`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	r := run(t, "", "budget", db)
	if r.code == 0 || strings.Contains(r.stdout, "1000000000") || !strings.Contains(r.stderr, "view dp_budget_status was replaced") {
		t.Errorf("dpsql budget on a look-alike view: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
