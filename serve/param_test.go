package serve_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/serve"
)

// The service refuses a DP statement with a bind parameter (it has no way
// to bind one) as protected mode does, code "refused", charging nothing,
// instead of passing SQLite's syntax error on.
func TestBindParameterRefused(t *testing.T) {
	c := newClinic(t, 100, map[string]float64{"a": 2})
	_, hs := c.start(t, serve.Config{})
	cl := client(hs, c.account(t, "alice", "a"))
	for _, p := range []string{"?", "?1", ":age", "@age", "$age"} {
		_, err := cl.Query(context.Background(), "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients WHERE age >= "+p)
		if apiCode(err) != serve.CodeRefused || !strings.Contains(err.Error(), "refused: WHERE: bind parameters are not accepted in a protected statement (found "+p) ||
			!strings.Contains(err.Error(), "write the value inline") {
			t.Errorf("%s: %v (code %q)", p, err, apiCode(err))
		}
	}
	if n := c.charges(t, "a"); n != 0 {
		t.Errorf("%d charges, want 0", n)
	}
}
