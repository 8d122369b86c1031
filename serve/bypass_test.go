package serve_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/dpsql/dpsql/serve"
)

// Protected mode's bypass table (protect/testdata/bypass.json), sent over
// HTTP: every attempt is refused (refused, or budget_exceeded for the one
// over budget), nothing is charged. The message is protected mode's own, or
// the service's when the service refuses the statement before protected mode
// sees it (statements other than SELECT, dpsql objects, several statements):
// then the response must say so with its code refused.
func TestBypassTableOverHTTP(t *testing.T) {
	c := newClinic(t, 50, map[string]float64{"default": 10})
	other := filepath.Join(t.TempDir(), "other.db")
	bt := loadBypassTable(t, other)
	for _, q := range bt.Setup {
		c.exec(t, q)
	}
	tok := c.account(t, "mallory", "default")
	_, hs := c.start(t, serve.Config{MaxBodyBytes: 1 << 20})
	cl := client(hs, tok)
	serviceRefusals := []string{"SELECT statements only", "is a dpsql object", "one statement per request"}
	before := c.ledger(t)
	byProtect := 0 // attempts refused with protected mode's own message
	for _, at := range bt.Attempts {
		res, err := cl.Query(context.Background(), at.SQL)
		code := apiCode(err)
		switch {
		case err == nil:
			t.Errorf("%s: %s\n  answered over HTTP: %v", at.Name, at.SQL, res.Rows)
		case code != serve.CodeRefused && code != serve.CodeBudgetExceeded:
			t.Errorf("%s: code %s (%v), want refused or budget_exceeded", at.Name, code, err)
		case code == serve.CodeBudgetExceeded && !strings.Contains(at.Want, "budget"):
			t.Errorf("%s: %v", at.Name, err)
		case !strings.Contains(err.Error(), at.Want) && !containsAny(err.Error(), serviceRefusals):
			t.Errorf("%s: %s\n  got %v, want a message containing %q", at.Name, at.SQL, err, at.Want)
		case strings.Contains(err.Error(), at.Want):
			byProtect++
		}
	}
	if c.ledger(t) != before {
		t.Error("a refused statement charged over HTTP")
	}
	t.Logf("%d of %d attempts refused with protected mode's message, the rest by the service first", byProtect, len(bt.Attempts))
	if len(bt.Attempts) < 30 {
		t.Fatalf("only %d attempts in the bypass table", len(bt.Attempts))
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// loadBypassTable reads protect's bypass table, expanding each attempt's SQL
// template as protect/bypass_table_test.go does.
func loadBypassTable(t testing.TB, other string) struct {
	Setup    []string
	Attempts []struct{ Name, SQL, Want string }
} {
	t.Helper()
	var bt struct {
		Setup    []string
		Attempts []struct{ Name, SQL, Want string }
	}
	data, err := os.ReadFile("../protect/testdata/bypass.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &bt); err != nil {
		t.Fatal(err)
	}
	vars := struct{ DP, Other string }{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `, other}
	for i, at := range bt.Attempts {
		tpl, err := template.New(at.Name).Funcs(template.FuncMap{"repeat": strings.Repeat}).Parse(at.SQL)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := tpl.Execute(&b, vars); err != nil {
			t.Fatal(err)
		}
		bt.Attempts[i].SQL = b.String()
	}
	return bt
}
