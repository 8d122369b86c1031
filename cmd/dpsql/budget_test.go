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
		// the columns of dp_budget_status, in the view's order
		"| scope   | mu_budget | mu_spent | mu_remaining | epsilon_spent | delta | epsilon_budget | epsilon_rigorous | entries | neighbours | guarantee |",
		"| default |         1 |        1 |            0 |       4.37718 | 1e-05 |           NULL |             NULL |       2 | add_remove | mu-GDP    |",
		"| eps     |  0.236704 |        0 |     0.236704 |             0 | 1e-06 |              1 |             NULL |       0 | add_remove | mu-GDP    |",
		"| *       |      NULL |        1 |         NULL |       4.88655 | 1e-06 |           NULL |             NULL |       2 | add_remove | mu-GDP    |",
		// what the owner set: a mu budget is compared as mu, an (epsilon, delta) one as epsilon
		"what each budget check compares:\n" +
			"  default: mu_spent against mu_budget = 1 (every charge is Gaussian, so mu composes exactly)\n" +
			"  eps: nothing spent yet; while every charge is Gaussian, checks compare epsilon_spent against epsilon_budget = 1 at delta = 1e-06\n" +
			"  *: the total over every scope, composed at delta = 1e-06; no cap is set (dpsql init DB --file-mu MU sets one)\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("budget table lacks %q:\n%s", want, table)
		}
	}

	csv := mustRun(t, "budget", db, "-f", "csv")
	if head := strings.SplitN(csv, "\n", 2)[0]; head != "scope,mu_budget,mu_spent,mu_remaining,epsilon_spent,delta,epsilon_budget,epsilon_rigorous,entries,neighbours,guarantee" {
		t.Errorf("budget csv header %q is not the view's column order", head)
	}
	if strings.Contains(csv, "binds") {
		t.Errorf("budget csv carries the table's note:\n%s", csv)
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

// TestBudgetNoteRigorous: once a scope set as mu holds a non-Gaussian charge,
// the note names the epsilon it is checked against and the mu it comes from.
func TestBudgetNoteRigorous(t *testing.T) {
	db := newDB(t)
	mustRun(t, "query", db, "SELECT dp_laplace(1, 1, 0.5)")
	want := "  default: epsilon_rigorous at delta = 1e-05 against 4.37718, the epsilon of mu_budget = 1 (the scope holds subsampled or non-Gaussian charges"
	if out := mustRun(t, "budget", db); !strings.Contains(out, want) {
		t.Errorf("budget table lacks %q:\n%s", want, out)
	}
}
