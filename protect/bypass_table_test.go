package protect_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"text/template"
)

// bypassTable is testdata/bypass.json: the bypass attempts, kept in a file so
// that the analyst service's tests (package serve) run the same table over
// HTTP.
type bypassTable struct {
	Setup    []string
	Attempts []bypassAttempt
}

// bypassAttempt is one attempt: refused with a message containing Want, or,
// when Answer is set, answered with the rows Answer describes.
type bypassAttempt struct {
	Name, SQL, Want string
	Answer          *bypassAnswer
}

// bypassAnswer describes an answered attempt's rows, sorted by their first
// column: a string "text:...", "int:...", "real:...", "blob:HEX" or "null"
// is a value of that type exactly, a number is a number within Tol of it.
// No Rows: any rows.
type bypassAnswer struct {
	Rows [][]any
	Tol  float64
}

// typed spells a released value with its type, as bypassAnswer does.
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
	case []byte:
		return fmt.Sprintf("blob:%x", v)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// check returns what is wrong with rows ("" if nothing).
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
			switch w := w.(type) {
			case string:
				if typed(got) != w {
					return fmt.Sprintf("row %d column %d is %s, want %s", i, j, typed(got), w)
				}
			case float64:
				var x float64
				switch g := got.(type) {
				case int64:
					x = float64(g)
				case float64:
					x = g
				default:
					return fmt.Sprintf("row %d column %d is %s, want a number near %v", i, j, typed(got), w)
				}
				if math.Abs(x-w) > a.Tol {
					return fmt.Sprintf("row %d column %d is %v, want %v ± %v", i, j, x, w, a.Tol)
				}
			}
		}
	}
	return ""
}

// loadBypassTable reads testdata/bypass.json and expands each attempt's SQL
// template with other, a database path outside the file.
func loadBypassTable(t testing.TB, other string) bypassTable {
	t.Helper()
	data, err := os.ReadFile("testdata/bypass.json")
	if err != nil {
		t.Fatal(err)
	}
	var bt bypassTable
	if err := json.Unmarshal(data, &bt); err != nil {
		t.Fatalf("testdata/bypass.json: %v", err)
	}
	funcs := template.FuncMap{"repeat": strings.Repeat}
	vars := struct{ DP, Other string }{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `, other}
	for i, at := range bt.Attempts {
		tpl, err := template.New(at.Name).Funcs(funcs).Parse(at.SQL)
		if err != nil {
			t.Fatalf("testdata/bypass.json: %s: %v", at.Name, err)
		}
		var b strings.Builder
		if err := tpl.Execute(&b, vars); err != nil {
			t.Fatalf("testdata/bypass.json: %s: %v", at.Name, err)
		}
		bt.Attempts[i].SQL = b.String()
	}
	return bt
}
