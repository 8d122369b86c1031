package protect

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// planAt plans q against a scope delta of scopeDelta, skipping the engine's
// pool check (so that a deliberately large delta_s can be tested), and reads
// its exact groups.
func planAt(t *testing.T, e *Engine, q string, scopeDelta float64) (*plan, []group) {
	t.Helper()
	ctx := context.Background()
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := dpselect.Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := LoadPolicies(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := tableColumns(ctx, conn, "t")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := checkStatement(st, ps, cols, scopeDelta)
	if err != nil {
		t.Fatal(err)
	}
	if err := completePlan(pl, nil, false, SchemaFacts{}, nil); err != nil {
		t.Fatal(err)
	}
	gs, err := e.readAll(ctx, conn, pl)
	if err != nil {
		t.Fatal(err)
	}
	return pl, gs
}

// A group held by one person appears with probability at most delta_s, and
// the threshold is tight (about delta_s, not far below): measured over
// 20,000 releases at a deliberately large delta_s = 0.05, for a person in one
// group (max_groups 1) and a person in two groups (max_groups 2, each group
// at delta_s/2, either at most delta_s). The old code had no selection_delta
// and a fixed delta_s of 1% of delta.
func TestSelectionDeltaStatistical(t *testing.T) {
	const reps, ds = 20000, 0.05
	for _, tc := range []struct {
		name   string
		groups int
		rare   []string
	}{
		{"max_groups=1", 1, []string{"rare"}},
		{"max_groups=2", 2, []string{"rare-a", "rare-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid", MaxGroups: tc.groups}, func(ins func(pid, g, x any)) {
				for i := range 100 {
					ins(i, "common", 1.0)
				}
				for _, g := range tc.rare {
					ins(1000, g, 1.0)
				}
			})
			pl, gs := planAt(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, selection_delta = 0.05) g, COUNT(*) FROM t GROUP BY g`, 0.5)
			if pl.deltaS != ds || len(gs) != 1+len(tc.rare) {
				t.Fatalf("delta_s %v, %d groups", pl.deltaS, len(gs))
			}
			noise := release.NewNoise()
			seen := 0
			for range reps {
				res := releaseRows(pl, gs, noise)
				for _, r := range res.Rows {
					if strings.HasPrefix(r[0].(string), "rare") {
						seen++
						break
					}
				}
			}
			// Each rare group appears with probability exactly
			// P(N(1, sigma_s) >= tau) = delta_s/max_groups (up to the grid).
			p := 1 - math.Pow(1-ds/float64(tc.groups), float64(len(tc.rare)))
			se := math.Sqrt(p * (1 - p) / reps)
			got := float64(seen) / reps
			if got > ds+4*se {
				t.Errorf("the one-person group(s) appeared in %.4f of releases, more than delta_s = %v (+4 se = %.4f)", got, ds, 4*se)
			}
			if math.Abs(got-p) > 4*se {
				t.Errorf("appeared in %.4f of releases, want %.4f +- %.4f (the threshold is not the documented one)", got, p, 4*se)
			}
		})
	}
}

// The selection's delta comes from a pool of half the scope's delta; a
// statement that does not fit is refused before anything is read or
// charged, with a message that says what fits. selection_delta is checked.
func TestSelectionDeltaPool(t *testing.T) {
	e, db := testDB(t, 100, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range 200 {
			ins(i, []string{"a", "b"}[i%2], 1.0)
		}
	})
	ctx := context.Background()
	charges := func() int {
		var n int
		db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n)
		return n
	}
	const q = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, selection_delta = %s) g, COUNT(*) AS n FROM t GROUP BY g`
	run := func(sd string) (*Result, error) {
		return e.Query(ctx, "default", strings.Replace(q, "%s", sd, 1))
	}
	// Pool: 0.5 * 1e-5 = 5e-6.
	for _, sd := range []string{"2e-6", "2e-6"} {
		res, err := run(sd)
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Receipt.Params["delta"]; d != 2e-6 {
			t.Errorf("charged delta %v, want 2e-6", d)
		}
	}
	before := charges()
	_, err := run("2e-6")
	if !IsRefusal(err) || !strings.Contains(err.Error(), "selection_delta <= 1e-06") || !strings.Contains(err.Error(), "spent delta 4e-06 of the 5e-06") {
		t.Errorf("over the pool: %v", err)
	}
	// A Laplace statement's selection part counts too.
	if _, err := e.Query(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, noise = 'laplace', selection_delta = 6e-7) g, COUNT(*) AS n FROM t GROUP BY g`); err != nil {
		t.Fatal(err)
	}
	if _, err := run("5e-7"); !IsRefusal(err) || !strings.Contains(err.Error(), "selection_delta <= 4e-07") {
		t.Errorf("after the Laplace statement: %v", err)
	}
	if _, err := run("3e-7"); err != nil {
		t.Errorf("within the pool: %v", err)
	}
	before += 2
	for _, tc := range []struct{ q, want string }{
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) g, COUNT(*) AS n FROM t GROUP BY g`, "default"}, // the default delta_s, 1e-8, fits
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, selection_delta = 0) g, COUNT(*) FROM t GROUP BY g`, "selection_delta must lie in (0, 1)"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, selection_delta = 1) g, COUNT(*) FROM t GROUP BY g`, "selection_delta must lie in (0, 1)"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, selection_delta = 1e-9) COUNT(*) FROM t`, "has none"},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, selection_delta = 1e-6) g, COUNT(*) FROM t GROUP BY g`, "must be below the statement's delta"},
	} {
		_, err := e.Query(ctx, "default", tc.q)
		if tc.want == "default" {
			if err != nil {
				t.Errorf("default delta_s 1e-8 within the pool: %v", err)
			}
			before++
			continue
		}
		if !IsRefusal(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.q, err, tc.want)
		}
	}
	if n := charges(); n != before {
		t.Errorf("%d charges, want %d (refusals charge nothing)", n, before)
	}
	// 4e-6 + 6e-7 + 3e-7 + 1e-8 of 5e-6 leaves 9e-8.
	_, err = run("1e-7")
	if !IsRefusal(err) {
		t.Errorf("beyond the pool: %v", err)
	}
	// The ledger agrees that these charges are sound and within budget.
	if _, err := ledger.Verify(ctx, db); err != nil {
		t.Error(err)
	}
}

