package protect_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"text/template"
)

// bypassTable is testdata/bypass.json: the bypass attempts, kept in a file so
// that the analyst service's tests (package serve) run the same table over
// HTTP.
type bypassTable struct {
	Setup    []string
	Attempts []struct{ Name, SQL, Want string }
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
