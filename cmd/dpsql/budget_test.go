package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBudget(t *testing.T) {
	db := newDB(t)
	mustRun(t, "init", db, "--epsilon", "1", "--delta", "1e-6", "--scope", "eps")
	// Exact spends (no sampler error to pay from delta) that use the budget up.
	mustRun(t, "query", db, "SELECT gdp_spend(0.6); SELECT gdp_spend(0.8);")

	table := mustRun(t, "budget", db)
	for _, want := range []string{
		"| scope   | mu_budget | mu_spent | mu_remaining | delta | epsilon_spent | epsilon_rigorous | epsilon_budget | entries |",
		"| default |         1 |        1 |            0 | 1e-05 |",
		"|       2 |", // entries of default
		"| eps     |  0.236704 |        0 |     0.236704 | 1e-06 |             0 |             NULL |              1 |       0 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("budget table lacks %q:\n%s", want, table)
		}
	}

	var st []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "budget", db, "-f", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 3 || st[0]["scope"] != "default" || st[0]["entries"] != 2.0 || st[0]["epsilon_rigorous"] != nil || st[1]["epsilon_budget"] != 1.0 ||
		st[2]["scope"] != "*" || st[2]["mu_budget"] != nil || st[2]["mu_spent"] != st[0]["mu_spent"] || st[2]["delta"] != 1e-6 {
		t.Fatalf("budget json: %v", st)
	}
	spent := st[0]["mu_spent"].(float64)
	if spent < 1-1e-12 || spent > 1+1e-12 {
		t.Fatalf("mu_spent = %v, want 1 (sqrt(0.36 + 0.64))", spent)
	}
	eps := st[0]["epsilon_spent"].(float64)
	if eps < 4.37 || eps > 4.38 {
		t.Fatalf("epsilon_spent = %v, want about 4.377 (mu = 1 at delta = 1e-5)", eps)
	}
}
