package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the tests read the files the hosts wrote
)

// These tests load dp0 into the real hosts: Debian's sqlite3 shell and
// /usr/bin/python3 (the pyenv python3 on PATH is built without
// enable_load_extension). Outside CI a missing host skips its test; under
// CI=true it fails it.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// built returns the directory holding dp0.so and dpsql, built once for the
// test binary.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "dp0-build-")
		if buildErr != nil {
			return
		}
		for _, args := range [][]string{
			{"build", "-buildmode=c-shared", "-o", filepath.Join(buildDir, "dp0.so"), "."},
			{"build", "-o", filepath.Join(buildDir, "dpsql"), "../dpsql"},
		} {
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// need returns the host program at path, failing under CI and skipping
// elsewhere when it is missing.
func need(t *testing.T, path, install string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (%v): apt-get install -y %s", path, err, install)
		}
		t.Skipf("%s is missing (apt-get install -y %s); under CI=true this fails", path, install)
	}
	return path
}

func sqliteShell(t *testing.T) string { return need(t, "/usr/bin/sqlite3", "sqlite3") }

func python(t *testing.T) string {
	t.Helper()
	py := need(t, "/usr/bin/python3", "python3")
	out, err := exec.Command(py, "-c", "import sqlite3; sqlite3.connect(':memory:').enable_load_extension(True)").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot load SQLite extensions: %v\n%s", py, err, out)
	}
	return py
}

// shell runs script in the sqlite3 shell on db and returns its standard
// output and error (the shell goes on after a failed statement).
func shell(t *testing.T, db, script string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(sqliteShell(t), db)
	cmd.Stdin = strings.NewReader(script)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Run() // its exit status reflects the refusals the tests provoke
	return o.String(), e.String()
}

func load(dir string) string { return ".load " + filepath.Join(dir, "dp0") + "\n" }

// count runs a one-number query on the file through go-sqlite3.
func count(t *testing.T, path, q string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func auditVerify(t *testing.T, dir, path string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(dir, "dpsql"), "audit", "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("dpsql audit verify: %v\n%s", err, out)
	}
}

const charges = `SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`

// The spine in the sqlite3 shell: dp_init, a noisy count charged, a refusal
// over budget that prints nothing and charges nothing, the ledger verified
// by dpsql.
func TestShellSpine(t *testing.T) {
	dir := built(t)
	path := filepath.Join(t.TempDir(), "spine.db")
	// Loaded twice: the second load finds dpsql already there.
	out, errs := shell(t, path, "PRAGMA journal_mode=WAL;\n"+load(dir)+load(dir)+`
SELECT dp_init(1.0);
CREATE TABLE t(x);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO t SELECT i FROM n;
SELECT 'v=' || dp_gaussian(count(*), 1, 0.6) FROM t;
SELECT 'refused=' || dp_gaussian(count(*), 1, 0.9) FROM t;
SELECT 'charges=' || count(*) FROM dp_ledger WHERE kind = 'charge';
`)
	if !strings.Contains(errs, "privacy budget exceeded") || !strings.Contains(errs, "nothing was released") {
		t.Errorf("the over-budget call did not fail with the refusal; stderr:\n%s", errs)
	}
	if strings.Contains(out, "refused=") {
		t.Errorf("the refused call printed a value:\n%s", out)
	}
	v := field(t, out, "v=")
	if x, err := strconv.ParseFloat(v, 64); err != nil || math.Abs(x-500) > 20 {
		t.Errorf("noisy count %q: want about 500 (sd 1/0.6)", v)
	}
	if got := field(t, out, "charges="); got != "1" {
		t.Errorf("charges after one release and one refusal: %s, want 1", got)
	}
	auditVerify(t, dir, path)
}

// field returns the value printed after prefix on a line of out.
func field(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	t.Fatalf("no line %q... in the output:\n%s", prefix, out)
	return ""
}

