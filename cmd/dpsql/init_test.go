package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

func TestInitMu(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	out := mustRun(t, "init", path, "--mu", "1")
	for _, want := range []string{`created budget scope "default" in ` + path, "mu      = 1 (Gaussian DP)", "epsilon = 4.377 at delta = 1e-05"} {
		if !strings.Contains(out, want) {
			t.Errorf("init output lacks %q:\n%s", want, out)
		}
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	var mu, delta float64
	if err := db.QueryRow(`SELECT mu_budget, delta FROM dp_budget WHERE scope = 'default'`).Scan(&mu, &delta); err != nil || mu != 1 || delta != 1e-5 {
		t.Fatalf("dp_budget: mu %v delta %v err %v", mu, delta, err)
	}

	out = mustRun(t, "init", path, "--mu", "0.5", "--delta", "1e-6", "--scope", "second")
	if !strings.Contains(out, `scope "second"`) || !strings.Contains(out, "mu      = 0.5") || !strings.Contains(out, "delta = 1e-06") {
		t.Fatalf("second scope: %s", out)
	}
	mustFail(t, 1, `scope "second" already has a budget`, "init", path, "--mu", "2", "--scope", "second")
}

func TestInitEpsilon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "eps.db")
	out := mustRun(t, "init", path, "--epsilon", "2", "--delta", "1e-5", "--scope", "analysis")
	for _, want := range []string{`scope "analysis"`, "epsilon = 2 at delta = 1e-05", "mu      = 0.5016"} {
		if !strings.Contains(out, want) {
			t.Errorf("init output lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "budget", path, "-f", "csv")
	if !strings.Contains(out, "analysis,0.50155") || !strings.Contains(out, ",0.00001,2,,0,add_remove,mu-GDP\n") {
		t.Fatalf("budget after init --epsilon:\n%s", out)
	}
}

func TestInitScopeFromEnvironment(t *testing.T) {
	t.Setenv("DPSQL_SCOPE", "fromenv")
	path := filepath.Join(t.TempDir(), "env.db")
	if out := mustRun(t, "init", path, "--mu", "1"); !strings.Contains(out, `scope "fromenv"`) {
		t.Fatalf("DPSQL_SCOPE ignored: %s", out)
	}
	if out := mustRun(t, "init", path, "--mu", "1", "--scope", "fromflag"); !strings.Contains(out, `scope "fromflag"`) {
		t.Fatalf("--scope does not override DPSQL_SCOPE: %s", out)
	}
}

func TestInitErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.db")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"not both", []string{"--mu", "1", "--epsilon", "2", "--delta", "1e-5"}},
		{"no budget given", nil},
		{"no budget given", []string{"--delta", "1e-5"}},
		{"--epsilon needs --delta", []string{"--epsilon", "2"}},
		{"mu must be a positive finite number, got -1", []string{"--mu", "-1"}},
		{"mu must be a positive finite number, got NaN", []string{"--mu", "NaN"}},
		{"mu must be a positive finite number, got 0", []string{"--mu", "0"}},
		{`dpsql: --mu: "abc" is not a number (see 'dpsql help init')` + "\n", []string{"--mu", "abc"}},
		{"delta must lie strictly between 0 and 1, got 2", []string{"--mu", "1", "--delta", "2"}},
		{"epsilon must be a positive finite number, got -3", []string{"--epsilon", "-3", "--delta", "1e-5"}},
		{"scope name must not be empty", []string{"--mu", "1", "--scope", ""}},
	} {
		mustFail(t, 2, tc.want, append([]string{"init", path}, tc.args...)...)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused init created the database file")
	}
	mustFail(t, 2, "missing DB", "init", "--mu", "1")
}

func TestInitNeighbours(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	out := mustRun(t, "init", path, "--mu", "2", "--scope", "rows", "--neighbours", "replace_one")
	if !strings.Contains(out, "neighbours = replace_one") {
		t.Fatalf("init --neighbours replace_one: %q", out)
	}
	mustFail(t, 2, "--neighbours must be add_remove or replace_one", "init", path, "--mu", "1", "--scope", "x", "--neighbours", "swap")
	audit := mustRun(t, "audit", path, "-f", "csv")
	if !strings.Contains(audit, `rows,budget,2,`) || !strings.Contains(audit, `replace_one`) {
		t.Fatalf("the budget event does not record the relation:\n%s", audit)
	}
}

func TestInitFileCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cap.db")
	if out := mustRun(t, "init", path, "--file-mu", "1"); !strings.Contains(out, "capped the total over every scope") {
		t.Fatalf("init --file-mu: %q", out)
	}
	mustRun(t, "init", path, "--mu", "1", "--scope", "a")
	mustRun(t, "init", path, "--mu", "1", "--scope", "b")
	mustRun(t, "query", path, "SELECT dp_gaussian(0, 1, 0.8)", "--scope", "a")
	mustFail(t, 1, "privacy budget exceeded for the whole file", "query", path, "SELECT dp_gaussian(0, 1, 0.8)", "--scope", "b")
	out := mustRun(t, "budget", path, "-f", "csv")
	if !strings.Contains(out, "\n*,1,0.8,") {
		t.Fatalf("budget shows no capped total:\n%s", out)
	}
	mustFail(t, 2, "--file-mu", "init", path, "--file-mu", "-1")
}
