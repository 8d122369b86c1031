package sqlfuncs_test

import (
	"math"
	"sort"
	"strings"
	"testing"
)

// TestLaplaceSQL draws from dp_laplace and checks the law (one-sample KS
// against the Laplace law of the recorded scale) and the ledger.
func TestLaplaceSQL(t *testing.T) {
	db := openDB(t, `SELECT dp_init_epsilon(10, 1e-5)`)
	const n, x = 400, 3.0
	zs := make([]float64, n)
	for i := range zs {
		if err := db.QueryRow(`SELECT dp_laplace(?, 2, 0.01)`, x).Scan(&zs[i]); err != nil {
			t.Fatal(err)
		}
		zs[i] -= x
	}
	var scale, sens, eps float64
	var kind string
	if err := db.QueryRow(`SELECT mechanism, json_extract(params, '$.sigma'), json_extract(params, '$.sensitivity'), json_extract(params, '$.epsilon') FROM dp_ledger WHERE kind = 'charge' LIMIT 1`).Scan(&kind, &scale, &sens, &eps); err != nil {
		t.Fatal(err)
	}
	if kind != "laplace" || eps != 0.01 || !(sens > 2) || !(sens/scale <= eps) || scale > 200*(1+0x1p-14) {
		t.Errorf("ledger: %s scale %v sensitivity %v epsilon %v", kind, scale, sens, eps)
	}
	sort.Float64s(zs)
	d := 0.0
	for i, z := range zs {
		c := 0.5 * math.Exp(z/scale)
		if z > 0 {
			c = 1 - 0.5*math.Exp(-z/scale)
		}
		d = math.Max(d, math.Max(math.Abs(float64(i+1)/n-c), math.Abs(c-float64(i)/n)))
	}
	// 1.95/sqrt(n): the 0.1% critical value of the one-sample KS statistic.
	if crit := 1.95 / math.Sqrt(n); d > crit {
		t.Errorf("KS distance to Laplace(%v) = %.4f > %.4f", scale, d, crit)
	}
	if got := ledgerRows(t, db); got != n {
		t.Errorf("%d ledger rows for %d calls", got, n)
	}
	// 400 pure 0.01-DP releases: epsilon at delta 1e-5 is well below 4.
	var e float64
	if err := db.QueryRow(`SELECT dp_epsilon(1e-5)`).Scan(&e); err != nil || !(e > 0.3 && e < 4) {
		t.Errorf("dp_epsilon after 400 Laplace(0.01) releases = %v, %v", e, err)
	}
}

// TestTruncatedLaplaceSQL checks the support, the closed-form charge and that
// the scope's rigorous epsilon is the calibrated one.
func TestTruncatedLaplaceSQL(t *testing.T) {
	db := openDB(t, `SELECT dp_init_epsilon(1.01, 1e-5)`)
	var y float64
	if err := db.QueryRow(`SELECT dp_tlaplace(0, 1, 1, 1e-5)`).Scan(&y); err != nil {
		t.Fatal(err)
	}
	var support, delta float64
	var kind string
	db.QueryRow(`SELECT mechanism, json_extract(params, '$.support'), json_extract(params, '$.delta') FROM dp_ledger WHERE kind = 'charge'`).Scan(&kind, &support, &delta)
	if kind != "truncated_laplace" || math.Abs(y) > support || !(delta <= 1e-5*(1+1e-9)) {
		t.Errorf("%s: y %v support %v delta %v", kind, y, support, delta)
	}
	var e float64
	if err := db.QueryRow(`SELECT dp_epsilon(1e-5)`).Scan(&e); err != nil || e < 0.999 || e > 1.005 {
		t.Errorf("dp_epsilon(1e-5) after one (1, 1e-5) truncated Laplace = %v, %v", e, err)
	}
	// A second one does not fit the budget: refused, nothing recorded.
	if err := db.QueryRow(`SELECT dp_tlaplace(0, 1, 1, 1e-5)`).Scan(&y); err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("over-budget dp_tlaplace: %v", err)
	}
	if got := ledgerRows(t, db); got != 1 {
		t.Errorf("%d ledger rows, want 1", got)
	}
	// Support never exceeded in SQL either (the 10^6-draw test is in release).
	db2 := openDB(t, `SELECT dp_init_epsilon(1000, 0.5)`)
	for range 12 {
		if err := db2.QueryRow(`SELECT dp_tlaplace(0, 1, 2, 0.01)`).Scan(&y); err != nil {
			t.Fatal(err)
		}
		db2.QueryRow(`SELECT json_extract(params, '$.support') FROM dp_ledger WHERE kind = 'charge' LIMIT 1`).Scan(&support)
		if math.Abs(y) > support {
			t.Fatalf("dp_tlaplace drew %v outside its support %v", y, support)
		}
	}
}

