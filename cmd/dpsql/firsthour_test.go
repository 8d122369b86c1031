package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/version"
)

// mustFailExactly runs a command that must fail with exit status code and
// exactly the message want on standard error.
func mustFailExactly(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	r := run(t, "", args...)
	if r.code != code || r.stderr != want {
		t.Errorf("dpsql %s:\n got  exit %d, %q\n want exit %d, %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
}

// TestUsageMistakesExit2 pins the usage messages issue 13 named, as they now
// read, and their exit status 2.
func TestUsageMistakesExit2(t *testing.T) {
	db := newDB(t)
	mustFailExactly(t, 2, "dpsql: unknown command \"nosuch\" (run 'dpsql help' for the list of commands)\n", "nosuch")
	// was "dpsql: dpsql query: missing DB"
	mustFailExactly(t, 2, "dpsql: query: missing DB (usage: dpsql query DB [SQL] [flags])\n", "query")
	mustFailExactly(t, 2, "dpsql: audit verify: missing DB (usage: dpsql audit verify DB [--head ID:HASH] [flags])\n", "audit", "verify")
	// was "... strconv.ParseFloat: parsing \"abc\": invalid syntax"
	mustFailExactly(t, 2, "dpsql: --mu: \"abc\" is not a number (see 'dpsql help init')\n", "init", db, "--mu", "abc")
	mustFailExactly(t, 2, "dpsql: --limit: \"x\" is not a whole number (see 'dpsql help audit')\n", "audit", db, "--limit", "x")
	mustFailExactly(t, 2, "dpsql: version: too many arguments: [\"x\"] (usage: dpsql version [flags])\n", "version", "x")
}

// TestVersionCommand: "dpsql version" exists (it is documented) and agrees
// with --version and dp_version().
func TestVersionCommand(t *testing.T) {
	out := mustRun(t, "version")
	want := "dpsql version " + version.Version + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if out != want {
		t.Errorf("dpsql version: %q, want %q", out, want)
	}
	if v := mustRun(t, "--version"); v != "dpsql version "+version.Version+"\n" {
		t.Errorf("dpsql --version: %q", v)
	}
}

// TestVerifyWithoutLedger: was "ledger verification failed after 0 good
// rows: the database has no dpsql ledger".
func TestVerifyWithoutLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain.db")
	mustRun(t, "import", path, "pts", writeFile(t, "p.csv", "1,2\n3,4\n"))
	mustFailExactly(t, 1, "dpsql: this database has no dpsql ledger, so there is nothing to verify (create one with `dpsql init DB --mu 1` or SELECT dp_init(1.0))\n", "audit", "verify", path)
}

// TestConfigKeysAndHelp: unknown config keys are errors; the help documents
// the configuration (DPSQL_CONFIG included) and that budgets come only from
// flags; each flag shows one default; --delta's default is explained next to
// --epsilon.
func TestConfigKeysAndHelp(t *testing.T) {
	db := newDB(t)
	cfg := writeFile(t, "typo.yaml", "fromat: csv\n")
	mustFailExactly(t, 1, "dpsql: config file "+cfg+": unknown key \"fromat\" (known keys: format, scope, history)\n", "budget", db, "--config", cfg)
	t.Setenv("DPSQL_CONFIG", cfg)
	mustFailExactly(t, 1, "dpsql: config file "+cfg+": unknown key \"fromat\" (known keys: format, scope, history)\n", "budget", db)
	t.Setenv("DPSQL_CONFIG", writeFile(t, "ok.yaml", "format: csv\nscope: default\nhistory: \"\"\n"))
	if out := mustRun(t, "budget", db); !strings.HasPrefix(out, "scope,mu_budget,") {
		t.Errorf("a config file with known keys: %q", out)
	}

	help := mustRun(t, "help")
	for _, want := range []string{
		"the environment variables DPSQL_FORMAT, DPSQL_SCOPE and DPSQL_HISTORY",
		"The config file is --config FILE, else $DPSQL_CONFIG, else\n  ./dpsql.yaml, else $XDG_CONFIG_HOME/dpsql/config.yaml",
		"A key the config file does not know is an error. Budgets (--mu, --epsilon,\n  --delta) come only from the command line",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("dpsql help lacks %q:\n%s", want, help)
		}
	}
	for _, cmd := range []string{"init", "query", "budget", "audit", "audit verify", "shell", "demo", "import", "version"} {
		h := mustRun(t, append(strings.Fields(cmd), "--help")...)
		for _, line := range strings.Split(h, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("dpsql %s --help shows two defaults: %q", cmd, line)
			}
		}
	}
	imp := mustRun(t, "import", "--help")
	if !regexp.MustCompile(`--scale float +multiply every value by this \(default: 1/255 for unsigned bytes, else 1\)\n`).MatchString(imp) {
		t.Errorf("import --scale help:\n%s", imp)
	}
	ini := mustRun(t, "init", "--help")
	for _, want := range []string{
		"--epsilon float       budget epsilon; give --delta with it (the default delta of 1e-05 applies only with --mu)\n",
		"--delta float         the budget's delta, where epsilon is reported and checked (required with --epsilon) (default 1e-05)\n",
	} {
		if !strings.Contains(ini, want) {
			t.Errorf("init --help lacks %q:\n%s", want, ini)
		}
	}
}

