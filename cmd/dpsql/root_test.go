package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain isolates the tests from the user's configuration and history.
func TestMain(m *testing.M) {
	if os.Getenv(asDpsqlEnv) == "1" { // a copy of this binary run as the dpsql command (readonly_test.go)
		os.Exit(NewMain().Exec(context.Background(), os.Args[1:]))
	}
	if path := os.Getenv("DPSQL_TEST_HOLD_LOCK"); path != "" {
		holdWriteLock(path) // the other process of TestLockWaitMessage
		os.Exit(0)
	}
	home, err := os.MkdirTemp("", "dpsql-test-home-")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DPSQL_") {
			os.Unsetenv(k)
		}
	}
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// run executes one dpsql command line in-process with stdin as input.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb}
	code := m.Exec(context.Background(), args)
	return result{code, out.String(), errb.String()}
}

// mustRun runs a command that must succeed and returns its standard output.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	r := run(t, "", args...)
	if r.code != 0 {
		t.Fatalf("dpsql %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// mustFail runs a command that must fail with the given exit status and an
// error message containing want.
func mustFail(t *testing.T, code int, want string, args ...string) result {
	t.Helper()
	r := run(t, "", args...)
	if r.code != code {
		t.Fatalf("dpsql %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "dpsql: ") || !strings.Contains(r.stderr, want) {
		t.Fatalf("dpsql %s: stderr %q, want \"dpsql: ...%s...\"", strings.Join(args, " "), r.stderr, want)
	}
	return r
}

// newDB creates a database with a budget of mu = 1 and a small table t.
func newDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	mustRun(t, "init", path, "--mu", "1")
	mustRun(t, "query", path, `CREATE TABLE t(id INTEGER PRIMARY KEY, x REAL, name TEXT, v BLOB);
INSERT INTO t VALUES (1, 1.5, 'a', x'0000803f'), (2, 2.25, 'b;c', NULL), (3, NULL, NULL, x'00');`)
	return path
}

func TestHelpAndVersion(t *testing.T) {
	out := mustRun(t, "--help")
	for _, c := range []string{"init", "query", "budget", "audit", "shell", "demo", "import"} {
		if !strings.Contains(out, c) {
			t.Errorf("help lacks %s:\n%s", c, out)
		}
	}
	if out := mustRun(t, "--version"); !strings.Contains(out, "0.") {
		t.Errorf("--version printed %q", out)
	}
}

func TestUsageErrors(t *testing.T) {
	db := newDB(t)
	mustFail(t, 2, `unknown command "nosuch"`, "nosuch")
	mustFail(t, 2, "unknown flag: --nosuch", "budget", db, "--nosuch")
	mustFail(t, 2, "missing DB", "budget")
	mustFail(t, 2, "too many arguments", "budget", db, "extra")
	mustFail(t, 2, `unknown output format "xml"`, "budget", db, "--format", "xml")
}

func TestMissingDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.db")
	for _, args := range [][]string{
		{"budget", missing}, {"audit", missing}, {"audit", "verify", missing},
		{"query", missing, "SELECT 1"}, {"shell", missing},
	} {
		mustFail(t, 1, "no database file at "+missing, args...)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a read command created the database file")
	}
	mustFail(t, 1, "is a directory", "budget", t.TempDir())
	notDB := filepath.Join(t.TempDir(), "text.db")
	os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 100)), 0o644)
	mustFail(t, 1, "not a database", "budget", notDB)
}

func TestNoLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain.db")
	mustRun(t, "import", path, "pts", writeFile(t, "p.csv", "1,2\n3,4\n"))
	mustFail(t, 1, "no dpsql ledger", "budget", path)
	mustFail(t, 1, "no dpsql ledger", "audit", path)
	mustFail(t, 1, "no dpsql ledger", "query", path, "SELECT dp_gaussian(count(*), 1, 0.5) FROM pts")
	if out := mustRun(t, "query", path, "SELECT count(*) AS n FROM pts", "-f", "csv"); out != "n\n2\n" {
		t.Fatalf("plain SQL on a database without a ledger: %q", out)
	}
}