// The spine in Python's sqlite3: the noisy value, handed to a Python
// function, finds its charge already committed (read through a second
// connection); the refusal raises and charges nothing; closing the
// connection closes the ledger's.
func TestPythonSpine(t *testing.T) {
	dir := built(t)
	py := python(t)
	path := filepath.Join(t.TempDir(), "py.db")
	script := `
import sqlite3, sys, json
path, ext = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.enable_load_extension(True)
conn.load_extension(ext)
conn.enable_load_extension(False)
def committed(v):
    other = sqlite3.connect(path)
    n = other.execute("SELECT count(*) FROM dp_ledger WHERE kind = 'charge'").fetchone()[0]
    other.close()
    return json.dumps([v, n])
conn.create_function("committed", 1, committed)
conn.execute("SELECT dp_init(1.0)")
conn.execute("CREATE TABLE t(x)")
conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(300)])
out = {}
out["first"] = json.loads(conn.execute("SELECT committed(dp_gaussian(count(*), 1, 0.6)) FROM t").fetchone()[0])
try:
    conn.execute("SELECT dp_gaussian(count(*), 1, 0.9) FROM t").fetchone()
    out["refusal"] = None
except sqlite3.Error as e:
    out["refusal"] = str(e)
out["charges"] = conn.execute("SELECT count(*) FROM dp_ledger WHERE kind = 'charge'").fetchone()[0]
conn.close()
import os
out["wal_left"] = os.path.exists(path + "-wal")
print(json.dumps(out))
`
	cmd := exec.Command(py, "-c", script, path, filepath.Join(dir, "dp0"))
	o, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, o)
	}
	s := string(o)
	// {"first": [value, charges seen], "refusal": "...", "charges": n}
	var first0 float64
	var seen, total int
	if _, err := fmt.Sscanf(s[strings.Index(s, "[")+1:], "%g, %d]", &first0, &seen); err != nil {
		t.Fatalf("python output %q: %v", s, err)
	}
	if math.Abs(first0-300) > 20 {
		t.Errorf("noisy count %g, want about 300", first0)
	}
	if seen != 1 {
		t.Errorf("when the noisy value reached Python, a second connection saw %d charges, want 1 (charge before release)", seen)
	}
	if !strings.Contains(s, "privacy budget exceeded") {
		t.Errorf("no refusal over budget: %s", s)
	}
	if _, err := fmt.Sscanf(s[strings.Index(s, `"charges": `)+len(`"charges": `):], "%d", &total); err != nil || total != 1 {
		t.Errorf("charges at the end: %d (%v), want 1", total, err)
	}
	// Closing the host's connection closed the ledger's too (dp0_loaded's
	// destructor), so the last of them checkpointed the WAL and removed it.
	if !strings.Contains(s, `"wal_left": false`) {
		t.Errorf("a -wal file is left after the host closed its connection: %s", s)
	}
	auditVerify(t, dir, path)
}

// A file in rollback-journal mode: charging is refused, saying how to
// switch, and nothing is written; after PRAGMA journal_mode=WAL it works.
func TestWALRefusal(t *testing.T) {
	dir := built(t)
	path := filepath.Join(t.TempDir(), "rollback.db")
	out, errs := shell(t, path, load(dir)+`
CREATE TABLE t(x);
SELECT 'init=' || dp_init(1.0);
SELECT 'v=' || dp_gaussian(1, 1, 0.5);
SELECT 'ledger=' || count(*) FROM sqlite_master WHERE name = 'dp_ledger';
`)
	if !strings.Contains(errs, "PRAGMA journal_mode=WAL") || !strings.Contains(errs, "not in WAL mode") {
		t.Errorf("rollback-journal file: stderr does not say to switch to WAL:\n%s", errs)
	}
	if strings.Contains(out, "init=") || strings.Contains(out, "v=") {
		t.Errorf("something was released or initialised in rollback mode:\n%s", out)
	}
	if got := field(t, out, "ledger="); got != "0" {
		t.Errorf("a ledger was created in rollback mode")
	}
	out, errs = shell(t, path, "PRAGMA journal_mode=WAL;\n"+load(dir)+`
SELECT 'init=' || dp_init(1.0);
SELECT 'v=' || dp_gaussian(1, 1, 0.5);
`)
	if errs != "" {
		t.Errorf("after switching to WAL: %s", errs)
	}
	field(t, out, "v=")
	if n := count(t, path, charges); n != 1 {
		t.Errorf("%d charges after one release, want 1", n)
	}
}