// Protected charges record the Gaussian sampler's total-variation bound
// (noise_tv: 2^-125 per value it can draw, at a public bound on the number
// of values), and the accountant pays it from delta: the budget error of a
// statement that does not fit reports the sum of the recorded figures (as
// sqlfuncs' dp_gaussian records NoiseTVOf(dim)). The old code recorded only
// noise_tv_per_value, which the accountant does not read (it reported 0).
func TestNoiseTVRecordedAndPaid(t *testing.T) {
	e, db := testDB(t, 1, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {
		for i := range 300 {
			ins(i, []string{"a", "b"}[i%2], 1.0)
		}
	})
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE g_values (v TEXT); INSERT INTO g_values VALUES ('a'), ('b'), ('c')`); err != nil {
		t.Fatal(err)
	}
	tv := func(res *Result) float64 {
		v, _ := res.Receipt.Params["noise_tv"].(float64)
		return v
	}
	var paid float64
	for _, tc := range []struct {
		q    string
		want float64
	}{
		// No GROUP BY: COUNT, AVG's sum and count: 3 values.
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.1) COUNT(*), AVG(x, contribution_bounds_per_group => (0, 2)) FROM t`, release.NoiseTVOf(3)},
		// Selection: per group present (at most 2^64), its noisy count, which
		// is COUNT(*) (one row per person).
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.1) g, COUNT(*) FROM t GROUP BY g`, 0x1p64 * release.NoiseTV},
		// Under the Gaussian, the selection and the SUM.
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6, noise = 'gaussian') g, SUM(x, contribution_bounds_per_group => (0, 2)) FROM t GROUP BY g`, 2 * 0x1p64 * release.NoiseTV},
		// Laplace statements, the selection's included, are sampled exactly.
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6, noise = 'laplace') g, SUM(x, contribution_bounds_per_group => (0, 2)) FROM t GROUP BY g`, 0},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6, noise = 'laplace') COUNT(*) FROM t`, 0},
	} {
		res, err := e.Query(ctx, "default", tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := tv(res); got != tc.want {
			t.Errorf("%s: noise_tv %g, want %g", tc.q, got, tc.want)
		}
		paid += tc.want
	}
	// Public keys: every combination (3 listed keys) times COUNT, VAR_POP (3 values).
	if err := Protect(ctx, db, "t", Policy{PrivacyUnit: "pid", PublicKeys: map[string]string{"g": "g_values.v"}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Query(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.1) g, COUNT(*), VAR_POP(x, contribution_bounds_per_group => (0, 2)) FROM t GROUP BY g`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tv(res), release.NoiseTVOf(12); got != want {
		t.Errorf("public keys: noise_tv %g, want %g", got, want)
	}
	paid += release.NoiseTVOf(12)
	// Over budget: the accountant's error reports what it paid from delta.
	_, err = e.Query(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t`)
	var be *accountant.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("over budget: %v", err)
	}
	want := paid + release.NoiseTVOf(1)
	if math.Abs(be.NoiseTV-want) > 1e-12*want {
		t.Errorf("the accountant paid noise_tv %g, want the recorded %g", be.NoiseTV, want)
	}
}