func TestNoiseBadInput(t *testing.T) {
	db := openDB(t, `SELECT dp_init_epsilon(100, 1e-5)`)
	for _, c := range []struct{ q, want string }{
		{`SELECT dp_laplace(1, 1)`, "dp_laplace: takes (x, sensitivity, epsilon)"},
		{`SELECT dp_laplace(1, 0, 1)`, "dp_laplace: sensitivity must be > 0"},
		{`SELECT dp_laplace(1, -1, 1)`, "dp_laplace: sensitivity must be > 0"},
		{`SELECT dp_laplace(1, 1, 0)`, "dp_laplace: epsilon must be > 0"},
		{`SELECT dp_laplace(1, 1, -2)`, "dp_laplace: epsilon must be > 0"},
		{`SELECT dp_laplace(NULL, 1, 1)`, "dp_laplace: x must be a number"},
		{`SELECT dp_laplace('a', 1, 1)`, "dp_laplace: x must be a number"},
		{`SELECT dp_laplace(1e309, 1, 1)`, "dp_laplace: x must be finite"},
		{`SELECT dp_laplace(1, 1e309, 1)`, "dp_laplace: sensitivity must be finite"},
		{`SELECT dp_laplace(1, 1, 1e-320)`, "dp_laplace: noise scale"},
		{`SELECT dp_tlaplace(1, 1, 1, 0.5)`, "dp_tlaplace: delta must lie strictly between 0 and 0.5"},
		{`SELECT dp_tlaplace(1, 1, 1, 0)`, "dp_tlaplace: delta must lie strictly between 0 and 0.5"},
		{`SELECT dp_tlaplace(1, 1, 1, -0.1)`, "dp_tlaplace: delta must lie strictly between 0 and 0.5"},
		{`SELECT dp_tlaplace(1, 1, 1)`, "dp_tlaplace: takes (x, sensitivity, epsilon, delta)"},
		{`SELECT dp_tlaplace(1, 1, 0, 0.1)`, "dp_tlaplace: epsilon must be > 0"},
	} {
		var v any
		err := db.QueryRow(c.q).Scan(&v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.q, err, c.want)
		}
	}
	if got := ledgerRows(t, db); got != 0 {
		t.Errorf("bad input charged %d rows", got)
	}
}

// TestNoiseKindsCost plans a truncated Laplace release with dp_cost (no
// charge): its rigorous epsilon at its own delta is its epsilon.
func TestNoiseKindsCost(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	a := math.Log1p(math.Expm1(1)/(2*1e-5)) * (1 + 1e-6)
	var e float64
	q := `SELECT dp_cost(json_object('mechanism', 'truncated_laplace', 'sensitivity', 1, 'sigma', 1, 'support', ?), 1e-5)`
	if err := db.QueryRow(q, a).Scan(&e); err != nil || e < 0.999 || e > 1.005 {
		t.Errorf("dp_cost of a (1, 1e-5) truncated Laplace: %v, %v", e, err)
	}
	if got := ledgerRows(t, db); got != 0 {
		t.Errorf("dp_cost charged %d rows", got)
	}
}
