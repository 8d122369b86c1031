package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	_ "github.com/mattn/go-sqlite3"
)

// ledgerDB makes a database with three charges in two scopes.
func ledgerDB(t *testing.T) string {
	t.Helper()
	db := newDB(t)
	mustRun(t, "init", db, "--mu", "1", "--scope", "b")
	mustRun(t, "query", db, "SELECT dp_gaussian(count(*), 1, 0.5) FROM t")
	mustRun(t, "query", db, "SELECT dp_gaussian(sum(x), 10, 0.25) FROM t", "--scope", "b")
	mustRun(t, "query", db, "SELECT dp_gaussian(1.0, 2, 0.5) AS third")
	return db
}

func TestAuditList(t *testing.T) {
	db := ledgerDB(t)
	table := mustRun(t, "audit", db)
	for _, want := range []string{
		"| id | at                   | scope   | mechanism | cost    | params",
		"| default | budget    | mu 1    | delta=1e-05 mu_budget=1 neigh… | NULL ",
		"| default | gaussian  | mu 0.5  | sensitivity=1 sigma=2 dim=1    | SELECT dp_gaussian(count(*), 1, 0… |",
		"| b       | gaussian  | mu 0.25 | sensitivity=10 sigma=40 dim=1",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("audit table lacks %q:\n%s", want, table)
		}
	}
	// The shortened time keeps the Z that says it is UTC.
	if !regexp.MustCompile(`\|  1 \| 20\d\d-\d\d-\d\d \d\d:\d\d:\d\dZ \| default `).MatchString(table) {
		t.Errorf("audit table times lack their Z:\n%s", table)
	}

	var rows []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "audit", db, "-f", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 { // two budget events, three charges
		t.Fatalf("%d rows, want 5", len(rows))
	}
	if b, ok := rows[1]["params"].(map[string]any); !ok || rows[1]["mechanism"] != "budget" || b["mu_budget"] != 1.0 || b["neighbours"] != "add_remove" {
		t.Fatalf("json budget event: %v", rows[1])
	}
	params, ok := rows[3]["params"].(map[string]any)
	if !ok || params["mechanism"] != "gaussian" || params["sensitivity"] != 10.0 || params["mu"] != 0.25 {
		t.Fatalf("json params: %v", rows[1]["params"])
	}
	if h := rows[0]["hash"].(string); len(h) != 64 {
		t.Fatalf("json hash %q is not the full hash", h)
	}
	if q := rows[3]["query"]; q != "SELECT dp_gaussian(sum(x), 10, 0.25) FROM t" {
		t.Fatalf("json query %q", q)
	}

	csv := mustRun(t, "audit", db, "--scope", "b", "-f", "csv")
	if n := strings.Count(csv, "\n"); n != 3 || !strings.Contains(csv, ",b,gaussian,0.25,") {
		t.Fatalf("audit --scope b:\n%s", csv)
	}
	csv = mustRun(t, "audit", db, "--limit", "1", "-f", "csv")
	if n := strings.Count(csv, "\n"); n != 2 || !strings.HasPrefix(strings.Split(csv, "\n")[1], "5,") {
		t.Fatalf("audit --limit 1:\n%s", csv)
	}
	mustFail(t, 2, "--limit must be >= 0", "audit", db, "--limit", "-1")
	if out := mustRun(t, "audit", db, "--scope", "nobody"); !strings.Contains(out, "(no rows)") {
		t.Fatalf("audit of an empty scope: %s", out)
	}
}

func TestAuditVerify(t *testing.T) {
	db := ledgerDB(t)
	if out := mustRun(t, "audit", "verify", db); !strings.HasPrefix(out, "ledger OK: 5 rows, chain intact (charges: 3, budget events: 2)") {
		t.Fatalf("verify: %q", out)
	}

	// Tamper: lower the mu of row 2 behind the ledger's back.
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER dp_ledger_no_update`, `UPDATE dp_ledger SET mu = 0.01 WHERE id = 4`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	r := mustFail(t, 1, "ledger hash chain broken at row 4", "audit", "verify", db)
	if r.stdout != "" || !strings.Contains(r.stderr, "after 3 good rows") {
		t.Fatalf("tampered verify: %+v", r)
	}
}

func TestAuditVerifyEmptyLedger(t *testing.T) {
	db := newDB(t)
	if out := mustRun(t, "audit", "verify", db); !strings.HasPrefix(out, "ledger OK: 1 rows, chain intact (charges: 0, budget events: 1)") {
		t.Fatalf("verify of an empty ledger: %q", out)
	}
	mustFail(t, 2, "missing DB", "audit", "verify")
}

func TestAuditHeadAndVerifyHead(t *testing.T) {
	db := ledgerDB(t)
	head := strings.TrimSuffix(mustRun(t, "audit", "head", db), "\n")
	if len(head) != 2+64 || !strings.HasPrefix(head, "5:") || strings.ToLower(head) != head {
		t.Fatalf("audit head printed %q, want 5:<64 lowercase hex>", head)
	}
	if out := mustRun(t, "audit", "verify", db, "--head", head); !strings.Contains(out, "head "+head+"\n") {
		t.Fatalf("verify --head: %q", out)
	}
	mustFail(t, 2, "is not ID:HASH", "audit", "verify", db, "--head", "5:xyz")

	// Delete the tail behind the ledger's back: the chain still links, but
	// the kept head is gone.
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER dp_ledger_no_delete`, `DELETE FROM dp_ledger WHERE id = 5`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	mustFail(t, 1, "does not contain the kept head "+head, "audit", "verify", db, "--head", head)
}

func TestAuditHeadEmptyLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(ledger.Schema); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "audit", "head", path); out != "0:"+strings.Repeat("0", 64)+"\n" {
		t.Fatalf("head of an empty ledger: %q", out)
	}
}
