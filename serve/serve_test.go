package serve_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/serve"
)

// Two analysts on different scopes: each spends only their own scope's
// budget, sees only their own scope's budget and ledger, and cannot reach the
// other's through SQL (the ledger, dp_budget_status, dp_budget_remaining).
func TestScopesAreSeparate(t *testing.T) {
	c := newClinic(t, 200, map[string]float64{"a": 1, "b": 1})
	alice, bob := c.account(t, "alice", "a"), c.account(t, "bob", "b")
	_, hs := c.start(t, serve.Config{})
	ctx := context.Background()
	ca, cb := client(hs, alice), client(hs, bob)

	res, err := ca.Query(ctx, fmt.Sprintf(dpCount, 0.6))
	if err != nil {
		t.Fatal(err)
	}
	if res.Charge == nil || math.Abs(float64(res.Charge.Mu)-0.6) > 1e-9 || len(res.Rows) != 1 || res.Columns[0] != "n" {
		t.Fatalf("alice's DP count: %+v", res)
	}
	if c.charges(t, "a") != 1 || c.charges(t, "b") != 0 {
		t.Fatalf("charges: a %d, b %d; want 1 and 0", c.charges(t, "a"), c.charges(t, "b"))
	}
	ba, err := ca.Budget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := cb.Budget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ba.Scope != "a" || ba.Account != "alice" || math.Abs(float64(ba.MuSpent)-0.6) > 1e-9 || bb.Scope != "b" || bb.MuSpent != 0 || bb.MuRemaining < 0.999 {
		t.Fatalf("budgets: alice %+v, bob %+v", ba, bb)
	}
	// One figure (issue 23, part 2): /v1/query's mu_remaining is /v1/budget's.
	if res.Charge.MuRemaining != ba.MuRemaining {
		t.Errorf("/v1/query says mu_remaining %v, /v1/budget %v", res.Charge.MuRemaining, ba.MuRemaining)
	}
	lb, err := cb.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range lb.Entries {
		if e.Kind == "charge" || strings.Contains(e.Query, "DIFFERENTIAL_PRIVACY") {
			t.Errorf("bob's ledger shows %+v", e)
		}
	}
	la, err := ca.Ledger(ctx)
	if err != nil || len(la.Entries) != 2 || la.Entries[1].Kind != "charge" || la.Scope != "a" {
		t.Fatalf("alice's ledger: %+v, %v", la, err)
	}
	// Bob cannot read or spend alice's scope through SQL.
	for _, q := range []string{
		`SELECT * FROM dp_ledger`,
		`SELECT * FROM main."DP_LEDGER"`,
		`SELECT * FROM 'dp_budget_status'`,
		`SELECT * FROM [dp_budget]`,
		`SELECT dp_budget_remaining('a')`,
		`SELECT dp_epsilon('a', 1e-5)`,
		`SELECT * FROM dp_account`,
		`SELECT dp_gaussian(1, 1, 0.5)`,
		`SELECT dp_use_scope('a')`,
	} {
		before := c.ledger(t)
		_, err := cb.Query(ctx, q)
		if apiCode(err) != serve.CodeRefused {
			t.Errorf("bob: %s: got %v (%s), want refused", q, err, apiCode(err))
		}
		if c.ledger(t) != before {
			t.Errorf("bob: %s charged", q)
		}
	}
	// Bob spends his own budget to the end; alice's is untouched.
	for i := 0; ; i++ {
		_, err := cb.Query(ctx, fmt.Sprintf(dpCount, 0.5))
		if apiCode(err) == serve.CodeBudgetExceeded {
			if i != 4 {
				t.Errorf("bob ran %d statements of mu 0.5 in a budget of mu 1, want 4", i)
			}
			break
		}
		if err != nil || i > 4 {
			t.Fatalf("bob's statement %d: %v", i, err)
		}
	}
	if ba2, err := ca.Budget(ctx); err != nil || ba2.MuSpent != ba.MuSpent {
		t.Errorf("alice's budget changed: %+v, %v", ba2, err)
	}
	// A plain SELECT of a public table works and spends nothing.
	res, err = cb.Query(ctx, `SELECT name, beds FROM wards ORDER BY name`)
	if err != nil || res.Charge != nil || len(res.Rows) != 2 || res.Rows[0][0] != "north" || res.Rows[0][1] != int64(12) {
		t.Errorf("public select: %+v, %v", res, err)
	}
}

