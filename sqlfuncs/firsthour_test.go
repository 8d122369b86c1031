package sqlfuncs_test

import (
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"
)

// TestGaussianVectorText checks that dp_gaussian takes a vector as JSON-array
// TEXT, as the releases do, and returns the float32 BLOB a BLOB input gives.
func TestGaussianVectorText(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1000)`)
	var out []byte
	if err := db.QueryRow(`SELECT dp_gaussian('[1, 2.5, -3]', 0.002, 1)`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	v, err := vector.Decode(out)
	if err != nil || len(v) != 3 {
		t.Fatalf("dp_gaussian of a JSON array: %v, %v", v, err)
	}
	for i, want := range []float32{1, 2.5, -3} {
		if d := v[i] - want; d > 0.05 || d < -0.05 { // sigma = 0.002/1: 25 sigma
			t.Errorf("coordinate %d = %v, want %v + small noise", i, v[i], want)
		}
	}
	var dim int
	if err := db.QueryRow(`SELECT json_extract(params, '$.dim') FROM dp_ledger WHERE kind = 'charge'`).Scan(&dim); err != nil || dim != 3 {
		t.Errorf("ledger dim = %d, %v; want 3", dim, err)
	}
}

// TestMessagesAsTheyRead pins the messages issue 13 named, as they now read;
// none of these calls charges anything.
func TestMessagesAsTheyRead(t *testing.T) {
	db := openDB(t, `SELECT dp_init(10)`)
	fillTrain(t, db, "train", 100, 4, 2)
	opts := func(kv string) string {
		return `SELECT dp_avgmix(features, label, json_object('into', 'r', 'mu', 1.0, 'classes', 2` + kv + `)) FROM train`
	}
	for _, tc := range []struct{ sql, want string }{
		// was "dp_avgmix: avgmix: m = 500 exceeds n = 100"
		{opts(`, 'n', 100, 'm', 500`), "dp_avgmix: m = 500 exceeds n = 100"},
		// was "dp_avgmix: option \"mu\" must be a float64, got string"
		{`SELECT dp_avgmix(features, label, json_object('into', 'r', 'mu', 'abc', 'classes', 2)) FROM train`,
			`dp_avgmix: option "mu" must be a number, got "abc"`},
		// was "dp_avgmix: option \"m\" must be a int, got number 2.5"
		{opts(`, 'm', 2.5`), `dp_avgmix: option "m" must be an integer, got 2.5`},
		{opts(`, 'T', '7'`), `dp_avgmix: option "T" must be an integer, got "7"`},
		{opts(`, 'sampling', 3`), `dp_avgmix: option "sampling" must be TEXT, got 3`},
		// the known options leave out the test-only "seed" in normal builds
		{opts(`, 'nosuch', 1`), `dp_avgmix: unknown option "nosuch" (known options: T, classes, cx, cy, delta, epsilon, into, lambda, m, mu, n, p, sampling` + seedIfEnabled + `)`},
		{`SELECT dp_avgmix(features, label, 'not json') FROM train`, `dp_avgmix: options are not a JSON object (pass json_object(...)); got not json`},
		// a BLOB where a number belongs points to the vector functions
		{`SELECT dp_gaussian(1, x'0000803f', 0.5)`, `dp_gaussian: sensitivity must be a number, got a BLOB; for a float32 vector, sum rows with dp_vec_sum(x, clip, mu) (clipped and noisy) or add noise with dp_gaussian(x, sensitivity, mu)`},
		{`SELECT dp_gaussian('ten', 1, 0.5)`, `dp_gaussian: x must be a number or a vector (float32 BLOB or JSON array TEXT such as '[1, 2.5]'), got TEXT "ten"`},
	} {
		var v any
		err := db.QueryRow(tc.sql).Scan(&v)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got  %v\n want %s", tc.sql, err, tc.want)
		}
	}
	if n := ledgerRows(t, db); n != 0 {
		t.Errorf("refused calls charged %d ledger rows", n)
	}
}

// TestWholeNumberOptions checks that an integer option given as a whole REAL
// (what json_object makes of 20.0 or of a REAL column) is accepted.
func TestWholeNumberOptions(t *testing.T) {
	db := openDB(t, `SELECT dp_init(10)`)
	fillTrain(t, db, "train", 200, 4, 2)
	var summary string
	q := `SELECT dp_avgmix(features, label, json_object('into', 'r', 'mu', 1.0, 'classes', 2.0, 'm', 20.0, 'T', 5e1)) FROM train`
	if err := db.QueryRow(q).Scan(&summary); err != nil {
		t.Fatalf("m = 20.0: %v", err)
	}
	if !strings.Contains(summary, `"m":20`) || !strings.Contains(summary, `"rows":50`) {
		t.Errorf("summary %s, want m = 20 and 50 rows", summary)
	}
}

// TestFailedStatementNamesItsCharges runs a statement whose first DP call
// succeeds and whose second fails: the first charge stands (it committed
// before its value existed), and the error says so.
func TestFailedStatementNamesItsCharges(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	if _, err := db.Exec(`CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	var a, b any
	err := db.QueryRow(`SELECT dp_gaussian(count(*),1,0.1), dp_gaussian(count(*),1,-1) FROM t`).Scan(&a, &b)
	want := "dp_gaussian: mu must be > 0, got -1; this statement had already committed 1 charge, which stands: ledger row 2 (dp_gaussian, mu = 0.1)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if n := ledgerRows(t, db); n != 1 {
		t.Fatalf("%d ledger rows, want the first call's charge", n)
	}
	// The next statement starts afresh: its own failure names no charge.
	err = db.QueryRow(`SELECT dp_gaussian(count(*),1,-1) FROM t`).Scan(&a)
	if want := "dp_gaussian: mu must be > 0, got -1"; err == nil || err.Error() != want {
		t.Fatalf("a fresh statement: err = %v, want %s", err, want)
	}
	// The same statement text run again: only its own execution's charges.
	for range 2 {
		err = db.QueryRow(`SELECT dp_gaussian(count(*),1,0.1), dp_gaussian(count(*),1,0.1), gdp_epsilon(-1, 1e-5) FROM t`).Scan(&a, &b, &b)
		if err == nil || !strings.HasSuffix(err.Error(), "this statement had already committed 2 charges, which stand: ledger rows 3 (dp_gaussian, mu = 0.1), 4 (dp_gaussian, mu = 0.1)") &&
			!strings.HasSuffix(err.Error(), "ledger rows 5 (dp_gaussian, mu = 0.1), 6 (dp_gaussian, mu = 0.1)") {
			t.Fatalf("err = %v", err)
		}
	}
}
