package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the demo in-process and checks its key lines.
func TestDemo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	start := time.Now()
	var stdout, stderr bytes.Buffer
	// As in main: signal handling on (nested commands must not cancel the demo).
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, HandleSignals: true}
	if code := m.Exec(context.Background(), []string{"demo", path}); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the demo took %v", d)
	}
	for _, want := range []string{
		"Database: " + path,
		"$ dpsql init " + path + " --mu 1",
		`created budget scope "default"`,
		"sql> SELECT dp_gaussian(count(*), 1, 0.5) AS noisy_count FROM patients;",
		"| noisy_count |",
		"| noisy_age_sum |",
		"| noisy_mean_bmi |",
		"= 0.906 spent, sqrt(1 - 0.906^2) = 0.424 left.",
		"| default |         1 |    0.906 |        0.424 |       4 |", // the budget as set, in mu
		"| default |         1 |        0 |            1 |       0 |",
		`refused: dp_gaussian: privacy budget exceeded in scope "default"`,
		"nothing was released",
		"$ dpsql audit " + path,
		"$ dpsql audit verify " + path,
		"8. Plan before spending", "2.4612", // dp_cost of the subsampled plan (published 2.4612)
		"ledger OK: 5 rows, chain intact (charges: 4, budget events: 1)", // planning charged nothing
		"refused: table patients is protected",                           // the analyst's raw query
		"| sex | n",                                                      // the analyst's DP GROUP BY
		"Next: dpsql shell " + path,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	for _, unwanted := range []string{"epsilon_budget", "epsilon_rigorous", "against the budget's epsilon"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("demo output shows %q: a budget set as mu is shown as set", unwanted)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
	// The demo database can be used afterwards, and the ledger matches.
	if out := mustRun(t, "query", path, "SELECT count(*) AS n FROM patients", "-f", "csv"); out != "n\n10000\n" {
		t.Errorf("patients: %q", out)
	}
	mustFail(t, 1, "already exists", "demo", path)
}

// TestDemoDataDeterministic checks that the generated data depend only on
// the seed.
func TestDemoDataDeterministic(t *testing.T) {
	sum := func() string {
		p := filepath.Join(t.TempDir(), "d.db")
		if err := createPatients(t.Context(), p, 500); err != nil {
			t.Fatal(err)
		}
		return mustRun(t, "query", p, "SELECT sum(age), sum(bmi), sum(diabetic), group_concat(sex, '') FROM patients", "-f", "csv")
	}
	if a, b := sum(), sum(); a != b {
		t.Fatalf("two builds differ:\n%s\n%s", a, b)
	}
}
