package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"testing"
)

// Joins with one public table (join.go): one person's effect on every
// figure stays within what the unjoined statement is charged for, however
// often a public table repeats their key; the charge is the unjoined
// statement's; refused forms say what is accepted.

// joinNeighbours returns neighbours25's engines with two public tables:
// persons(pid, tag), where the heavy person's pid 999 is repeated 100 times
// (with 100 tags) and everyone else's once, and lookup(g, region), where the
// heavy person's own keys 'd' (one region) and 'c' (20 regions) are repeated
// 50 and 20 times (a join on a non-unit column that multiplies a person),
// 'a' and '1' once, and 'b' has no row (the LEFT JOIN's unmatched rows).
// Everyone else keeps all their joined rows under bounding, so the
// neighbours' exact figures differ by the heavy person's kept rows alone.
func joinNeighbours(t *testing.T, p Policy, more ...string) (e0, e1 *Engine) {
	t.Helper()
	return neighbours25(t, p, append([]string{
		`CREATE TABLE persons (pid INTEGER, tag TEXT)`,
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 59) INSERT INTO persons SELECT i, 'tag' || (i % 3) FROM s`,
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 99) INSERT INTO persons SELECT 999, 'own' || i FROM s`,
		`CREATE TABLE lookup (g TEXT, region TEXT)`,
		`INSERT INTO lookup VALUES ('a', 'ra')`,
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 49) INSERT INTO lookup SELECT 'd', 'dd' FROM s`,
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 19) INSERT INTO lookup SELECT 'c', 'c' || i FROM s`,
		`INSERT INTO lookup VALUES ('1', 'one')`,
	}, more...)...)
}

// A public lookup table that repeats a person's key 100 times (and a join
// on a non-unit column that repeats a group's key 50 times, a LEFT JOIN with
// unmatched rows, GROUP BY a public column with a hundred values for the
// heavy person) moves each released figure by at most the unjoined
// statement's sensitivity (max_rows per group, max_groups groups), and the
// charge is the unjoined statement's. Outcome: held.
func TestAttackJoinNeighbourSensitivity(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}, MaxLength: map[string]int{"pid": 20, "g": 20}}
	e0, e1 := joinNeighbours(t, p)
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	for _, c := range []struct{ joined, plain string }{
		{`COUNT(*) AS n, SUM(x) AS s, COUNT(DISTINCT x) AS xs FROM t JOIN persons ON t.pid = persons.pid`,
			`COUNT(*) AS n, SUM(x) AS s, COUNT(DISTINCT x) AS xs FROM t`},
		{`tag, COUNT(*) AS n, AVG(x) AS a FROM t AS p INNER JOIN persons AS q ON p.pid = q.pid GROUP BY tag`,
			`g, COUNT(*) AS n, AVG(x) AS a FROM t GROUP BY g`},
		{`region, COUNT(*) AS n, MEDIAN(x) AS m FROM t LEFT JOIN lookup USING (g) GROUP BY region`,
			`g, COUNT(*) AS n, MEDIAN(x) AS m FROM t GROUP BY g`},
		{`t.g, COUNT(*) AS n, SUM(x) AS s FROM t LEFT OUTER JOIN lookup AS l ON l.g = t.g WHERE l.region IS NOT 'c3' GROUP BY t.g`,
			`g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g`},
	} {
		q := dp + c.joined
		plain, _ := exact(t, e0, dp+c.plain)
		for rep := range 4 {
			pl0, g0 := exact(t, e0, q)
			pl1, g1 := exact(t, e1, q)
			if fmt.Sprint(pl0.mech, pl0.details) != fmt.Sprint(pl1.mech, pl1.details) ||
				fmt.Sprint(pl0.mech) != fmt.Sprint(plain.mech) {
				t.Fatalf("%.60s: the charge depends on the data or the join:\n%v\n%v\nunjoined %v", q, pl0.mech, pl1.mech, plain.mech)
			}
			l1, l2 := norms(pl0, g0, pl1, g1)
			tight := 0.0
			for vi, v := range pl0.values {
				norm := float64(v.Rows) * v.Bound
				if v.Fixed {
					norm = float64(v.Rows) * (v.Bound + v.Quantum/2)
				}
				G := float64(pl0.maxGroups)
				if l2[vi] > norm*math.Sqrt(G)+1e-9 || l1[vi] > norm*G+1e-9 {
					t.Errorf("%.60s (run %d): one person moves %s by L1 %g, L2 %g; charged for L2 %g (L1 %g)",
						q, rep, v.Name, l1[vi], l2[vi], norm*math.Sqrt(G), norm*G)
				}
				tight = max(tight, l2[vi]/(norm*math.Sqrt(G)))
			}
			if tight < 0.99 {
				t.Errorf("%.60s (run %d): the heavy person moves no value by its full sensitivity (at most %.2f of it)", q, rep, tight)
			}
		}
	}
}

