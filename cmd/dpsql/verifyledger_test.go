package main

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"
)

// systemPython is the interpreter the standalone verifier is tested with:
// Debian's, whose sqlite3 module is the standard library's.
const systemPython = "/usr/bin/python3"

// verifierScript is tools/verify_ledger.py, from this package's directory.
var verifierScript = filepath.Join("..", "..", "tools", "verify_ledger.py")

// pyVerify runs the standalone verifier on db with extra arguments.
func pyVerify(t *testing.T, db string, extra ...string) result {
	t.Helper()
	cmd := exec.Command(systemPython, append([]string{verifierScript, db}, extra...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", systemPython, err)
	}
	return result{code, out.String(), errb.String()}
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is absent under CI (%v): .ci/run installs it, and the standalone verifier is tested with it", systemPython, err)
		}
		t.Skipf("%s is absent (%v, outside CI): the standalone verifier is tested with the system Python", systemPython, err)
	}
}

// agreeRowByRow checks that the verifier's hash of every row (--each) is the
// one ledger.Row.ComputeHash gives, and the stored hash, and that the
// verifier accepts the chain.
func agreeRowByRow(t *testing.T, db string) {
	t.Helper()
	r := pyVerify(t, db, "--each")
	if r.code != 0 {
		t.Fatalf("verify_ledger.py %s: exit %d\n%s%s", db, r.code, r.stdout, r.stderr)
	}
	raw, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := ledger.ReadLedger(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, row := range rows {
		if h := row.ComputeHash(); h != row.Hash {
			t.Fatalf("row %d: Go computes %s, the file holds %s", row.ID, h, row.Hash)
		}
		fmt.Fprintf(&want, "%d %s ok\n", row.ID, row.ComputeHash())
	}
	var version int
	if err := raw.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&want, "ledger chain OK: %d rows (schema version %d)\nhead %d:%s\n", len(rows), version, rows[len(rows)-1].ID, rows[len(rows)-1].Hash)
	if r.stdout != want.String() {
		t.Fatalf("verify_ledger.py --each disagrees with Go's hashes:\n got:\n%s\nwant:\n%s", r.stdout, want.String())
	}
}

// hardLedger is a ledger whose rows hold what JSON encoders disagree on:
// <, >, &, U+2028, U+2029, control characters, non-ASCII text and emoji in
// queries, params (a note) and a scope name, and a Laplace entry (mu +Inf).
func hardLedger(t *testing.T) string {
	t.Helper()
	db := newDB(t)
	scope := "été <&> \u2028😀"
	mustRun(t, "init", db, "--mu", "2", "--scope", scope)
	for _, q := range []string{
		"SELECT dp_gaussian(count(*), 1, 0.3) AS \"größe 😀\" FROM t WHERE x < 5 AND x > 0 AND name <> 'a&b\x01\x7f\b\f\t\"\\' -- \u2028 \u2029 ü\n",
		"SELECT gdp_spend(0.125, 'note <script>&amp; \u2028\u2029 \"quoted\" \\ back ünïcödé 日本語 😀\x1f')",
		"SELECT dp_laplace(1.0, 1, 0.5)",
		"SELECT gdp_spend(1e-7)",
	} {
		mustRun(t, "query", db, q)
	}
	mustRun(t, "query", db, "SELECT gdp_spend(0.01, '<&>')", "--scope", scope)
	return db
}

