package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/dpsql/dpsql/serve"
)

// Protected mode's bypass table (protect/testdata/bypass.json), sent over
// HTTP: every attempt is refused (refused, or budget_exceeded for the one
// over budget), nothing is charged; or, for the attempts the table says are
// answered, answered with its rows and a DP statement charged once. The
// message is protected mode's own, or the service's when the service refuses
// the statement before protected mode sees it (statements other than SELECT,
// dpsql objects, several statements): then the response must say so with
// its code refused.
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
	byProtect, refused := 0, 0 // attempts refused with protected mode's own message
	for _, at := range bt.Attempts {
		before, charges := c.ledger(t), c.charges(t, "default")
		res, err := cl.Query(context.Background(), at.SQL)
		code := apiCode(err)
		isDP := strings.Contains(at.SQL, "DIFFERENTIAL_PRIVACY")
		if at.Answer != nil {
			switch {
			case !isDP && code == serve.CodeRefused && containsAny(err.Error(), serviceRefusals):
				// The service refuses plain statements on dpsql objects.
			case err != nil:
				t.Errorf("%s: %.200s\n  got %v (%s), want an answer", at.Name, at.SQL, err, code)
			default:
				if msg := at.Answer.check(res.Rows); msg != "" {
					t.Errorf("%s: %.200s\n  %s", at.Name, at.SQL, msg)
				}
			}
			want := 0
			if isDP && err == nil {
				want = 1
			}
			if n := c.charges(t, "default") - charges; n != want {
				t.Errorf("%s: %d charges, want %d", at.Name, n, want)
			}
			continue
		}
		refused++
		switch {
		case err == nil:
			t.Errorf("%s: %s\n  answered over HTTP: %v", at.Name, at.SQL, res.Rows)
		case code != serve.CodeRefused && code != serve.CodeBudgetExceeded:
			t.Errorf("%s: code %s (%v), want refused or budget_exceeded", at.Name, code, err)
		case code == serve.CodeBudgetExceeded && !strings.Contains(at.Want, "budget"):
			t.Errorf("%s: %v", at.Name, err)
		case !strings.Contains(err.Error(), at.Want) && !containsAny(err.Error(), serviceRefusals):
			t.Errorf("%s: %.200s\n  got %v, want a message containing %q", at.Name, at.SQL, err, at.Want)
		case strings.Contains(err.Error(), at.Want):
			byProtect++
		}
		if c.ledger(t) != before {
			t.Errorf("%s: a refused statement charged over HTTP", at.Name)
		}
	}
	t.Logf("%d of %d refused attempts refused with protected mode's message, the rest by the service first", byProtect, refused)
	if refused < 30 {
		t.Fatalf("only %d refused attempts in the bypass table", refused)
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

// bypassAttempt is one attempt of protect's bypass table (see
// protect/bypass_table_test.go): refused with a message containing Want,
// or answered as Answer says.
type bypassAttempt struct {
	Name, SQL, Want string
	Answer          *bypassAnswer
}

// bypassAnswer: the answer's rows sorted by their first column; a string
// "text:...", "int:...", "real:..." is that value (over JSON an integral
// real reads as an int), a number is a number within Tol.
type bypassAnswer struct {
	Rows [][]any
	Tol  float64
}

func typed(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case int64:
		return fmt.Sprintf("int:%d", v)
	case float64:
		return fmt.Sprintf("real:%v", v)
	case string:
		return "text:" + v
	}
	return fmt.Sprintf("%T:%v", v, v)
}

func (a *bypassAnswer) check(rows [][]any) string {
	if a.Rows == nil {
		return ""
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(x, y []any) int { return strings.Compare(typed(x[0]), typed(y[0])) })
	if len(rows) != len(a.Rows) {
		return fmt.Sprintf("%d rows %v, want %d like %v", len(rows), rows, len(a.Rows), a.Rows)
	}
	for i, want := range a.Rows {
		if len(rows[i]) != len(want) {
			return fmt.Sprintf("row %v, want %v", rows[i], want)
		}
		for j, w := range want {
			got := rows[i][j]
			var x float64
			isNum := true
			switch g := got.(type) {
			case int64:
				x = float64(g)
			case float64:
				x = g
			default:
				isNum = false
			}
			switch w := w.(type) {
			case string:
				if r, ok := strings.CutPrefix(w, "real:"); ok && isNum && fmt.Sprint(x) == r {
					continue
				}
				if typed(got) != w {
					return fmt.Sprintf("row %d column %d is %s, want %s", i, j, typed(got), w)
				}
			case float64:
				if !isNum || math.Abs(x-w) > a.Tol {
					return fmt.Sprintf("row %d column %d is %s, want %v ± %v", i, j, typed(got), w, a.Tol)
				}
			}
		}
	}
	return ""
}

// loadBypassTable reads protect's bypass table, expanding each attempt's SQL
// template as protect/bypass_table_test.go does.
func loadBypassTable(t testing.TB, other string) struct {
	Setup    []string
	Attempts []bypassAttempt
} {
	t.Helper()
	var bt struct {
		Setup    []string
		Attempts []bypassAttempt
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
