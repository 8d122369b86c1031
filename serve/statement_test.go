package serve_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/serve"
)

// SQLite reads a UTF-8 byte-order mark as white space anywhere in a
// statement, so "FROM <BOM>dp_budget" reads dp_budget. A filter that took the
// mark for part of a word let an analyst read every scope's budget and ledger
// over the service, and spend by hand with gdp_spend; the filter now reads
// SQL with SQLite's own token boundaries (package sqllex).
func TestByteOrderMarkHidesNoName(t *testing.T) {
	c := newClinic(t, 20, map[string]float64{"a": 5, "b": 5})
	tok := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{})
	cl := client(hs, tok)
	const bom = "\ufeff"
	before := c.ledger(t)
	for _, q := range []string{
		"SELECT * FROM " + bom + "dp_budget",
		"SELECT * FROM " + bom + "DP_LEDGER WHERE scope = 'b'",
		"SELECT * FROM " + bom + bom + "dp_account",
		"SELECT " + bom + "gdp_spend(1, 0.5)",
		bom + "SELECT * FROM dp_budget",
	} {
		res, err := cl.Query(context.Background(), q)
		if err == nil || apiCode(err) != serve.CodeRefused ||
			!strings.Contains(err.Error(), "dpsql object") && !strings.Contains(err.Error(), "gdp_spend") {
			t.Errorf("%q: answered %v, %v; want refused as a dpsql object or gdp_spend", q, res, err)
		}
	}
	if c.ledger(t) != before {
		t.Error("a refused statement charged")
	}
	// The mark alone is white space: a public SELECT after it still runs.
	if _, err := cl.Query(context.Background(), bom+"SELECT count(*) FROM wards"); err != nil {
		t.Errorf("a SELECT after a byte-order mark: %v", err)
	}
}