// TestConfigPrecedence checks flag > environment > config file > default.
func TestConfigPrecedence(t *testing.T) {
	db := newDB(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfg, []byte("format: csv\n"), 0o644)

	isTable := func(s string) bool { return strings.HasPrefix(s, "+---") }
	isCSV := func(s string) bool { return strings.HasPrefix(s, "scope,mu_budget") }
	isJSON := func(s string) bool { return strings.HasPrefix(s, "[\n  {\"scope\"") }

	if out := mustRun(t, "budget", db); !isTable(out) {
		t.Fatalf("default format: %q", out)
	}
	if out := mustRun(t, "budget", db, "--config", cfg); !isCSV(out) {
		t.Fatalf("config file format: %q", out)
	}
	t.Setenv("DPSQL_FORMAT", "json")
	if out := mustRun(t, "budget", db, "--config", cfg); !isJSON(out) {
		t.Fatalf("environment over config: %q", out)
	}
	if out := mustRun(t, "budget", db, "--config", cfg, "--format", "table"); !isTable(out) {
		t.Fatalf("flag over environment: %q", out)
	}
	t.Setenv("DPSQL_FORMAT", "")

	// Default config file locations: $XDG_CONFIG_HOME/dpsql/config.yaml.
	xdg := t.TempDir()
	os.MkdirAll(filepath.Join(xdg, "dpsql"), 0o755)
	os.WriteFile(filepath.Join(xdg, "dpsql", "config.yaml"), []byte("format: csv\n"), 0o644)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	if out := mustRun(t, "budget", db); !isCSV(out) {
		t.Fatalf("XDG config file: %q", out)
	}
	// DPSQL_CONFIG names another file.
	t.Setenv("DPSQL_CONFIG", writeFile(t, "other.yaml", "format: json\n"))
	if out := mustRun(t, "budget", db); !isJSON(out) {
		t.Fatalf("DPSQL_CONFIG: %q", out)
	}
	mustFail(t, 1, "reading config file", "budget", db, "--config", filepath.Join(dir, "missing.yaml"))
	mustFail(t, 1, "reading config file", "budget", db, "--config", writeFile(t, "bad.yaml", "format: [csv\n"))
}

// TestBudgetNotFromConfig checks that a config file cannot set a budget.
func TestBudgetNotFromConfig(t *testing.T) {
	cfg := writeFile(t, "cfg.yaml", "mu: 5\nscope: fromfile\n")
	db := filepath.Join(t.TempDir(), "x.db")
	r := run(t, "", "init", db, "--config", cfg, "--mu", "1")
	if want := "dpsql: config file " + cfg + ": \"mu\" cannot be set in a config file: budgets are given only on the command line (--mu, or --epsilon and --delta)\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("config file with a budget: exit %d, stderr %q; want 1, %q", r.code, r.stderr, want)
	}
	cfg = writeFile(t, "cfg.yaml", "scope: fromfile\n")
	t.Setenv("DPSQL_MU", "5")
	r = run(t, "", "init", db, "--config", cfg)
	if want := "dpsql: init: no budget given: use --mu MU (e.g. --mu 1) or --epsilon E --delta D (or --file-mu MU to cap the file's total) (DPSQL_MU is ignored: budgets come only from the command line)\n"; r.code != 2 || r.stderr != want {
		t.Fatalf("DPSQL_MU: exit %d, stderr %q; want 2, %q", r.code, r.stderr, want)
	}
	out := mustRun(t, "init", db, "--config", cfg, "--mu", "1")
	if !strings.Contains(out, `scope "fromfile"`) {
		t.Fatalf("scope from the config file not used: %q", out)
	}
}

// writeFile writes a file in a temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
