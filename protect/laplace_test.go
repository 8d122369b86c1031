package protect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// The noise option parses as a string, and bad values, bad types and
// laplace with mu are refused before anything is read or charged.
func TestNoiseOptionRefusals(t *testing.T) {
	st, err := dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, noise = 'laplace') COUNT(*) FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	if o := st.Options[2]; o != (dpselect.Option{Name: "noise", Text: "laplace", IsText: true}) {
		t.Errorf("noise option parsed as %+v", o)
	}
	e, db := testDB(t, 10, Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 1}, func(ins func(pid, g, x any)) {
		for i := range 100 {
			ins(i, "a", 1.0)
		}
	})
	ctx := context.Background()
	for _, c := range []struct{ opts, want string }{
		{`epsilon = 1, delta = 1e-6, noise = 'uniform'`, "unknown noise 'uniform'"},
		{`epsilon = 1, delta = 1e-6, noise = 'gaussian', noise = 'laplace'`, "given twice"},
		{`epsilon = 1, delta = 1e-6, noise = 1`, "noise takes 'auto', 'laplace' or 'gaussian'"},
		{`epsilon = '1', delta = 1e-6`, "takes a number"},
		{`mu = 1, noise = 'laplace'`, "give epsilon and delta, not mu"},
		{`epsilon = 0, delta = 1e-6, noise = 'laplace'`, "epsilon must be positive"},
		{`epsilon = 1e-9, delta = 1e-6, noise = 'laplace'`, "epsilon"},
		{`epsilon = 1, delta = 1e-6, noise = laplace`, "takes a number or a 'string'"},
	} {
		q := fmt.Sprintf(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (%s) g, COUNT(*) FROM t GROUP BY g`, c.opts)
		_, err := e.Query(ctx, "default", q)
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a refusal containing %q", c.opts, err, c.want)
		}
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n)
	if n != 0 {
		t.Errorf("refused statements charged %d rows", n)
	}
	// 'Gaussian' in any case is today's default.
	if _, err := e.Query(ctx, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, noise = 'Gaussian') g, COUNT(*) FROM t GROUP BY g`); err != nil {
		t.Fatal(err)
	}
}