// 16 clients on 4 scopes (4 accounts each) spend mu 0.25 at a time,
// concurrently, until refused: each scope pays for exactly 8 statements,
// whatever the interleaving (one IMMEDIATE transaction per charge).
func TestConcurrentClientsStopAtBudget(t *testing.T) {
	const perScope, mu, clients = 8, 0.25, 16
	budget := mu * math.Sqrt(perScope) * (1 + 1e-9)
	scopes := map[string]float64{"s0": budget, "s1": budget, "s2": budget, "s3": budget}
	c := newClinic(t, 500, scopes)
	var cls []*serve.Client
	_, hs := c.start(t, serve.Config{})
	for i := range clients {
		cls = append(cls, client(hs, c.account(t, fmt.Sprintf("a%d", i), fmt.Sprintf("s%d", i%4))))
	}
	ok := make([]int, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := cl.Query(context.Background(), fmt.Sprintf(dpCount, mu))
				switch apiCode(err) {
				case "":
					ok[i]++
				case serve.CodeBudgetExceeded:
					return
				default:
					errs <- fmt.Errorf("client %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for s := range 4 {
		got := ok[s] + ok[s+4] + ok[s+8] + ok[s+12]
		scope := fmt.Sprintf("s%d", s)
		if got != perScope || c.charges(t, scope) != perScope {
			t.Errorf("scope %s: %d statements answered, %d charges; want %d", scope, got, c.charges(t, scope), perScope)
		}
	}
}

// A revoked token is refused from the revocation on; a re-added account
// gets a new token and the old one stays refused.
func TestRevokedTokenRefused(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	srv, hs := c.start(t, serve.Config{})
	ctx := context.Background()
	if _, err := client(hs, tok).Budget(ctx); err != nil {
		t.Fatal(err)
	}
	if err := serve.RevokeAccount(ctx, c.path, "alice"); err != nil {
		t.Fatal(err)
	}
	before := c.ledger(t)
	for _, run := range []func() error{
		func() error { _, err := client(hs, tok).Query(ctx, fmt.Sprintf(dpCount, 0.5)); return err },
		func() error { _, err := client(hs, tok).Budget(ctx); return err },
		func() error { _, err := client(hs, tok).Ledger(ctx); return err },
	} {
		if err := run(); apiCode(err) != serve.CodeUnauthorized {
			t.Errorf("revoked token: %v", err)
		}
	}
	if c.ledger(t) != before {
		t.Error("a revoked token's statement charged")
	}
	if err := serve.RevokeAccount(ctx, c.path, "alice"); err == nil {
		t.Error("revoking twice succeeded")
	}
	tok2 := c.account(t, "alice", "a")
	if _, err := client(hs, tok2).Budget(ctx); err != nil {
		t.Errorf("re-added account: %v", err)
	}
	if _, err := client(hs, tok).Budget(ctx); apiCode(err) != serve.CodeUnauthorized {
		t.Errorf("old token after re-adding: %v", err)
	}
	if srv.ActiveAccounts() != 1 {
		t.Errorf("%d active accounts, want 1", srv.ActiveAccounts())
	}
	as, err := serve.ListAccounts(ctx, c.owner)
	if err != nil || len(as) != 1 || !as[0].Active() || as[0].Scope != "a" {
		t.Errorf("ListAccounts: %v, %v", as, err)
	}
}

// The owner's derived table dp_account grants nothing: the service reads
// accounts from the chain only. An attacker who can write the table (but
// not forge the chain) adds a row for a token they made up and un-revokes a
// revoked account: both tokens stay refused.
func TestAccountTableEditGrantsNothing(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"a": 5})
	old := c.account(t, "alice", "a")
	if err := serve.RevokeAccount(context.Background(), c.path, "alice"); err != nil {
		t.Fatal(err)
	}
	keep := c.account(t, "bob", "a")
	_, hs := c.start(t, serve.Config{})
	// A token the attacker made up, stored with its correct salted hash.
	const forged = serve.TokenPrefix + "forged-token-of-the-attacker-00000000000000"
	c.exec(t, `INSERT INTO dp_account(name, scope, hasher, salt, hash, added_at, ledger_id) VALUES ('mallory', 'a', ?, ?, ?, 'now', 99)`,
		serve.Hasher, "00000000000000000000000000000000", hmacHex("00000000000000000000000000000000", forged))
	ctx := context.Background()
	if _, err := serve.VerifyAccounts(ctx, c.owner); err == nil || !strings.Contains(err.Error(), `account "mallory" is not in the chain`) {
		t.Errorf("VerifyAccounts after the insert: %v", err)
	}
	c.exec(t, `DELETE FROM dp_account WHERE name = 'mallory'`)
	if n, err := serve.VerifyAccounts(ctx, c.owner); err != nil || n != 2 {
		t.Errorf("VerifyAccounts of the untouched table: %d, %v", n, err)
	}
	c.exec(t, `UPDATE dp_account SET revoked_at = NULL WHERE name = 'alice'`)
	if _, err := serve.VerifyAccounts(ctx, c.owner); err == nil || !strings.Contains(err.Error(), `account "alice" differs`) {
		t.Errorf("VerifyAccounts after the update: %v", err)
	}
	c.exec(t, `INSERT INTO dp_account(name, scope, hasher, salt, hash, added_at, ledger_id) VALUES ('mallory', 'a', ?, ?, ?, 'now', 99)`,
		serve.Hasher, "00000000000000000000000000000000", hmacHex("00000000000000000000000000000000", forged))
	for name, tok := range map[string]string{"forged": forged, "un-revoked": old} {
		if _, err := client(hs, tok).Query(ctx, fmt.Sprintf(dpCount, 0.5)); apiCode(err) != serve.CodeUnauthorized {
			t.Errorf("%s token: %v, want unauthorized", name, err)
		}
	}
	if _, err := client(hs, keep).Budget(ctx); err != nil {
		t.Errorf("bob: %v", err)
	}
	if c.charges(t, "a") != 0 {
		t.Error("an edited account table let a statement charge")
	}
}

