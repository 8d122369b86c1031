package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/serve"
)

// A statement at (epsilon, delta) takes Laplace noise by default (noise =
// 'auto'), whose charge has no finite mu: the response still parses, states
// the scope's epsilon, and carries OPTIONS confidence's interval columns;
// the ledger lists the charge; EXPLAIN is answered without a charge.
func TestLaplaceStatementAndIntervals(t *testing.T) {
	c := newClinic(t, 400, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{})
	ctx := context.Background()
	cl := client(hs, tok)
	res, err := cl.Query(ctx, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, confidence = 0.95)
		sex, COUNT(*) AS n, AVG(bmi, contribution_bounds_per_group => (18, 43)) AS m FROM patients GROUP BY sex ORDER BY sex`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sex", "n", "n_lo", "n_hi", "m", "m_lo", "m_hi"}; !slices.Equal(res.Columns, want) || len(res.Rows) != 2 {
		t.Fatalf("columns %v rows %v", res.Columns, res.Rows)
	}
	if res.Charge == nil || !math.IsInf(float64(res.Charge.Mu), 1) || !(res.Charge.Epsilon > 0.99 && res.Charge.Epsilon <= 1.0001) {
		t.Errorf("charge %+v, want no mu (Laplace) and the scope's epsilon about 1", res.Charge)
	}
	if c.charges(t, "a") != 1 {
		t.Fatalf("%d charges", c.charges(t, "a"))
	}
	l, err := cl.Ledger(ctx)
	if err != nil || len(l.Entries) != 2 || l.Entries[1].Mechanism != "composite" {
		t.Fatalf("ledger %+v %v", l, err)
	}
	// EXPLAIN answers the plan and charges nothing.
	ex, err := cl.Query(ctx, `EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) sex, COUNT(*) AS n FROM patients GROUP BY sex`)
	if err != nil || ex.Charge != nil || len(ex.Columns) == 0 || ex.Columns[0] != "part" || c.charges(t, "a") != 1 {
		t.Fatalf("EXPLAIN over the service: %+v, %v (%d charges)", ex, err, c.charges(t, "a"))
	}
	// The raw JSON carries the intervals under their names.
	req, _ := http.NewRequest("POST", hs.URL+"/v1/query", strings.NewReader(`{"sql": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, confidence = 0.9) COUNT(*) AS n FROM patients"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var raw struct {
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || !slices.Equal(raw.Columns, []string{"n", "n_lo", "n_hi"}) {
		t.Fatalf("response %s: %v", body, err)
	}
}
