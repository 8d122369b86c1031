package protect

import (
	"context"
	"strings"
	"testing"
)

// A public table of 5,000 rows is refused at the default max_length when
// the join would scan it for every protected row, and answered when an
// index on the ON column lets each protected row seek it (its work then
// grows with log2 of the public table's rows); the figures are those of
// the same join planned either way, and an index whose column compares
// differently from the protected one (another affinity) is not used.
func TestPublicJoinThroughIndex(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}}
	zips := func(name, typ string) []string {
		return []string{
			`CREATE TABLE ` + name + ` (g ` + typ + `, region TEXT)`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 4999) INSERT INTO ` + name +
				` SELECT CASE i % 1000 WHEN 0 THEN 'a' WHEN 1 THEN 'b' WHEN 2 THEN '1' ELSE 'z' || i END, 'r' || (i % 7) FROM s`,
		}
	}
	setup := append(append(zips("zips", "TEXT"), zips("zips2", "")...), zips("zips3", "TEXT")...)
	setup = append(setup, `CREATE INDEX zips2_g ON zips2(g)`, `CREATE INDEX zips3_g ON zips3(g)`)
	e0, _ := neighbours25(t, p, setup...)
	const q = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) region, COUNT(*) AS n FROM t JOIN %s ON t.g = %s.g GROUP BY region`
	ctx := context.Background()
	for _, c := range []struct{ table, want string }{
		{"zips", "join a smaller public table"},
		{"zips2", "join a smaller public table"}, // an index, but g has no type: t.g's TEXT affinity converts it
	} {
		_, err := e0.Query(ctx, "default", strings.ReplaceAll(q, "%s", c.table))
		if !IsRefusal(err) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: got %v, want a refusal saying %q", c.table, err, c.want)
		}
	}
	stmt := strings.ReplaceAll(q, "%s", "zips3")
	pl, gs := exact(t, e0, stmt)
	if pl.join.index != "zips3_g" || !strings.Contains(rewrite(pl), `main."zips3" AS _q INDEXED BY "zips3_g" ON`) {
		t.Fatalf("index %q, SQL %s", pl.join.index, rewrite(pl))
	}
	if pl.rowWork > MaxRowWork {
		t.Fatalf("row work %g over the limit", pl.rowWork)
	}
	var n, raw int64
	for _, g := range gs {
		n += g.vals[0]
	}
	if err := e0.db.QueryRow(`SELECT count(*) FROM t JOIN zips3 ON t.g = zips3.g`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	// Each of t's rows joins 5 zips rows of its g in 5 regions; a person keeps
	// at most 2 rows in each of 2 regions, so the bounded count is below the raw one.
	if n == 0 || n > raw {
		t.Fatalf("bounded joined count %d, raw %d", n, raw)
	}
	if _, err := e0.Query(ctx, "default", stmt); err != nil {
		t.Fatal(err)
	}
}