// No token, a malformed header or a wrong token: 401, and nothing runs.
func TestUnauthorized(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"a": 5})
	good := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{})
	before := c.ledger(t)
	body := `{"sql": "` + fmt.Sprintf(dpCount, 0.5) + `"}`
	for name, header := range map[string]string{
		"none":           "",
		"basic":          "Basic YWxpY2U6cHc=",
		"empty bearer":   "Bearer ",
		"wrong token":    "Bearer " + serve.TokenPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"prefix of good": "Bearer " + good[:len(good)-1],
		"good plus more": "Bearer " + good + "x",
		"lower-case":     "bearer " + good,
	} {
		for _, path := range []string{"/v1/query", "/v1/budget", "/v1/ledger", "/v1/tables"} {
			method := http.MethodGet
			if path == "/v1/query" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"code":"unauthorized"`) {
				t.Errorf("%s %s: %d %s", name, path, resp.StatusCode, b)
			}
		}
	}
	if c.ledger(t) != before {
		t.Error("an unauthenticated request charged")
	}
}

// Bad requests are refused with their code and charge nothing.
func TestBadRequests(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{MaxBodyBytes: 4096})
	dp := fmt.Sprintf(dpCount, 0.5)
	cases := []struct {
		name, contentType, body string
		status                  int
		code, want              string
	}{
		{"oversized", "application/json", `{"sql": "` + dp + strings.Repeat(" ", 5000) + `"}`, 413, serve.CodeBadRequest, "over 4096 bytes"},
		{"malformed JSON", "application/json", `{"sql": "` + dp, 400, serve.CodeBadRequest, "not the JSON object"},
		{"not an object", "application/json", `["` + dp + `"]`, 400, serve.CodeBadRequest, "not the JSON object"},
		{"unknown field", "application/json", `{"sql": "SELECT 1", "scope": "b"}`, 400, serve.CodeBadRequest, "unknown field"},
		{"two objects", "application/json", `{"sql": "SELECT 1"} {"sql": "SELECT 2"}`, 400, serve.CodeBadRequest, "more than one"},
		{"key twice (issue 22)", "application/json", `{"sql": "SELECT 1", "sql": "` + dp + `"}`, 400, serve.CodeBadRequest, "appears twice"},
		{"key in two cases (issue 22)", "application/json", `{"sql": "SELECT 1", "SQL": "` + dp + `"}`, 400, serve.CodeBadRequest, "differ only in case"},
		{"key in two Unicode cases", "application/json", `{"sql": "SELECT 1", "ſql": "` + dp + `"}`, 400, serve.CodeBadRequest, "differ only in case"},
		{"empty sql", "application/json", `{"sql": "  "}`, 400, serve.CodeBadRequest, "empty"},
		{"only a comment", "application/json", `{"sql": "-- nothing"}`, 400, serve.CodeBadRequest, "only comments"},
		{"form post", "application/x-www-form-urlencoded", `sql=SELECT+1`, 400, serve.CodeBadRequest, "application/json"},
		{"unterminated string", "application/json", `{"sql": "SELECT 'a"}`, 400, serve.CodeBadRequest, "unterminated"},
		{"syntax error", "application/json", `{"sql": "SELECT FROM WHERE"}`, 400, serve.CodeBadRequest, "syntax error"},
		{"DP syntax error", "application/json", `{"sql": "SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM"}`, 403, serve.CodeRefused, ""},
		{"create temp", "application/json", `{"sql": "CREATE TEMP TABLE t (a)"}`, 403, serve.CodeRefused, "SELECT statements only"},
		{"insert", "application/json", `{"sql": "INSERT INTO wards VALUES ('x', 1)"}`, 403, serve.CodeRefused, "SELECT statements only"},
		{"CTE insert", "application/json", `{"sql": "WITH x AS (SELECT 1) INSERT INTO wards SELECT 'x', 1 FROM x"}`, 403, serve.CodeRefused, "INSERT is the owner's"},
		{"pragma", "application/json", `{"sql": "PRAGMA table_info(wards)"}`, 403, serve.CodeRefused, "SELECT statements only"},
		{"begin", "application/json", `{"sql": "BEGIN"}`, 403, serve.CodeRefused, "SELECT statements only"},
		{"two statements", "application/json", `{"sql": "SELECT 1; SELECT 2"}`, 403, serve.CodeRefused, "one statement per request"},
		{"DP two statements", "application/json", `{"sql": "` + dp + `; SELECT 1"}`, 403, serve.CodeRefused, "one statement"},
	}
	before := c.ledger(t)
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/query", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", tc.contentType)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s\n  want %d, code %s, message containing %q", tc.name, resp.StatusCode, b, tc.status, tc.code, tc.want)
		}
	}
	if c.ledger(t) != before {
		t.Error("a bad request charged")
	}
	// Unknown endpoints and methods are JSON errors too.
	for _, r := range []struct {
		method, path string
		status       int
	}{{"GET", "/v1/query", 405}, {"GET", "/v1/nothing", 404}, {"POST", "/v1/budget", 405}, {"DELETE", "/v1/ledger", 405}, {"POST", "/v1/tables", 405}} {
		req, _ := http.NewRequest(r.method, hs.URL+r.path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.status || !strings.Contains(string(b), `"code":"bad_request"`) {
			t.Errorf("%s %s: %d %s, want %d and code bad_request", r.method, r.path, resp.StatusCode, b, r.status)
		}
	}
}