// TestPythonVerifierAgrees runs tools/verify_ledger.py (standard library
// only) beside `dpsql audit verify` on a ledger of hard-to-encode rows, on
// the version-0 fixture (form 0 rows), and on a row holding invalid UTF-8:
// both accept, and the script's hash of every row is Go's.
func TestPythonVerifierAgrees(t *testing.T) {
	needPython(t)
	db := hardLedger(t)
	if out := mustRun(t, "audit", "verify", db); !strings.HasPrefix(out, "ledger OK: 7 rows") {
		t.Fatalf("dpsql audit verify: %q", out)
	}
	audit := mustRun(t, "audit", db, "-f", "csv")
	if !strings.Contains(audit, ",laplace,+Inf,") && !strings.Contains(audit, ",laplace,Inf,") {
		t.Fatalf("the ledger lacks its Laplace (+Inf mu) entry:\n%s", audit)
	}
	agreeRowByRow(t, db)

	v0 := filepath.Join(t.TempDir(), "ledger_v0.db")
	copyFile(t, filepath.Join("..", "..", "ledger", "testdata", "ledger_v0.db"), v0, 0o644)
	if out := mustRun(t, "audit", "verify", v0); !strings.HasPrefix(out, "ledger OK: 6 rows") {
		t.Fatalf("dpsql audit verify of the version-0 fixture: %q", out)
	}
	agreeRowByRow(t, v0)

	// A row appended behind dpsql's back (appending is allowed) whose query
	// holds invalid UTF-8 (an overlong, a lone continuation byte, an encoded
	// surrogate, a code point past U+10FFFF) and a valid U+FFFD: Go writes
	// \ufffd for each bad byte and the raw character for the valid one.
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	head, err := ledger.ReadHead(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	row := ledger.Row{ID: head.ID + 1, At: "2026-01-02T03:04:05Z", Scope: "default", Mechanism: "external",
		Mu: 1e-7, Params: `{"mechanism":"external","mu":1e-7}`, Query: "a\xc0\xafb\x80c\xed\xa0\x80d\xf4\x90\x80\x80e\ufffd\xff",
		PrevHash: head.Hash, Kind: ledger.EventCharge, Form: 1}
	row.Hash = row.ComputeHash()
	if _, err := raw.Exec(`INSERT INTO dp_ledger(id, at, scope, mechanism, mu, params, query, prev_hash, hash, kind, form) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		row.ID, row.At, row.Scope, row.Mechanism, row.Mu, row.Params, row.Query, row.PrevHash, row.Hash, row.Kind, row.Form); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	agreeRowByRow(t, db)
}

var (
	goBrokenRow = regexp.MustCompile(`broken at row (\d+)`)
	pyBrokenRow = regexp.MustCompile(`: row (\d+): `)
)

// TestPythonVerifierDetects tampers with copies of a ledger (an edited row, a
// deleted row, two rows swapped, a removed tail checked against a kept head):
// the script and `dpsql audit verify` both fail, at the same row.
func TestPythonVerifierDetects(t *testing.T) {
	needPython(t)
	src := hardLedger(t)
	head := strings.TrimSpace(mustRun(t, "audit", "head", src))
	for _, tc := range []struct {
		name, sql string
		row       string // the first bad row both must name ("" for a head check)
	}{
		{"edited query", `DROP TRIGGER dp_ledger_no_update; UPDATE dp_ledger SET query = replace(query, '<', '>') WHERE id = 4`, "4"},
		{"edited scope", `DROP TRIGGER dp_ledger_no_update; UPDATE dp_ledger SET scope = 'été <&> ' || char(8233) || '😀' WHERE id = 7`, "7"},
		{"edited at", `DROP TRIGGER dp_ledger_no_update; UPDATE dp_ledger SET at = replace(at, 'Z', '+00:00') WHERE id = 2`, "2"},
		{"deleted row", `DROP TRIGGER dp_ledger_no_delete; DELETE FROM dp_ledger WHERE id = 4`, "5"},
		{"reordered rows", `DROP TRIGGER dp_ledger_no_update; UPDATE dp_ledger SET id = -1 WHERE id = 4; UPDATE dp_ledger SET id = 4 WHERE id = 5; UPDATE dp_ledger SET id = 5 WHERE id = -1`, "4"},
		{"removed tail", `DROP TRIGGER dp_ledger_no_delete; DELETE FROM dp_ledger WHERE id = 7`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "copy.db")
			copyFile(t, src, db, 0o644)
			raw, err := sql.Open("sqlite3", db)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(tc.sql); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			var args []string
			if tc.row == "" {
				args = []string{"--head", head}
			}
			g := run(t, "", append([]string{"audit", "verify", db}, args...)...)
			p := pyVerify(t, db, args...)
			if g.code != 1 || p.code != 1 {
				t.Fatalf("exit codes: dpsql %d (%s), verify_ledger.py %d (%s); want 1 and 1", g.code, g.stderr, p.code, p.stderr)
			}
			if tc.row == "" {
				if !strings.Contains(p.stderr, "does not contain the kept head "+head) {
					t.Fatalf("verify_ledger.py --head: %s", p.stderr)
				}
				return
			}
			gm, pm := goBrokenRow.FindStringSubmatch(g.stderr), pyBrokenRow.FindStringSubmatch(p.stderr)
			if gm == nil || pm == nil || gm[1] != tc.row || pm[1] != tc.row {
				t.Fatalf("want both to name row %s:\ndpsql: %s\nverify_ledger.py: %s", tc.row, g.stderr, p.stderr)
			}
		})
	}
}

// TestReadmeCanonicalExample keeps the worked example of the canonical form
// in docs/ledger.md true: its text and hash are what Row.ComputeHash computes.
func TestReadmeCanonicalExample(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "ledger.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := ledger.Row{ID: 7, At: "2026-01-02T03:04:05.123456Z", Kind: "charge", Scope: "été", Mechanism: "external", Mu: 0.1,
		Params: `{"mechanism":"external","mu":0.1,"note":"a<b & c"}`, Query: "SELECT gdp_spend(0.1, 'a<b & c')",
		PrevHash: strings.Repeat("ab", 32), Form: 1}
	canon := `[1,7,"2026-01-02T03:04:05.123456Z","charge","été","external","0.10000000000000001","{\"mechanism\":\"external\",\"mu\":0.1,\"note\":\"a\u003cb \u0026 c\"}","SELECT gdp_spend(0.1, 'a\u003cb \u0026 c')","abababababababababababababababababababababababababababababababab"]`
	sum := sha256.Sum256([]byte(canon))
	if h := r.ComputeHash(); h != hex.EncodeToString(sum[:]) {
		t.Fatalf("ComputeHash = %s, but the canonical text of docs/ledger.md hashes to %x", h, sum)
	}
	for _, want := range []string{"\n" + canon + "\n", "and its hash is `" + r.ComputeHash() + "`"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("docs/ledger.md lacks %q", want)
		}
	}
}