// TestReleaseSummaryDisplay: a release's JSON summary reads as a record, one
// field a line, in table mode, and nests as an object with --format json.
func TestReleaseSummaryDisplay(t *testing.T) {
	db := newDB(t)
	mustRun(t, "query", db, `CREATE TABLE train AS WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 199)
		SELECT json_array(i % 7, i % 3) AS features, i % 2 AS label FROM c`)
	q := func(into string) string {
		return `SELECT dp_avgmix(features, label, json_object('into', '` + into + `', 'mu', 0.2, 'classes', 2, 'm', 10)) AS summary FROM train`
	}
	table := mustRun(t, "query", db, q("r1"))
	if !regexp.MustCompile(`^summary\n(  [a-zA-Z_]+ +\S.*\n){10,}$`).MatchString(table) ||
		!strings.Contains(table, "\n  into                 r1\n") || !strings.Contains(table, "\n  m                    10\n") {
		t.Errorf("the summary in table mode is not a record:\n%s", table)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "query", db, q("r2"), "-f", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	s, ok := rows[0]["summary"].(map[string]any)
	if !ok || s["into"] != "r2" || s["m"] != 10.0 {
		t.Errorf("the summary in json mode is not a nested object: %#v", rows[0]["summary"])
	}
	// Ordinary text stays text, and a result of several rows stays a table.
	if out := mustRun(t, "query", db, `SELECT 'plain' AS a UNION ALL SELECT '{"x":1}'`); !strings.HasPrefix(out, "+---") {
		t.Errorf("two rows: %q", out)
	}
}

// TestDemoRemovesItsTemporaryDirectory: without DB the demo's directory is
// gone afterwards unless --keep; the closing hint names the kept database
// with the command that was run.
func TestDemoRemovesItsTemporaryDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out := mustRun(t, "demo")
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the demo left %v in the temporary directory", ents)
	}
	if !strings.Contains(out, "(removed at the end; to keep it, run: dpsql demo --keep)") ||
		!strings.HasSuffix(out, "\nThe temporary database is removed now. To explore one afterwards: dpsql demo --keep\n") {
		t.Errorf("demo without --keep:\n%s", out)
	}
	out = mustRun(t, "demo", "--keep")
	ents, _ := os.ReadDir(tmp)
	if len(ents) != 1 {
		t.Fatalf("demo --keep: %v in the temporary directory", ents)
	}
	path := filepath.Join(tmp, ents[0].Name(), "demo.db")
	if !strings.HasSuffix(out, "\nNext: dpsql shell "+path+"   (then .help, .budget, or your own SQL)\n") {
		t.Errorf("demo --keep hint:\n%s", out)
	}
	mustRun(t, "budget", path)
}

func TestSelfCommand(t *testing.T) {
	for _, tc := range []struct{ exe, want string }{
		{"/tmp/go-build3412/b001/exe/dpsql", "go run ./cmd/dpsql"}, // go run
		{"/home/me/go/bin/dpsql", "dpsql"},
		{"/tmp/go-build3412/b001/dpsql.test", "dpsql"},
		{"", "dpsql"},
	} {
		if got := selfCommand(tc.exe); got != tc.want {
			t.Errorf("selfCommand(%q) = %q, want %q", tc.exe, got, tc.want)
		}
	}
}

// TestHistoryFileMode: the shell's history file is created readable by its
// owner only, and an existing one others could read is narrowed.
func TestHistoryFileMode(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "h1")
	if err := prepareHistory(fresh); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "h2")
	os.WriteFile(old, []byte("SELECT 1\n"), 0o644)
	os.Chmod(old, 0o644) // whatever the umask
	if err := prepareHistory(old); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fresh, old} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", p, st.Mode().Perm(), err)
		}
	}
	if b, _ := os.ReadFile(old); string(b) != "SELECT 1\n" {
		t.Errorf("the existing history changed: %q", b)
	}
	if err := prepareHistory(""); err != nil {
		t.Errorf("no history: %v", err)
	}
}

// TestImportDelimiter: --delimiter reads CSV separated by another character.
func TestImportDelimiter(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.db")
	mustRun(t, "import", db, "semi", writeFile(t, "s.csv", "a;b;label\n1.5;2;0\n3;4.25;1\n"), "--delimiter", ";")
	mustRun(t, "import", db, "tabs", writeFile(t, "t.tsv", "1\t2\n3\t4\n"), "--delimiter", "tab")
	got := readTable(t, db, "semi")
	if len(got) != 2 || got[1].features[1] != 4.25 || got[1].label != label(1) {
		t.Errorf("semicolon CSV: %+v", got)
	}
	if got := readTable(t, db, "tabs"); len(got) != 2 || got[1].features[0] != 3 {
		t.Errorf("tab CSV: %+v", got)
	}
	csvFile := writeFile(t, "c.csv", "1,2\n")
	mustFailExactly(t, 2, "dpsql: import: --delimiter must be one character that cannot occur in a number (e.g. ';', '|' or tab), got \"ab\"\n", "import", db, "x", csvFile, "--delimiter", "ab")
	mustFailExactly(t, 2, "dpsql: import: --delimiter must be one character that cannot occur in a number (e.g. ';', '|' or tab), got \".\"\n", "import", db, "x", csvFile, "--delimiter", ".")
	npy := writeBytes(t, "a.npy", npyBytes("<f4", []int{1, 1}, []byte{0, 0, 0, 0}))
	mustFailExactly(t, 2, "dpsql: import: --delimiter is for CSV files; this one is npy\n", "import", db, "x", npy, "--delimiter", ";")
}

// TestStatementChargesInCLI: the command line shows the whole message of a
// statement whose later DP call failed after an earlier one was charged.
func TestStatementChargesInCLI(t *testing.T) {
	db := newDB(t)
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	code := m.Exec(context.Background(), []string{"query", db, "SELECT dp_gaussian(count(*),1,0.1), dp_gaussian(count(*),1,-1) FROM t"})
	want := "dpsql: dp_gaussian: mu must be > 0, got -1; this statement had already committed 1 charge, which stands: ledger row 2 (dp_gaussian, mu = 0.1)\n"
	if code != 1 || errb.String() != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, errb.String(), want)
	}
}