// Each account has its own token bucket: over it, 429 and nothing runs;
// another account is not slowed.
func TestRateLimitPerToken(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"a": 50})
	alice, bob := c.account(t, "alice", "a"), c.account(t, "bob", "a")
	_, hs := c.start(t, serve.Config{Rate: 0.001, Burst: 3})
	ctx := context.Background()
	for i := range 3 {
		if _, err := client(hs, alice).Query(ctx, fmt.Sprintf(dpCount, 0.1)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if _, err := client(hs, alice).Query(ctx, fmt.Sprintf(dpCount, 0.1)); apiCode(err) != serve.CodeRateLimited {
		t.Errorf("fourth request: %v", err)
	}
	if c.charges(t, "a") != 3 {
		t.Errorf("%d charges, want 3", c.charges(t, "a"))
	}
	if _, err := client(hs, bob).Budget(ctx); err != nil {
		t.Errorf("bob: %v", err)
	}
}

// Accounts: names are checked, scopes must exist, an active name cannot be
// added twice, and the token is long, prefixed and never stored.
func TestAddAccount(t *testing.T) {
	c := newClinic(t, 10, map[string]float64{"a": 1})
	ctx := context.Background()
	tok, err := serve.AddAccount(ctx, c.path, "alice", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, serve.TokenPrefix) || len(tok) != len(serve.TokenPrefix)+43 {
		t.Errorf("token %q", tok)
	}
	var n int
	c.owner.QueryRow(`SELECT count(*) FROM dp_ledger WHERE instr(params, ?) OR instr(coalesce(query, ''), ?)`, tok[len(serve.TokenPrefix):], tok[len(serve.TokenPrefix):]).Scan(&n)
	var m int
	c.owner.QueryRow(`SELECT count(*) FROM dp_account WHERE instr(hash, ?) OR instr(salt, ?)`, tok, tok).Scan(&m)
	if n != 0 || m != 0 {
		t.Error("the token is stored in the file")
	}
	for _, tc := range []struct{ name, scope, want string }{
		{"alice", "a", "already active"},
		{"bob", "nope", "does not exist"},
		{"", "a", "account name"},
		{"a b", "a", "account name"},
		{"bob", "", "needs a scope"},
	} {
		if _, err := serve.AddAccount(ctx, c.path, tc.name, tc.scope); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add %q %q: %v, want %q", tc.name, tc.scope, err, tc.want)
		}
	}
	if err := serve.RevokeAccount(ctx, c.path, "nobody"); err == nil {
		t.Error("revoking an unknown account succeeded")
	}
}