// Exactly: the count over a join that repeats the heavy person's key 100
// times moves by max_rows x max_groups (here 2 x 1), not 6,000.
func TestAttackJoinRepeatedKeyCount(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 1, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}, MaxLength: map[string]int{"pid": 20, "g": 20}}
	e0, e1 := joinNeighbours(t, p)
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t JOIN persons USING (pid)`
	pl0, g0 := exact(t, e0, q)
	pl1, g1 := exact(t, e1, q)
	if l1, _ := norms(pl0, g0, pl1, g1); l1[0] != 2 {
		t.Fatalf("the heavy person moves the joined count by %g rows, want max_rows = 2", l1[0])
	}
}

// Each row a person (no privacy unit): a row's joined copies count once, in
// one group. Outcome: held.
func TestAttackJoinRowsArePersons(t *testing.T) {
	p := Policy{MaxGroups: 1, MaxRows: 1, Bounds: map[string][2]float64{"x": {0, 100}}, MaxLength: map[string]int{"pid": 20, "g": 20}}
	e0, e1 := joinNeighbours(t, p)
	for _, q := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n, SUM(x) AS s FROM t JOIN lookup USING (g)`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) region, COUNT(*) AS n FROM t JOIN lookup USING (g) GROUP BY region`,
	} {
		pl0, g0 := exact(t, e0, q)
		pl1, g1 := exact(t, e1, q)
		l1, _ := norms(pl0, g0, pl1, g1)
		// The heavy person is 60 rows here (60 persons): each moves at most 1
		// row, so the count moves by at most 60 rows, not 60 x 50.
		if l1[0] > 60 {
			t.Errorf("%.60s: 60 rows move the count by %g, want at most 60 (one per row)", q, l1[0])
		}
		if !strings.Contains(rewrite(pl0), joinUnit) {
			t.Errorf("the rewrite does not bound rows one per person: %s", rewrite(pl0))
		}
	}
}

// The rewritten SQL: the joined rows are the rows level's input, bounded
// per person above it.
func TestJoinRewriteShown(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}, MaxLength: map[string]int{"pid": 20, "g": 20}}
	e0, _ := joinNeighbours(t, p)
	pl, _ := exact(t, e0, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) region, COUNT(*) AS n FROM t LEFT JOIN lookup AS l ON t.g = l.g GROUP BY region`)
	sql := rewrite(pl)
	t.Log(sql)
	for _, want := range []string{
		`FROM main."t" AS _p LEFT JOIN main."lookup" AS _q ON _p."g" = _q."g" WHERE (octet_length(_p."g") > 20) IS NOT 1`,
		`_q."region" AS "region"`, `PARTITION BY "pid"`, `WHERE _rn <= 2`, `WHERE _gn <= 2`,
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("the rewrite lacks %s:\n%s", want, sql)
		}
	}
}