// Under noise = 'laplace' a statement is one composite ledger row: the
// selection's laplace_inf part and one laplace part per other noisy value,
// with L1 sensitivities max_groups*max_rows*bound, composing (by the PLD
// accountant, at the statement's delta) to at most the requested epsilon and
// within 1% of it.
func TestLaplaceCharge(t *testing.T) {
	e, db := testDB(t, 20, Policy{PrivacyUnit: "pid", MaxGroups: 4, MaxRows: 2}, func(ins func(pid, g, x any)) {
		// 500 persons per group: far above the Laplace selection's threshold
		// (about 180 persons here; with 250 a group was dropped now and then).
		for i := range 8000 {
			ins(i%2000, []string{"a", "b", "c", "d"}[i%4], float64(i%50))
		}
	})
	ctx := context.Background()
	for i, c := range []struct {
		q          string
		eps, delta float64
		kinds      []string
		sens       []float64 // L1 sensitivity before the grid's g, per laplace part
		dparts     int       // parts in the details: selection and aggregates
	}{
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, noise = 'laplace') g, COUNT(*) AS n, AVG(x, contribution_bounds_per_group => (0, 50)) AS m FROM t GROUP BY g`,
			1, 1e-5, []string{"laplace_inf", "laplace", "laplace", "laplace"}, []float64{8, 8 * 25, 8}, 4},
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-2, noise = 'laplace', max_groups_contributed = 3) COUNT(*) AS n, SUM(x, contribution_bounds_per_group => (-10, 5)) FROM t`,
			0.5, 1e-2, []string{"laplace", "laplace"}, []float64{2, 2 * 10}, 2}, // no GROUP BY: one group
		{`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2, delta = 1e-5, noise = 'laplace', max_groups_contributed = 3) g, VAR_POP(x, contribution_bounds_per_group => (0, 4)) FROM t GROUP BY g`,
			2, 1e-5, []string{"laplace_inf", "laplace", "laplace", "laplace"}, []float64{6 * 2, 6 * 2, 6}, 4},
	} {
		res, err := e.Query(ctx, "default", c.q)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if n := len(res.Rows); (i != 1 && n != 4) || (i == 1 && n != 1) {
			t.Errorf("%d: %d rows released", i, n)
		}
		var kind, params string
		var rows int
		db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&rows)
		if rows != i+1 {
			t.Fatalf("%d: %d charge rows after %d statements", i, rows, i+1)
		}
		if err := db.QueryRow(`SELECT mechanism, params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&kind, &params); err != nil {
			t.Fatal(err)
		}
		var m mechanism.Mechanism
		if err := json.Unmarshal([]byte(params), &m); err != nil {
			t.Fatal(err)
		}
		if kind != mechanism.KindComposite || m.Kind != kind || len(m.Parts) != len(c.kinds) {
			t.Fatalf("%d: charged %s with %d parts, want composite with %v", i, kind, len(m.Parts), c.kinds)
		}
		j := 0
		for k, p := range m.Parts {
			if p.Kind != c.kinds[k] {
				t.Errorf("%d: part %d is %s, want %s", i, k, p.Kind, c.kinds[k])
			}
			if p.Kind == mechanism.KindLaplace {
				if s := c.sens[j]; !(p.Sensitivity >= s && p.Sensitivity <= s*1.001) {
					t.Errorf("%d: laplace part %d sensitivity %v, want L1 %v (+ quantum and grid)", i, k, p.Sensitivity, s)
				}
				j++
			}
		}
		got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, c.delta)
		if err != nil {
			t.Fatal(err)
		}
		if got > c.eps || got < 0.99*c.eps {
			t.Errorf("%d: the charge certifies epsilon %v at delta %v, want at most and within 1%% of %v", i, got, c.delta, c.eps)
		}
		var d StatementDetails
		if err := json.Unmarshal([]byte(params), &d); err != nil {
			t.Fatal(err)
		}
		if d.Noise != "laplace" || d.EpsilonRequested != c.eps || len(d.Parts) != c.dparts {
			t.Errorf("%d: details %+v", i, d)
		}
	}
	// The composite rows re-account and verify like any other.
	if n, err := ledger.Verify(ctx, db); err != nil || n == 0 {
		t.Errorf("ledger verify: %d rows, %v", n, err)
	}
}

// A COUNT's noise under noise = 'laplace' has the Laplace law: variance
// 2 b^2 for the charged scale b, and kurtosis 6 (a Gaussian's is 3).
func TestLaplaceCountStatistical(t *testing.T) {
	const n = 10000
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 1}, func(ins func(pid, g, x any)) {
		for i := range n {
			ins(i, "a", 1.0)
		}
	})
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2, delta = 1e-5, noise = 'laplace') COUNT(*), SUM(x, contribution_bounds_per_group => (-2, 2)) FROM t`)
	b, bs := pl.values[pl.aggs[0].val].Lap.Scale, pl.values[pl.aggs[1].val].Lap.Scale
	if !(b > 9 && b < 10.5) || !(bs > 2*9 && bs < 2*10.5) {
		t.Fatalf("scales %v, %v, want about 1/0.1 and 2/0.1 (epsilon 0.2 over two values)", b, bs)
	}
	noise := release.NewNoise()
	const k = 50000
	var m2, m4, s2 float64
	for range k {
		r := releaseRows(pl, gs, noise).Rows[0]
		z := float64(r[0].(int64)) - n
		m2 += z * z
		m4 += z * z * z * z
		zs := r[1].(float64) - n
		s2 += zs * zs
	}
	m2 /= k
	m4 /= k
	s2 /= k
	if want := 2 * b * b; math.Abs(m2/want-1) > 5*math.Sqrt(5.0/k) {
		t.Errorf("COUNT: variance %.2f, want 2 b^2 = %.2f", m2, want)
	}
	if kurt := m4 / (m2 * m2); kurt < 5 || kurt > 7 {
		t.Errorf("COUNT: kurtosis %.2f, want 6 (Laplace), not 3 (Gaussian)", kurt)
	}
	if want := 2 * bs * bs; math.Abs(s2/want-1) > 5*math.Sqrt(5.0/k) {
		t.Errorf("SUM: variance %.2f, want 2 b^2 = %.2f", s2, want)
	}
}

// TestCountNoiseTable compares, for a sensitivity-1 COUNT released alone at
// (epsilon, delta), the Laplace noise's expected |noise| and variance with
// the Gaussian's (analytic calibration, accountant.Mu). The Laplace scale is
// the smallest b = 1/eps0 whose profile delta(eps) = 1 - e^((eps - eps0)/2)
// meets delta, i.e. eps0 = eps - 2 log(1 - delta); the PLD accountant must
// certify the same eps0 independently. Run with -v for the table in docs/protected-mode.md.
func TestCountNoiseTable(t *testing.T) {
	t.Logf("| epsilon | delta | Laplace b | Laplace E|Z| | Laplace Var | Gaussian sigma | Gaussian E|Z| | Gaussian Var | cheaper (variance) | cheaper (E|Z|) |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|")
	for _, eps := range []float64{0.1, 0.5, 1, 2, 4} {
		for _, delta := range []float64{1e-5, 1e-2, 0.1} {
			eps0 := eps - 2*math.Log1p(-delta)
			got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: eps0}}, delta)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-eps) > 2e-3*eps+1e-4 {
				t.Errorf("eps %v delta %v: the accountant certifies Laplace(eps0 = %v) at epsilon %v, want %v", eps, delta, eps0, got, eps)
			}
			b := 1 / eps0
			mu, err := accountant.Mu(eps, delta)
			if err != nil {
				t.Fatal(err)
			}
			s := 1 / mu
			absL, varL := b, 2*b*b
			absG, varG := s*math.Sqrt(2/math.Pi), s*s
			pick := func(l, g float64) string {
				if l < g {
					return "Laplace"
				}
				return "Gaussian"
			}
			t.Logf("| %g | %g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %s | %s |", eps, delta, b, absL, varL, s, absG, varG, pick(varL, varG), pick(absL, absG))
		}
	}
}
