package dpselect

import (
	"errors"
	"strings"
	"testing"
)

// A DP statement holding a bind parameter, in any of SQLite's forms, is this
// package's (IsDP), so that it is refused in words rather than handed to
// SQLite, which cannot read its OPTIONS; Parse names the parameter, where
// it is, and what to write instead.
func TestParamRefused(t *testing.T) {
	const dp = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE age >= "
	for _, p := range []string{"?", "?1", "?12", ":name", "@x", "$x", "$a::b"} {
		for _, src := range []string{dp + p, "EXPLAIN " + dp + p,
			"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = " + p + ") COUNT(*) FROM t",
			"WITH a AS (SELECT * FROM t WHERE x = " + p + ") SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a"} {
			if !IsDP(src) {
				t.Errorf("IsDP(%q) = false: SQLite would get it", src)
			}
			_, err := Parse(src)
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos != strings.Index(src, p) {
				t.Fatalf("Parse(%q): %v, want a refusal at offset %d", src, err, strings.Index(src, p))
			}
			want := "bind parameters are not accepted in a protected statement (found " + p + " at offset "
			if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "write the value inline as a literal") ||
				strings.Contains(msg, "accepted: SELECT") {
				t.Errorf("Parse(%q): %q", src, msg)
			}
		}
	}
	// Not a DP statement: SQLite's to run (and bind).
	if IsDP("SELECT * FROM t WHERE x = ?") {
		t.Error("a plain SELECT with a parameter is routed to protected mode")
	}
	// A parameter-like text inside a string or quoted name is no parameter.
	if _, err := Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE "?x" = ':a' AND b = '?'`); err != nil {
		t.Errorf("quoted ? and :a: %v", err)
	}
}