// An attacker with write access to the file (and the ledger's triggers
// dropped) deletes the record that revoked an account: the chain still
// checks (it is only shorter), but the running service has seen the revoke
// record and refuses every request rather than accept the token again.
func TestDeletedRevokeRecordFailsClosed(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{})
	ctx := context.Background()
	if err := serve.RevokeAccount(ctx, c.path, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := client(hs, tok).Budget(ctx); apiCode(err) != serve.CodeUnauthorized {
		t.Fatalf("revoked: %v", err)
	}
	c.exec(t, `DROP TRIGGER dp_ledger_no_delete`)
	c.exec(t, `DELETE FROM dp_ledger WHERE id = (SELECT max(id) FROM dp_ledger)`)
	c.exec(t, `UPDATE dp_account SET revoked_at = NULL`)
	_, err := client(hs, tok).Query(ctx, fmt.Sprintf(dpCount, 0.5))
	if apiCode(err) != serve.CodeInternal || !strings.Contains(err.Error(), "rows were removed") {
		t.Errorf("after the revoke record was deleted: %v (%s), want internal", err, apiCode(err))
	}
	if c.charges(t, "a") != 0 {
		t.Error("the un-revoked token charged")
	}
}

// brokenWriter is a client that has gone: every write of the answer fails.
type brokenWriter struct{ h http.Header }

func (w *brokenWriter) Header() http.Header         { return w.h }
func (w *brokenWriter) WriteHeader(int)             {}
func (w *brokenWriter) Write(p []byte) (int, error) { return 0, io.ErrClosedPipe }

// A client that disconnects once its statement's charge has committed keeps
// the charge: the answer was computed and handed to the socket, and nothing
// gives budget back.
func TestDisconnectAfterChargeKeepsCharge(t *testing.T) {
	c := newClinic(t, 100, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	srv, _ := c.start(t, serve.Config{})
	req, _ := http.NewRequest(http.MethodPost, "/v1/query", strings.NewReader(`{"sql": "`+fmt.Sprintf(dpCount, 0.5)+`"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	srv.Handler().ServeHTTP(&brokenWriter{h: http.Header{}}, req)
	if c.charges(t, "a") != 1 {
		t.Errorf("%d charges after the answer could not be delivered, want 1", c.charges(t, "a"))
	}
}