// Refused joins say what is refused and what is accepted.
func TestJoinRefusals(t *testing.T) {
	p := Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2, Bounds: map[string][2]float64{"x": {0, 100}}, MaxLength: map[string]int{"pid": 20, "g": 20}}
	e0, _ := joinNeighbours(t, p, `CREATE TABLE big (g TEXT)`,
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 2999) INSERT INTO big SELECT 'a' FROM s`,
		`CREATE VIEW v AS SELECT * FROM t`)
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	conn := mustConn(t, e0)
	for _, c := range []struct{ q, want string }{
		{`COUNT(*) FROM t JOIN t AS u ON t.pid = u.pid`, "joined with itself"},
		{`COUNT(*) FROM t JOIN dp_policy ON t.g = dp_policy.name`, "dpsql's or SQLite's own tables"},
		{`COUNT(*) FROM t JOIN v USING (g)`, "no table \"v\" in the main schema"},
		{`COUNT(*) FROM t CROSS JOIN lookup`, "CROSS joins are not accepted"},
		{`COUNT(*) FROM t RIGHT JOIN lookup USING (g)`, "RIGHT joins are not accepted"},
		{`COUNT(*) FROM t FULL JOIN lookup USING (g)`, "FULL joins are not accepted"},
		{`COUNT(*) FROM t NATURAL JOIN lookup`, "NATURAL joins are not accepted"},
		{`COUNT(*) FROM t, lookup`, "this join is not accepted"},
		{`COUNT(*) FROM t JOIN lookup ON t.g < lookup.g`, "ON takes equalities of two columns"},
		{`COUNT(*) FROM t JOIN lookup ON t.g = lookup.g OR t.x = 1`, "ON takes equalities of two columns"},
		{`COUNT(*) FROM t JOIN lookup ON t.g = lookup.g JOIN persons USING (pid)`, "one join only"},
		{`COUNT(*) FROM t JOIN lookup ON t.g = t.x`, "compares two columns of one table"},
		{`SUM(lookup.region) FROM t JOIN lookup USING (g)`, "aggregates read the protected table's columns only"},
		{`COUNT(region) FROM t JOIN lookup USING (g)`, "aggregates read the protected table's columns only"},
		{`COUNT(*) FROM t JOIN lookup ON t.g = lookup.g WHERE g = 'a'`, `column "g" (WHERE) is in both t and lookup`},
		{`COUNT(*) FROM t JOIN big USING (g)`, "the join may do about"},
	} {
		_, err := e0.plan(context.Background(), conn, "default", dp+c.q)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a refusal with %q", c.q, err, c.want)
		}
	}
	cte := `WITH a AS (SELECT pid, g FROM t) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a JOIN lookup USING (g)`
	if _, err := e0.plan(context.Background(), conn, "default", cte); err == nil || !strings.Contains(err.Error(), "not through CTEs") {
		t.Errorf("a join through a CTE: got %v", err)
	}
}

func mustConn(t *testing.T, e *Engine) *sql.Conn {
	t.Helper()
	conn, err := e.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Each row a person, in a table whose rowid is an INTEGER PRIMARY KEY
// column the statement does not name: the bounding reads it (the authorizer
// names the column), and a row matched three times counts once.
func TestJoinRowsArePersonsIntegerPrimaryKey(t *testing.T) {
	p := Policy{MaxGroups: 1, MaxRows: 1, MaxLength: map[string]int{"g": 20}}
	e, db := testDB(t, 1e6, p, func(ins func(pid, g, x any)) { ins(1, "a", 1.0) })
	for _, q := range []string{`CREATE TABLE u (id INTEGER PRIMARY KEY, g TEXT)`,
		`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 40) INSERT INTO u(g) SELECT 'a' FROM s`,
		`CREATE TABLE l (g TEXT, k TEXT)`, `INSERT INTO l VALUES ('a', 'one'), ('a', 'two'), ('a', 'three')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := Protect(context.Background(), db, "u", p); err != nil {
		t.Fatal(err)
	}
	pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) k, COUNT(*) AS n FROM u JOIN l USING (g) GROUP BY k`)
	total := int64(0)
	for _, g := range gs {
		total += g.persons
	}
	if total != 40 {
		t.Errorf("40 rows matched 3 times each make %d person-groups, want 40:\n%s", total, rewrite(pl))
	}
}
