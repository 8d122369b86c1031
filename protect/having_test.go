package protect

import (
	"database/sql"
	"fmt"
	"math"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// HAVING compares integers exactly, as SQLite does, at and beyond 2^53
// where float64 no longer holds every integer: a count of 2^53 + 1 is
// greater than 2^53, unequal to it, and not in a list holding it.
func TestHavingBigIntegers(t *testing.T) {
	const p53 = int64(1) << 53
	for _, tc := range []struct {
		n    int64
		cond string
		want bool
	}{
		{p53 + 1, "n > 9007199254740992", true},
		{p53 + 1, "n = 9007199254740992", false},
		{p53 + 1, "n <> 9007199254740992", true},
		{p53 + 1, "n >= 9007199254740993", true},
		{p53 + 1, "n > 9007199254740993", false},
		{p53, "n < 9007199254740993", true},
		{p53 + 1, "n IN (9007199254740992, 9007199254740994)", false},
		{p53 + 1, "n BETWEEN 9007199254740993 AND 9007199254740993", true},
		{p53 + 1, "n - 1 = 9007199254740992", true},
		{p53 + 1, "n = 9007199254740992.0", false}, // a real that is exactly 2^53
		{p53 + 1, "n > 9007199254740992.0", true},
		{math.MaxInt64, "n < 9223372036854775807.0", true}, // the real is 2^63
		{math.MaxInt64, "n = 9223372036854775806", false},
		{math.MinInt64, "n = -9223372036854775808.0", true},
		// Literals read as SQLite reads them: decimal with leading zeros,
		// hexadecimal as 64-bit two's complement.
		{10, "n = 010", true}, {8, "n = 010", false}, {16, "n = 0x10", true}, {255, "n = 0xff", true},
		{math.MaxInt64, "n < 9223372036854775808", true}, // a real: too large for an integer
	} {
		st, err := dpselect.Parse("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t HAVING " + tc.cond)
		if err != nil {
			t.Fatal(err)
		}
		h := &havingClause{cond: st.Having, cols: map[string]int{"n": 0}}
		if got := h.keep([]any{tc.n}); got != tc.want {
			t.Errorf("HAVING %s with n = %d: %v, want %v", tc.cond, tc.n, got, tc.want)
		}
	}
}

// Every comparison of an integer and a real, or two integers, near 2^53 and
// 2^63 agrees with SQLite's own.
func TestHavingComparisonsMatchSQLite(t *testing.T) {
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const p53 = int64(1) << 53
	vals := []any{int64(0), int64(-1), int64(1), p53 - 1, p53, p53 + 1, p53 + 2, -p53 - 1, int64(math.MaxInt64), int64(math.MinInt64),
		int64(math.MaxInt64 - 1), 0.0, 0.5, -0.5, float64(p53), float64(p53 + 2), -float64(p53), 9.2233720368547758e18,
		-9.2233720368547758e18, 9.223372036854775e18, 1e300, -1e300, math.Inf(1), math.Inf(-1), 2.5, -2.5, float64(p53) - 0.5}
	for _, a := range vals {
		for _, b := range vals {
			for _, op := range []string{"=", "<>", "<", "<=", ">", ">="} {
				var want int
				if err := db.QueryRow("SELECT ?1 "+op+" ?2", a, b).Scan(&want); err != nil {
					t.Fatal(err)
				}
				st, err := dpselect.Parse("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS a FROM t HAVING a " + op + " b")
				if err != nil {
					t.Fatal(err)
				}
				h := &havingClause{cond: st.Having, cols: map[string]int{"a": 0, "b": 1}}
				if got := h.keep([]any{a, b}); got != (want == 1) {
					t.Errorf("%s %s %s: HAVING %v, SQLite %d", fmt.Sprint(a), op, fmt.Sprint(b), got, want)
				}
			}
		}
	}
}