// In an in-memory database dp0 loads, its pure functions work, and a noisy
// call fails clearly: a ledger needs a file.
func TestMemoryDatabase(t *testing.T) {
	dir := built(t)
	out, errs := shell(t, ":memory:", load(dir)+`
SELECT 'version=' || dp_version();
SELECT 'eps=' || round(gdp_epsilon(1, 1e-5), 3);
SELECT 'init=' || dp_init(1.0);
SELECT 'v=' || dp_gaussian(1, 1, 0.5);
`)
	field(t, out, "version=")
	// The root in epsilon of Phi(-eps + 1/2) - e^eps Phi(-eps - 1/2) = 1e-5
	// (Dong, Roth and Su, arXiv:1905.02383, Corollary 2.13), by bisection
	// with Python's math.erfc: 4.377178.
	if got := field(t, out, "eps="); got != "4.377" {
		t.Errorf("gdp_epsilon(1, 1e-5) = %s, want 4.377", got)
	}
	if strings.Contains(out, "v=") || strings.Contains(out, "init=") {
		t.Errorf("a noisy value or a ledger without a file:\n%s", out)
	}
	if !strings.Contains(errs, "database file") {
		t.Errorf("in-memory charge: stderr does not say a file is needed:\n%s", errs)
	}
}

// One process charging through dp0 (the sqlite3 shell) and one through the
// dpsql command, on the same file at once: together they stop exactly at the
// budget (100 charges of mu = 0.1 in mu = 1), never over, and every refusal
// is the budget's.
func TestShellAndDpsqlShareTheBudget(t *testing.T) {
	dir := built(t)
	path := filepath.Join(t.TempDir(), "shared.db")
	if out, err := exec.Command(filepath.Join(dir, "dpsql"), "init", path, "--mu", "1").CombinedOutput(); err != nil {
		t.Fatalf("dpsql init: %v\n%s", err, out)
	}
	const each = 80
	var script strings.Builder
	script.WriteString(load(dir))
	for i := 0; i < each; i++ {
		script.WriteString("SELECT 'v=' || dp_gaussian(1, 1, 0.1);\n")
	}
	var wg sync.WaitGroup
	var shellOut, shellErr string
	var dpsqlOut []byte
	wg.Add(2)
	go func() {
		defer wg.Done()
		shellOut, shellErr = shell(t, path, script.String())
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < each; i++ {
			o, err := exec.Command(filepath.Join(dir, "dpsql"), "query", path, "SELECT 'v=' || dp_gaussian(1, 1, 0.1) AS v", "-f", "csv").CombinedOutput()
			dpsqlOut = append(dpsqlOut, o...)
			if err != nil {
				break
			}
		}
	}()
	wg.Wait()
	fromShell := strings.Count(shellOut, "v=")
	fromDpsql := strings.Count(string(dpsqlOut), "v=")
	if fromShell+fromDpsql != 100 {
		t.Errorf("%d values through dp0 and %d through dpsql: %d in all, want exactly 100", fromShell, fromDpsql, fromShell+fromDpsql)
	}
	if fromShell == 0 || fromDpsql == 0 {
		t.Errorf("one side charged nothing (%d, %d): the test did not interleave", fromShell, fromDpsql)
	}
	if n := count(t, path, charges); n != 100 {
		t.Errorf("%d charges in the ledger, want 100", n)
	}
	refusals := strings.Count(shellErr, "privacy budget exceeded")
	if want := each - fromShell; refusals != want {
		t.Errorf("the shell saw %d refusals for %d calls not released: stderr\n%s", refusals, want, shellErr)
	}
	if !strings.Contains(string(dpsqlOut), "privacy budget exceeded") {
		t.Errorf("dpsql's last call was not refused by the budget:\n%s", lastLines(string(dpsqlOut), 3))
	}
	auditVerify(t, dir, path)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// The host killed with SIGKILL right after it printed a noisy value: the
// charge for that value is in the ledger, which still verifies.
func TestSIGKILLAfterPrintKeepsTheCharge(t *testing.T) {
	dir := built(t)
	path := filepath.Join(t.TempDir(), "kill.db")
	shell(t, path, "PRAGMA journal_mode=WAL;\n"+load(dir)+"SELECT dp_init(1.0);\n")
	cmd := exec.Command(sqliteShell(t), path)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(in, load(dir)+"SELECT 'v=' || dp_gaussian(1, 1, 0.3);\n")
	r := bufio.NewReader(outp)
	line := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		line <- l
	}()
	var got string
	select {
	case got = <-line:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the shell printed nothing in 60 s")
	}
	// Killed at once, the host holding stdin open: no exit, no close.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	in.Close()
	io.Copy(io.Discard, r)
	if !strings.HasPrefix(got, "v=") {
		t.Fatalf("the shell printed %q, want a noisy value", got)
	}
	if n := count(t, path, charges); n != 1 {
		t.Errorf("after the kill the ledger holds %d charges, want the 1 whose value was printed", n)
	}
	auditVerify(t, dir, path)
}
