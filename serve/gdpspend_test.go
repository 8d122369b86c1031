package serve_test

import (
	"context"
	"testing"

	"github.com/dpsql/dpsql/serve"
)

// The attack: an analyst spends the scope's budget (shared with the other
// analysts of the scope) with a plain statement whose response reports no
// charge. gdp_spend charges the connection's scope, and its name escaped the
// service's "dp_" filter.
func TestGdpSpendNotOverHTTP(t *testing.T) {
	c := newClinic(t, 20, map[string]float64{"default": 10})
	tok := c.account(t, "mallory", "default")
	_, hs := c.start(t, serve.Config{})
	cl := client(hs, tok)
	before := c.ledger(t)
	for _, q := range []string{`SELECT gdp_spend(5)`, `SELECT GDP_SPEND(5, 'x')`, `SELECT "gdp_spend"(5)`, `SELECT main.x FROM (SELECT gdp_spend(5) AS x) AS main`} {
		res, err := cl.Query(context.Background(), q)
		if code := apiCode(err); code != serve.CodeRefused {
			t.Errorf("%s: code %q (%v), answer %+v; want refused", q, code, err, res)
		}
	}
	if c.ledger(t) != before {
		t.Error("a plain statement over HTTP charged the scope")
	}
	// The GDP conversions spend nothing and stay available.
	if _, err := cl.Query(context.Background(), `SELECT gdp_epsilon(1, 1e-5)`); err != nil {
		t.Errorf("gdp_epsilon: %v", err)
	}
}
