package main

import (
	"strings"
	"testing"
)

func TestShellScript(t *testing.T) {
	db := newDB(t)
	mustRun(t, "init", db, "--mu", "2", "--scope", "other")
	script := `-- statements may span lines and share one with others
SELECT name
  FROM t
  WHERE id = 1; SELECT 'two;' AS s;
.format csv
SELECT id FROM t ORDER BY id;
.tables
.schema t
.scope
.scope nosuch
.scope other
SELECT dp_scope() AS scope;
SELECT dp_gaussian(count(*), 1, 1.5) IS NOT NULL AS released FROM t;
SELEC oops;
.nosuch
.format xml
SELECT 'still running' AS after_errors;
.budget
.audit 1
.verify
.help
.quit
SELECT 'not reached';
`
	r := run(t, script, "shell", db)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (errors in the input)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"| name |\n+------+\n| a    |", // table format at first
		"| two; |",
		"id\n1\n2\n3\n", // .format csv
		"dp_budget  dp_budget_status  dp_ledger  dp_scope_state  t\n",        // .tables
		"CREATE TABLE t(id INTEGER PRIMARY KEY, x REAL, name TEXT, v BLOB);", // .schema t
		`DP functions charge scope "default"`,
		`DP functions now charge scope "other"`,
		"scope\nother\n",
		"released\n1\n",
		"after_errors\nstill running\n",
		"scope,mu_budget,",                               // .budget in csv
		"other,2,1.5,",                                   // the charge went to scope other
		"id,at,scope,mechanism,mu,params,query,hash\n3,", // .audit 1: the charge after two budget events
		"ledger OK: 3 rows, chain intact (charges: 1, budget events: 2)",
		".scope [NAME]", // .help
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("shell output lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "not reached") {
		t.Error(".quit did not stop the shell")
	}
	for _, want := range []string{"Error: ", "syntax error", "unknown command .nosuch", `unknown output format "xml"`, `unknown budget scope "nosuch"`, "dpsql: 4 error(s) in the input"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("shell stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "dpsql>") {
		t.Error("prompts printed although stdin is not a terminal")
	}
}

func TestShellBudgetRefusalContinues(t *testing.T) {
	db := newDB(t)
	r := run(t, "SELECT dp_gaussian(1.0, 1, 0.9) IS NOT NULL AS ok;\nSELECT dp_gaussian(1.0, 1, 0.9);\nSELECT 'after' AS next;\n", "shell", db, "-f", "csv")
	if r.code != 1 || !strings.Contains(r.stderr, "Error: dp_gaussian: privacy budget exceeded") {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.stdout, "ok\n1\n") || !strings.Contains(r.stdout, "next\nafter\n") {
		t.Fatalf("stdout %q", r.stdout)
	}
}

func TestShellIncompleteAtEOF(t *testing.T) {
	db := newDB(t)
	r := run(t, "SELECT 1 AS one;\nSELECT 2", "shell", db, "-f", "csv")
	if r.code != 1 || !strings.Contains(r.stderr, "incomplete SQL at the end of the input") || r.stdout != "one\n1\n" {
		t.Fatalf("%+v", r)
	}
	// A clean script exits 0; comments and blank lines are ignored.
	r = run(t, "\n-- nothing\n\nSELECT 1 AS one;\n", "shell", db, "-f", "csv")
	if r.code != 0 || r.stdout != "one\n1\n" {
		t.Fatalf("%+v", r)
	}
	mustFail(t, 1, `has no budget scope "nosuch"`, "shell", db, "--scope", "nosuch")
}

func TestHistoryPath(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	if p := historyPath("~/.dpsql_history"); p != "/home/someone/.dpsql_history" {
		t.Fatalf("historyPath = %q", p)
	}
	if p := historyPath("/tmp/h"); p != "/tmp/h" {
		t.Fatalf("historyPath = %q", p)
	}
}
