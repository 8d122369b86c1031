package sqlfuncs_test

import (
	"database/sql"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// vecTable creates table v(x) holding rows.
func vecTable(t *testing.T, db *sql.DB, name string, rows ...[]float32) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE ` + name + `(x)`); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO `+name+` VALUES (?)`, vector.Encode(r)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVecSumDistribution draws many dp_vec_sum releases of one table and
// checks them against the law they must have: the sum of the rows, each
// clipped to L2 norm clip, plus N(0, sigma^2) per coordinate with the sigma
// recorded in the ledger (sensitivity clip, calibrated as dp_gaussian does).
func TestVecSumDistribution(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1000)`)
	// Norms 5, 0.5, 13 and 2: with clip 2 the first and third are scaled down.
	vecTable(t, db, "v", []float32{3, 4, 0}, []float32{0.3, 0, 0.4}, []float32{0, -5, 12}, []float32{2, 0, 0})
	clipped := []float64{
		3.0/5*2 + 0.3 + 0 + 2,
		4.0/5*2 + 0 - 5.0/13*2 + 0,
		0 + 0.4 + 12.0/13*2 + 0,
	}
	const n, clip, mu = 1000, 2.0, 0.1 // 1000 releases compose to mu = 3.2
	z := make([][]float64, 3)
	for i := range n {
		var b []byte
		if err := db.QueryRow(`SELECT dp_vec_sum(x, ?, ?) FROM v`, clip, mu).Scan(&b); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		v, err := vector.Decode(b)
		if err != nil || len(v) != 3 {
			t.Fatalf("release %d: %v, %v", i, v, err)
		}
		for j := range v {
			z[j] = append(z[j], float64(v[j]))
		}
	}
	var sigma, sens float64
	var dim int
	if err := db.QueryRow(`SELECT json_extract(params, '$.sigma'), json_extract(params, '$.sensitivity'), json_extract(params, '$.dim') FROM dp_ledger WHERE kind = 'charge' LIMIT 1`).Scan(&sigma, &sens, &dim); err != nil {
		t.Fatal(err)
	}
	if sens != clip || dim != 3 || math.Abs(sigma-clip/mu) > 1e-3*clip/mu {
		t.Fatalf("ledger: sensitivity %v, dim %d, sigma %v; want %v, 3, about %v", sens, dim, sigma, clip, clip/mu)
	}
	if got := ledgerRows(t, db); got != n {
		t.Fatalf("%d ledger rows for %d releases", got, n)
	}
	for j, xs := range z {
		mean, sd := stat.MeanStdDev(xs, nil)
		// float32 output rounds by at most 2^-23 relative: far below 5 se.
		if se := sigma / math.Sqrt(n); math.Abs(mean-clipped[j]) > 5*se {
			t.Errorf("coordinate %d: mean %v, want the clipped sum %v +- %v", j, mean, clipped[j], 5*se)
		}
		if v, want := sd*sd, sigma*sigma; math.Abs(v-want) > 5*want*math.Sqrt(2.0/(n-1)) {
			t.Errorf("coordinate %d: variance %v, want %v", j, v, want)
		}
		u := make([]float64, n)
		for i, x := range xs {
			u[i] = (x - clipped[j]) / sigma
		}
		sort.Float64s(u)
		d := 0.0
		for i, x := range u {
			c := distuv.UnitNormal.CDF(x)
			d = math.Max(d, math.Max(math.Abs(float64(i+1)/n-c), math.Abs(c-float64(i)/n)))
		}
		// 1.95/sqrt(n): the 0.1% critical value of the one-sample KS
		// statistic. At 1% the three coordinates' tests failed about one
		// run in 30 by chance alone; the sampler's own law is checked
		// over millions of draws in package release.
		if crit := 1.95 / math.Sqrt(n); d > crit {
			t.Errorf("coordinate %d: KS distance to N(0,1) = %.4f > %.4f", j, d, crit)
		}
	}
}

// TestVecSumSensitivity is the attack of an adversary who knows every other
// row and adds one row of their choosing (huge, or just above the clip bound
// where float rounding could let it through): the release moves by at most
// clip, up to its noise. The noise cannot be made negligible (a scope's
// samplers' error caps what it can certify at epsilon of about 74), so the
// bound allows six standard deviations of the difference of two releases;
// TestVecSumClipExact checks the clipping itself exactly.
func TestVecSumSensitivity(t *testing.T) {
	base := [][]float32{{0.25, -0.5, 0.125}, {1, 1, 1}, {-3, 0.5, 2}}
	const clip, mu = 1.0, 4.0 // sigma = 0.25 per coordinate
	release := func(db *sql.DB, table string) []float64 {
		var b []byte
		if err := db.QueryRow(`SELECT dp_vec_sum(x, ?, ?) FROM `+table, clip, mu).Scan(&b); err != nil {
			t.Fatal(err)
		}
		v, _ := vector.Decode(b)
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	one := float32(math.Nextafter32(1, 2))
	for _, extra := range [][]float32{
		{3e38, 3e38, -3e38},                  // the largest float32s
		{1, 0, 0},                            // exactly on the bound
		{one, 0, 0},                          // one ulp above it
		{0.57735026, 0.57735026, 0.57735026}, // norm 1 up to float32 rounding
		{1e-30, 1e-30, 1e-30},
	} {
		db := openDB(t, `SELECT dp_init(10)`) // two releases of mu = 4 each
		vecTable(t, db, "d", base...)
		vecTable(t, db, "e", append(append([][]float32{}, base...), extra)...)
		without, with := release(db, "d"), release(db, "e")
		var d2 float64
		for j := range with {
			d2 += (with[j] - without[j]) * (with[j] - without[j])
		}
		sd := math.Sqrt(2*3) * clip / mu // of the noise difference's norm, roughly
		if d := math.Sqrt(d2); d > clip+6*sd {
			t.Errorf("adding %v moved the release by %v > clip %v + 6 sd %v", extra, d, clip, sd)
		}
	}
}

// TestVecSumRefusals: empty input, NaN/Inf, mismatched dimensions, bad clip
// or mu, or a number where a vector belongs, fail clearly and charge nothing.
func TestVecSumRefusals(t *testing.T) {
	db := openDB(t, `SELECT dp_init(10)`)
	vecTable(t, db, "good", []float32{1, 2}, []float32{3, 4})
	vecTable(t, db, "empty")
	vecTable(t, db, "dims", []float32{1, 2}, []float32{1, 2, 3})
	db.Exec(`CREATE TABLE nan(x); INSERT INTO nan VALUES (x'0000803f'), (x'0000c07f')`)
	db.Exec(`CREATE TABLE num(x); INSERT INTO num VALUES (1.5)`)
	for _, tc := range []struct{ sql, want string }{
		{`SELECT dp_vec_sum(x, 1, 0.5) FROM empty`, "dp_vec_sum: no rows to sum (empty input); nothing was charged"},
		{`SELECT dp_vec_sum(x, 1, 0.5) FROM dims`, "dp_vec_sum: x of row 2 has 3 dimensions, earlier rows have 2"},
		{`SELECT dp_vec_sum(x, 1, 0.5) FROM nan`, "dp_vec_sum: x of row 2: vector element 0 is NaN; vectors must be finite"},
		{`SELECT dp_vec_sum(x, 1, 0.5) FROM num`, "dp_vec_sum: x of row 1: vector must be a float32 BLOB or a JSON array, got REAL"},
		{`SELECT dp_vec_sum(x, 0, 0.5) FROM good`, "dp_vec_sum: clip must be > 0, got 0"},
		{`SELECT dp_vec_sum(x, 1, -1) FROM good`, "dp_vec_sum: mu must be > 0, got -1"},
		{`SELECT dp_vec_sum(x, 'a', 1) FROM good`, "dp_vec_sum: clip must be a number, got TEXT"},
		{`SELECT dp_vec_sum(x, 1e300, 1) FROM good`, "dp_vec_sum: clip must lie in [2^-100, 2^100], got 1e+300"},
		{`SELECT dp_vec_sum(x, rowid, 1) FROM good`, "dp_vec_sum: clip and mu differ at row 2: pass the same constants on every row"},
		{`SELECT dp_vec_sum(x, 1, 11) FROM good`, `privacy budget exceeded`},
	} {
		var b []byte
		err := db.QueryRow(tc.sql).Scan(&b)
		if err == nil || (err.Error() != tc.want && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s:\n got  %v\n want %s", tc.sql, err, tc.want)
		}
	}
	if n := ledgerRows(t, db); n != 0 {
		t.Errorf("refused calls charged %d ledger rows", n)
	}
	// JSON-array TEXT is a vector too.
	var b []byte
	if err := db.QueryRow(`SELECT dp_vec_sum(x, 6, 4) FROM (SELECT '[1, 2]' AS x UNION ALL SELECT '[3, 4]')`).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if v, _ := vector.Decode(b); len(v) != 2 || math.Abs(float64(v[0])-4) > 7.5 || math.Abs(float64(v[1])-6) > 7.5 { // sigma 6/4: 5 sigma
		t.Errorf("dp_vec_sum of JSON rows: %v, want about [4 6]", v)
	}
}
