package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestQueryFormats(t *testing.T) {
	db := newDB(t)
	q := `SELECT id, x, name, v FROM t ORDER BY id;`

	table := mustRun(t, "query", db, q)
	for _, want := range []string{"| id | x    | name | v              |", "|  1 |  1.5 | a    | <blob 4 bytes> |", "|  2 | 2.25 | b;c  | NULL           |", "|  3 | NULL | NULL | <blob 1 bytes> |"} {
		if !strings.Contains(table, want) {
			t.Errorf("table output lacks %q:\n%s", want, table)
		}
	}

	csv := mustRun(t, "query", db, q, "--format", "csv")
	if want := "id,x,name,v\n1,1.5,a,0000803f\n2,2.25,b;c,\n3,,,00\n"; csv != want {
		t.Errorf("csv output %q, want %q", csv, want)
	}

	out := mustRun(t, "query", db, q, "-f", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("json output does not parse: %v\n%s", err, out)
	}
	if len(rows) != 3 || rows[0]["v"] != "AACAPw==" || rows[1]["v"] != nil || rows[0]["x"] != 1.5 || rows[1]["name"] != "b;c" {
		t.Errorf("json rows %v", rows)
	}
}

func TestQueryFloatsAndEmpty(t *testing.T) {
	db := newDB(t)
	out := mustRun(t, "query", db, `SELECT 1.0/3 AS third, 1e-7 AS tiny, 123456789.125 AS big, 5000.0 AS round, 1e308*10 AS inf;`)
	for _, want := range []string{"0.3333333333", "1e-07", "123456789.1", "5000", "+Inf"} {
		if !strings.Contains(out, want) {
			t.Errorf("table floats lack %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "query", db, `SELECT 1.0/3 AS third, 1e-7 AS tiny, 123456789.125 AS big;`, "-f", "csv")
	if want := "third,tiny,big\n0.3333333333333333,1e-07,123456789.125\n"; out != want {
		t.Errorf("csv floats %q, want %q", out, want)
	}
	if out := mustRun(t, "query", db, `SELECT * FROM t WHERE 0`); !strings.Contains(out, "(no rows)") {
		t.Errorf("empty result: %q", out)
	}
	if out := mustRun(t, "query", db, `SELECT * FROM t WHERE 0`, "-f", "json"); out != "[]\n" {
		t.Errorf("empty json result: %q", out)
	}
}

func TestQueryMultipleStatements(t *testing.T) {
	db := newDB(t)
	out := mustRun(t, "query", db, `CREATE TABLE u(a TEXT);
INSERT INTO u VALUES ('x;y'), ('it''s');   -- a comment; with a semicolon
SELECT a FROM u ORDER BY a;
/* block; comment */ SELECT count(*) AS n FROM u`, "-f", "csv")
	if want := "a\nit's\nx;y\n\nn\n2\n"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	// A trigger body holds semicolons that do not end the statement.
	mustRun(t, "query", db, `CREATE TABLE log(msg TEXT);
CREATE TRIGGER u_log AFTER INSERT ON u BEGIN INSERT INTO log VALUES (new.a); INSERT INTO log VALUES ('again'); END;
INSERT INTO u VALUES ('z');`)
	if out := mustRun(t, "query", db, "SELECT count(*) AS n FROM log", "-f", "csv"); out != "n\n2\n" {
		t.Fatalf("trigger: %q", out)
	}
	// The first failing statement stops the rest and is named.
	r := mustFail(t, 1, "statement 2 (SELEC nonsense;)", "query", db, "INSERT INTO u VALUES ('before'); SELEC nonsense; INSERT INTO u VALUES ('after');")
	if !strings.Contains(r.stderr, "syntax error") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if out := mustRun(t, "query", db, "SELECT group_concat(a) AS a FROM u WHERE a IN ('before', 'after')", "-f", "csv"); out != "a\nbefore\n" {
		t.Fatalf("statements after the failure ran: %q", out)
	}
	mustFail(t, 2, "no SQL statement given", "query", db, " ;; -- nothing")
	mustFail(t, 1, "unrecognized token", "query", db, "SELECT 'unterminated")
}

func TestQueryFromStdin(t *testing.T) {
	db := newDB(t)
	r := run(t, "SELECT 40 + 2 AS answer;\n", "query", db, "-f", "csv")
	if r.code != 0 || r.stdout != "answer\n42\n" {
		t.Fatalf("stdin query: %+v", r)
	}
	r = run(t, "SELECT 7 AS seven;", "query", db, "-", "-f", "csv")
	if r.code != 0 || r.stdout != "seven\n7\n" {
		t.Fatalf("stdin query with -: %+v", r)
	}
}

func TestQueryDPAndBudget(t *testing.T) {
	db := newDB(t)
	out := mustRun(t, "query", db, "SELECT dp_gaussian(count(*), 1, 0.6) AS n FROM t", "-f", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "n" {
		t.Fatalf("noisy count output %q", out)
	}
	if _, err := strconv.ParseFloat(lines[1], 64); err != nil {
		t.Fatalf("noisy count %q: %v", lines[1], err)
	}
	// 0.6^2 + 0.9^2 > 1: refused, non-zero exit, the budget message, nothing printed.
	r := mustFail(t, 1, `privacy budget exceeded in scope "default"`, "query", db, "SELECT dp_gaussian(count(*), 1, 0.9) AS n FROM t")
	if r.stdout != "" {
		t.Fatalf("a refused query printed %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "nothing was released") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if out := mustRun(t, "budget", db, "-f", "csv"); !strings.Contains(out, "default,1,0.6,0.8,") {
		t.Fatalf("budget after one charge:\n%s", out)
	}
}

func TestQueryScope(t *testing.T) {
	db := newDB(t)
	mustRun(t, "init", db, "--mu", "2", "--scope", "other")
	mustRun(t, "query", db, "SELECT dp_gaussian(count(*), 1, 1.5) FROM t", "--scope", "other")
	out := mustRun(t, "budget", db, "-f", "csv")
	if !strings.Contains(out, "default,1,0,1,") || !strings.Contains(out, "other,2,1.5,") {
		t.Fatalf("--scope did not charge scope other:\n%s", out)
	}
	if out := mustRun(t, "query", db, "SELECT dp_scope() AS s", "-s", "other", "-f", "csv"); out != "s\nother\n" {
		t.Fatalf("dp_scope() = %q", out)
	}
	t.Setenv("DPSQL_SCOPE", "other")
	if out := mustRun(t, "query", db, "SELECT dp_scope() AS s", "-f", "csv"); out != "s\nother\n" {
		t.Fatalf("DPSQL_SCOPE: dp_scope() = %q", out)
	}
	mustFail(t, 1, `has no budget scope "typo"`, "query", db, "SELECT 1", "--scope", "typo")
}

// TestQueryProgressHook checks that each statement is reported to the
// progress hook and stopped.
func TestQueryProgressHook(t *testing.T) {
	db := newDB(t)
	var mu sync.Mutex
	var started, stopped []string
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Progress: func(label string) Task {
		mu.Lock()
		started = append(started, label)
		mu.Unlock()
		return &recordTask{stop: func() { mu.Lock(); stopped = append(stopped, label); mu.Unlock() }}
	}}
	if code := m.Exec(context.Background(), []string{"query", db, "SELECT 1; SELECT   2\n ;"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if len(started) != 2 || started[0] != "SELECT 1;" || started[1] != "SELECT 2 ;" || len(stopped) < 2 {
		t.Fatalf("progress: started %q, stopped %q", started, stopped)
	}
}

type recordTask struct {
	once sync.Once
	stop func()
}

func (r *recordTask) Set(string) {}
func (r *recordTask) Stop()      { r.once.Do(r.stop) }

// TestQueryReleaseProgress checks that a dp_avgmix release reports its rows to
// the progress display.
func TestQueryReleaseProgress(t *testing.T) {
	db := newDB(t)
	var mu sync.Mutex
	var statuses []string
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Progress: func(label string) Task {
		return &statusTask{set: func(s string) { mu.Lock(); statuses = append(statuses, s); mu.Unlock() }}
	}}
	setup := `CREATE TABLE train AS WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 4999)
		SELECT json_array(i % 7, i % 3) AS features, i % 2 AS label FROM c;`
	if code := m.Exec(context.Background(), []string{"query", db, setup}); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errb.String())
	}
	q := `SELECT dp_avgmix(features, label, json_object('n', 5000, 'into', 'rel', 'mu', 0.5, 'classes', 2)) FROM train`
	if code := m.Exec(context.Background(), []string{"query", db, q}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(statuses) == 0 || statuses[len(statuses)-1] != "dp_avgmix: 5000/5000 rows (100%)" {
		t.Errorf("progress statuses %q", statuses)
	}
}

type statusTask struct{ set func(string) }

func (s *statusTask) Set(v string) { s.set(v) }
func (s *statusTask) Stop()        {}
