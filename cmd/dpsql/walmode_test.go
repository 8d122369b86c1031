package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 23 §4: reading a file must not change it. A file another tool made
// (rollback journal) stays so through queries that only read, the budget
// and the audit; the first statement that charges switches it to WAL mode,
// which a charge needs, and says so once on standard error.
func TestReadingDoesNotSwitchToWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE t(a); INSERT INTO t VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	mustRun(t, "query", path, "SELECT count(*) FROM t")
	if m := journalMode(t, path); m != "delete" {
		t.Fatalf("after a query that reads: journal mode %q, want delete", m)
	}
	// A ledger made by a tool that keeps the rollback journal: reading it,
	// its budget and its audit leave it as it is too.
	if r := run(t, "", "init", path, "--mu", "1"); r.code != 0 || !strings.Contains(r.stderr, "switched") {
		t.Fatalf("init of a file in rollback mode: exit %d, stderr %q: want the switch to WAL mode said", r.code, r.stderr)
	}
	raw, _ = sql.Open("sqlite3", path)
	if _, err := raw.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for _, args := range [][]string{
		{"query", path, "SELECT count(*) FROM t"},
		{"query", path, "SELECT dp_budget_remaining()"},
		{"budget", path},
		{"audit", path},
		{"audit", "verify", path},
	} {
		r := run(t, "", args...)
		if r.code != 0 {
			t.Fatalf("dpsql %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		if m := journalMode(t, path); m != "delete" {
			t.Fatalf("after dpsql %s: journal mode %q, want delete", strings.Join(args, " "), m)
		}
	}
	r := run(t, "", "query", path, "SELECT dp_gaussian(count(*), 1, 0.5) > -100 FROM t")
	if r.code != 0 {
		t.Fatalf("charging query: exit %d: %s", r.code, r.stderr)
	}
	if m := journalMode(t, path); m != "wal" {
		t.Errorf("after a charge: journal mode %q, want wal", m)
	}
	if !strings.Contains(r.stderr, "switched") || !strings.Contains(r.stderr, "WAL mode") {
		t.Errorf("the switch was not said on standard error: %q", r.stderr)
	}
	r = run(t, "", "query", path, "SELECT dp_gaussian(count(*), 1, 0.5) > -100 FROM t")
	if r.code != 0 || strings.Contains(r.stderr, "switched") {
		t.Errorf("second charge: exit %d, stderr %q (said once)", r.code, r.stderr)
	}
}

// A file that cannot be switched when its charge comes (another connection
// is reading it) is not waited for: the charge is refused with the way out,
// and nothing is charged; the file stays as it was.
func TestChargeRefusedWhenTheSwitchCannotBeMade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	mustRun(t, "init", path, "--mu", "1")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	for _, q := range []string{`CREATE TABLE t(a)`, `INSERT INTO t VALUES (1)`, `PRAGMA journal_mode = DELETE`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	before := mustRun(t, "audit", path, "-f", "csv")
	reader, err := raw.Begin() // another process reading the file
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	mustFail(t, 1, "PRAGMA journal_mode=WAL", "query", path, "SELECT dp_gaussian(count(*), 1, 0.5) FROM t")
	reader.Rollback()
	if after := mustRun(t, "audit", path, "-f", "csv"); after != before {
		t.Errorf("the refused statement changed the ledger:\n%s\n%s", before, after)
	}
	if m := journalMode(t, path); m != "delete" {
		t.Errorf("journal mode %q after a refused charge, want delete", m)
	}
}
