package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// What an analyst sees of DATE and BOOLEAN group keys: the value as SQLite
// stores it ("2024-01-02", 1), in the CLI's table and json and in the
// service's JSON, never the Go driver's 2024-01-02T00:00:00Z or true.
func TestDeclaredTypeKeysShown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "events.db")
	mustRun(t, "init", db, "--mu", "4")
	mustRun(t, "query", db, `CREATE TABLE events (pid INTEGER, day DATE, member BOOLEAN);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 1200)
INSERT INTO events SELECT i, CASE WHEN i % 2 THEN '2024-01-02' ELSE '2024-01-03' END, i % 3 = 0 FROM s;`)
	mustRun(t, "protect", db, "events", "--privacy-unit", "pid")
	const stmt = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) day, member, COUNT(*) AS n FROM events
GROUP BY day, member ORDER BY day, member`
	check := func(what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, out)
			}
		}
		if strings.Contains(out, "T00:00:00Z") || strings.Contains(out, "true") || strings.Contains(out, "false") {
			t.Errorf("%s shows the driver's time or bool:\n%s", what, out)
		}
	}
	check("dpsql query --analyst", mustRun(t, "query", "--analyst", db, stmt), "| 2024-01-02 |      0 |", "| 2024-01-03 |      1 |")
	check("dpsql query --analyst -f json", mustRun(t, "query", "--analyst", db, stmt, "-f", "json"),
		`{"day": "2024-01-02", "member": 0, "n": `, `{"day": "2024-01-03", "member": 1, "n": `)

	tok := strings.TrimSpace(mustRun(t, "analyst", "add", db, "alice", "--scope", "default"))
	url := startServe(t, db, "--listen", "127.0.0.1:0")
	req, _ := http.NewRequestWithContext(context.Background(), "POST", url+"/v1/query",
		strings.NewReader(`{"sql": "`+strings.ReplaceAll(stmt, "\n", " ")+`"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check("POST /v1/query", string(body), `"columns":["day","member","n"]`, `["2024-01-02",0,`, `["2024-01-03",1,`)
	t.Setenv(tokenEnv, tok)
	check("dpsql query --remote -f csv", mustRun(t, "query", "--remote", url, stmt, "-f", "csv"), "day,member,n\n2024-01-02,0,")
}
