package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShellAvgmix: dp_avgmix end to end in the sqlite3 shell, whose SQLite
// (Debian 12's 3.40.1) has no sqlite3_is_interrupted, so the release's writes,
// made by avgmix's workers, look for an interrupt through the statement's own
// goroutine (sqlfuncs' writeOffStatement). The release must finish within
// the time limit, write its 3000 rows, charge once and leave a ledger that
// verifies.
func TestShellAvgmix(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 3000-row release in the sqlite3 shell (about 20 s); TestPythonAvgmix runs in -short")
	}
	dir := built(t)
	path := filepath.Join(t.TempDir(), "avgmix.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sqliteShell(t), path)
	cmd.Stdin = strings.NewReader("PRAGMA journal_mode=WAL;\n" + load(dir) + `
SELECT dp_init(3.0);
CREATE TABLE train AS WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 2999)
	SELECT json_array((i % 7) / 10.0, (i % 3) / 10.0, (i % 5) / 10.0) AS features, i % 3 AS label FROM c;
SELECT 'ok=' || (dp_avgmix(features, label, json_object('n', 3000, 'classes', 3, 'into', 'rel', 'mu', 1.0, 'T', 3000)) IS NOT NULL) FROM train;
SELECT 'rows=' || count(*) FROM rel;
`)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the sqlite3 shell still ran dp_avgmix after 2 minutes (hung); stdout:\n%s\nstderr:\n%s", o.String(), e.String())
	}
	if err != nil || field(t, o.String(), "ok=") != "1" || field(t, o.String(), "rows=") != "3000" {
		t.Fatalf("dp_avgmix in the shell: %v\nstdout:\n%s\nstderr:\n%s", err, o.String(), e.String())
	}
	if n := count(t, path, charges); n != 1 {
		t.Errorf("%d charges after one release, want 1", n)
	}
	auditVerify(t, dir, path)
}

// TestPythonAvgmix: the same in Python's sqlite3 module (/usr/bin/python3 on
// Debian 12's SQLite 3.40.1), whose connections SQLite serialises with a
// mutex that the running statement holds: a probe of the statement's
// interrupt run by a release worker waited for it forever.
func TestPythonAvgmix(t *testing.T) {
	dir := built(t)
	py := python(t)
	path := filepath.Join(t.TempDir(), "py.db")
	script := `
import sqlite3, sys
path, ext = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.enable_load_extension(True)
conn.load_extension(ext)
conn.enable_load_extension(False)
print("sqlite=" + sqlite3.sqlite_version)
conn.execute("SELECT dp_init(3.0)")
conn.execute("CREATE TABLE train AS WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 2999) SELECT json_array((i % 7) / 10.0, (i % 3) / 10.0, (i % 5) / 10.0) AS features, i % 3 AS label FROM c")
conn.execute("SELECT dp_avgmix(features, label, json_object('n', 3000, 'classes', 3, 'into', 'rel', 'mu', 1.0, 'T', 3000)) FROM train").fetchone()
print("rows=%d" % conn.execute("SELECT count(*) FROM rel").fetchone()[0])
conn.close()
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := exec.CommandContext(ctx, py, "-c", script, path, filepath.Join(dir, "dp0")).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("python still ran dp_avgmix after 2 minutes (hung):\n%s", o)
	}
	if err != nil || field(t, string(o), "rows=") != "3000" {
		t.Fatalf("python: %v\n%s", err, o)
	}
	t.Logf("Python's SQLite %s", field(t, string(o), "sqlite="))
	if n := count(t, path, charges); n != 1 {
		t.Errorf("%d charges after one release, want 1", n)
	}
	auditVerify(t, dir, path)
}
