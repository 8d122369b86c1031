package protect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// Joins of two protected tables on a shared privacy unit (pjoin.go).

// visitsSetup creates visits(pid, kind, cost), protected below: everyone
// of neighbours25's 60 persons has one visit (so that they keep all their
// joined rows, at most 2, under bounding, and the neighbours' figures differ
// by the heavy person's kept rows alone); the heavy person 999, in the
// second neighbour only, has 100 visits of 25 kinds (their own kinds and
// kinds others have), with costs beyond the bounds.
func visitsSetup(heavy bool) []string {
	s := []string{
		`CREATE TABLE visits (pid INTEGER, kind TEXT, cost REAL)`,
		`CREATE INDEX visits_pid ON visits(pid)`,
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 59) INSERT INTO visits SELECT i, 'k' || (i % 3), i % 7 FROM s`,
	}
	if heavy {
		s = append(s, `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 99) INSERT INTO visits SELECT 999, CASE WHEN i % 2 = 0 THEN 'k' || (i % 3) ELSE 'own' || (i % 25) END, 500 + i FROM s`)
	}
	return s
}

// pjoinNeighbours returns engines over two neighbouring files: t as
// neighbours25 fills it (protected with pt) and visits (protected with pv);
// the second file adds the heavy person 999's rows to both tables.
func pjoinNeighbours(t *testing.T, pt, pv Policy, more ...string) (e0, e1 *Engine) {
	t.Helper()
	return pjoinNeighboursVisits(t, pt, pv, true, more...)
}

// pjoinNeighboursVisits is pjoinNeighbours; heavyVisits false leaves the
// heavy person out of visits (present in t only).
func pjoinNeighboursVisits(t *testing.T, pt, pv Policy, heavyVisits bool, more ...string) (e0, e1 *Engine) {
	t.Helper()
	e0, e1 = neighbours25(t, pt)
	for i, e := range []*Engine{e0, e1} {
		db, err := sql.Open("sqlite3", "file:"+e.path+"?_journal_mode=WAL&_busy_timeout=10000")
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range append(visitsSetup(i == 1 && heavyVisits), more...) {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		if err := Protect(context.Background(), db, "visits", pv); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	return e0, e1
}

func clinicPolicies() (pt, pv Policy) {
	pt = Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 3, Persons: "clinic",
		Bounds: map[string][2]float64{"x": {0, 100}}, MaxLength: map[string]int{"pid": 20}}
	pv = Policy{PrivacyUnit: "pid", MaxGroups: 3, MaxRows: 2, Persons: "clinic",
		Bounds: map[string][2]float64{"cost": {0, 50}}, MaxLength: map[string]int{"kind": 20}}
	return pt, pv
}

// One person with 60 rows in t and 100 in visits (the second neighbour
// only) moves every figure a join of the two tables draws noise for by at
// most its charged sensitivity: max_rows = min(3, 2) rows in each of
// max_groups = min(2, 3) groups, bounded after the join; INNER and LEFT,
// keys and aggregates from either table, MEDIAN and COUNT(DISTINCT). The
// charge is the same on both neighbours. Outcome: held.
func TestAttackProtectedJoinNeighbours(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, e1 := pjoinNeighbours(t, pt, pv)
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	for _, q := range []string{
		`COUNT(*) AS n, SUM(cost) AS s, SUM(x) AS sx FROM t JOIN visits AS v ON t.pid = v.pid`,
		`kind, COUNT(*) AS n, AVG(cost) AS a FROM t JOIN visits AS v ON v.pid = t.pid GROUP BY kind`,
		`g, COUNT(*) AS n, COUNT(cost) AS nc, MEDIAN(cost) AS m FROM t LEFT JOIN visits USING (pid) GROUP BY g`,
		`t.g, COUNT(DISTINCT kind) AS kinds, COUNT(DISTINCT t.pid) AS persons FROM t AS t LEFT OUTER JOIN visits AS v ON t.pid = v.pid AND t.g = v.kind GROUP BY t.g`,
	} {
		q = dp + q
		for rep := range 3 {
			pl0, g0 := exact(t, e0, q)
			pl1, g1 := exact(t, e1, q)
			if fmt.Sprint(pl0.mech, pl0.details) != fmt.Sprint(pl1.mech, pl1.details) {
				t.Fatalf("%.60s: the charge depends on the data:\n%v\n%v", q, pl0.mech, pl1.mech)
			}
			if pl0.maxRows != 2 || pl0.maxGroups != 2 && len(pl0.keys) > 0 {
				t.Fatalf("%.60s: bounded by max_rows %d, max_groups %d; want the stricter policy's 2 and 2", q, pl0.maxRows, pl0.maxGroups)
			}
			l1, l2 := norms(pl0, g0, pl1, g1)
			moved := false
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
				moved = moved || l1[vi] > 0
			}
			if !moved {
				t.Errorf("%.60s: the heavy person moved nothing: the test cannot fail", q)
			}
		}
	}
}

// A LEFT JOIN where the person who differs is missing from the joined
// table: their rows of t come out with NULL visits, bounded as any; the
// neighbours' figures differ by at most the charged sensitivity, and an
// INNER join does not see them at all. Outcome: held.
func TestAttackProtectedJoinMissingSide(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, e1 := pjoinNeighboursVisits(t, pt, pv, false)
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	for _, c := range []struct {
		q     string
		moved bool
	}{
		{`g, COUNT(*) AS n, COUNT(cost) AS nc, SUM(cost) AS s FROM t LEFT JOIN visits AS v ON t.pid = v.pid GROUP BY g`, true},
		{`kind, COUNT(*) AS n, SUM(x) AS sx FROM t LEFT JOIN visits AS v ON t.pid = v.pid GROUP BY kind`, true},
		{`COUNT(*) AS n, SUM(x) AS sx FROM t JOIN visits AS v ON t.pid = v.pid`, false},
	} {
		q := dp + c.q
		pl0, g0 := exact(t, e0, q)
		pl1, g1 := exact(t, e1, q)
		l1, l2 := norms(pl0, g0, pl1, g1)
		moved := false
		for vi, v := range pl0.values {
			norm := float64(v.Rows) * v.Bound
			if v.Fixed {
				norm = float64(v.Rows) * (v.Bound + v.Quantum/2)
			}
			G := float64(pl0.maxGroups)
			if l2[vi] > norm*math.Sqrt(G)+1e-9 || l1[vi] > norm*G+1e-9 {
				t.Errorf("%.70s: one person moves %s by L1 %g, L2 %g; charged for L2 %g", q, v.Name, l1[vi], l2[vi], norm*math.Sqrt(G))
			}
			moved = moved || l1[vi] > 0
		}
		if moved != c.moved {
			t.Errorf("%.70s: the person missing from visits moved a figure: %v, want %v", q, moved, c.moved)
		}
	}
}

// The same join without the bounding after it would let the heavy person's
// 60 x 100 pairs count: the exact COUNT(*) of the joined rows differs by at
// most max_rows = 2 between the neighbours, where the raw join differs by
// thousands; and the rewrite's join itself gives each of their rows of t at
// most K of their visits. Outcome: held.
func TestAttackProtectedJoinPersonRepeated(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, e1 := pjoinNeighbours(t, pt, pv)
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t JOIN visits ON t.pid = visits.pid`
	_, g0 := exact(t, e0, q)
	pl1, g1 := exact(t, e1, q)
	if d := g1[0].vals[0] - g0[0].vals[0]; d < 1 || d > 2 {
		t.Fatalf("the heavy person moves the joined count by %d; want 1 or 2 (max_rows 2, one group)", d)
	}
	// Before the bounding, the join itself pairs each of the heavy
	// person's 60 rows of t with at most K = 2 of their 100 visits: the
	// work per row of t is bounded.
	var joined int64
	if err := e1.db.QueryRow(`SELECT count(*) FROM ` + pl1.joinedRows() + ` WHERE pid = 999`).Scan(&joined); err != nil {
		t.Fatal(err)
	}
	if pl1.join.prot.k != 2 || joined != 60*2 {
		t.Fatalf("K = %d, the heavy person has %d joined rows; want K = 2 and 120", pl1.join.prot.k, joined)
	}
	var raw0, raw1 int64
	for i, e := range []*Engine{e0, e1} {
		db, err := sql.Open("sqlite3", "file:"+e.path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		n := &raw0
		if i == 1 {
			n = &raw1
		}
		if err := db.QueryRow(`SELECT count(*) FROM t JOIN visits USING (pid)`).Scan(n); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if raw1-raw0 < 1000 {
		t.Fatalf("the raw join moves by %d only: the attack is not one", raw1-raw0)
	}
}

// Refused, before anything is read or charged, with what is accepted.
func TestProtectedJoinRefusals(t *testing.T) {
	pt, pv := clinicPolicies()
	other := pv
	other.Persons = "hospital"
	none := pv
	none.Persons = ""
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n `
	for _, c := range []struct {
		name   string
		pv     Policy
		more   []string
		q, msg string
	}{
		{"non-unit column", pv, nil, `FROM t JOIN visits ON t.g = visits.kind`, "must compare their privacy units"},
		{"unit with another column", pv, nil, `FROM t JOIN visits ON t.pid = visits.cost`, "must compare their privacy units"},
		{"undeclared", none, nil, `FROM t JOIN visits ON t.pid = visits.pid`, "has not declared"},
		{"other persons", other, nil, `FROM t JOIN visits ON t.pid = visits.pid`, "has not declared"},
		{"self-join", pv, nil, `FROM t AS a JOIN t AS b ON a.pid = b.pid`, "joined with itself"},
		{"no index", pv, []string{`DROP INDEX visits_pid`}, `FROM t JOIN visits ON t.pid = visits.pid`, "no index on its privacy unit"},
		{"affinity", pv, []string{`CREATE TABLE v2 (pid TEXT, kind)`, `CREATE INDEX v2_pid ON v2(pid)`},
			`FROM t JOIN v2 ON t.pid = v2.pid`, "do not compare alike"},
		{"flat name taken", pv, []string{`CREATE TABLE v3 (pid INTEGER, x REAL, "v3.x" REAL)`, `CREATE INDEX v3_pid ON v3(pid)`},
			`FROM t JOIN v3 ON t.pid = v3.pid WHERE v3.x > 1 AND v3."v3.x" > 1`, "would be read as"},
		{"right join", pv, nil, `FROM t RIGHT JOIN visits ON t.pid = visits.pid`, "RIGHT joins are not accepted"},
		{"rtrim units", pv, []string{`CREATE TABLE v2 (pid INTEGER COLLATE RTRIM, kind)`, `CREATE INDEX v2_pid ON v2(pid)`},
			`FROM t JOIN v2 ON t.pid = v2.pid`, "do not compare alike"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e0, _ := pjoinNeighbours(t, pt, c.pv, c.more...)
			for _, tb := range []string{"v2", "v3"} {
				if strings.Contains(c.q, tb) {
					db, _ := sql.Open("sqlite3", "file:"+e0.path+"?_journal_mode=WAL&_busy_timeout=10000")
					if err := Protect(context.Background(), db, tb, Policy{PrivacyUnit: "pid", Persons: "clinic"}); err != nil {
						t.Fatal(err)
					}
					db.Close()
				}
			}
			_, err := e0.Query(context.Background(), "default", dp+c.q)
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("%s: got %v, want a refusal saying %q", c.q, err, c.msg)
			}
		})
	}
}

// A joined table with an INTEGER PRIMARY KEY of its own (the rowid the
// seek reads), its unit as the FROM table's INTEGER PRIMARY KEY, or as an
// INTEGER PRIMARY KEY DESC (not the rowid: its own index): answered.
func TestProtectedJoinRowidAlias(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, _ := pjoinNeighbours(t, pt, pv,
		`CREATE TABLE people (pid INTEGER PRIMARY KEY, sex TEXT)`, `INSERT INTO people SELECT DISTINCT pid, 'F' FROM t`,
		`CREATE TABLE events (id INTEGER PRIMARY KEY, pid INTEGER, what TEXT)`, `CREATE INDEX events_pid ON events(pid)`,
		`INSERT INTO events(pid, what) SELECT pid, kind FROM visits`,
		`CREATE TABLE desc_people (pid INTEGER PRIMARY KEY DESC, sex TEXT)`, `INSERT INTO desc_people SELECT DISTINCT pid, 'F' FROM t`)
	db, _ := sql.Open("sqlite3", "file:"+e0.path+"?_journal_mode=WAL&_busy_timeout=10000")
	for _, tb := range []string{"people", "events", "desc_people"} {
		if err := Protect(context.Background(), db, tb, Policy{PrivacyUnit: "pid", Persons: "clinic", MaxRows: 2}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, q := range []string{
		`COUNT(*) AS n FROM people JOIN events ON people.pid = events.pid`,
		`COUNT(*) AS n FROM events LEFT JOIN people ON people.pid = events.pid`,
		`COUNT(*) AS n FROM t JOIN people USING (pid)`,
		`COUNT(*) AS n FROM t JOIN desc_people USING (pid)`, // not the rowid: sought through its own index
	} {
		res, err := e0.Query(context.Background(), "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `+q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n, _ := res.Rows[0][0].(int64); n < 40 || n > 120 {
			t.Errorf("%s: %v, want 60 to 90 plus noise", q, res.Rows[0][0])
		}
	}
}

// The join's SQL: each row of t seeks at most K = max_rows x max_groups of
// its person's visits through the unit's index, and SQLite's plan is that
// seek (never a scan of visits), whatever the statistics say.
func TestProtectedJoinPlanSeeks(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, _ := pjoinNeighbours(t, pt, pv, `ANALYZE`)
	ctx := context.Background()
	conn, err := e0.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pl, err := e0.plan(ctx, conn, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) kind, COUNT(*) AS n, MEDIAN(cost) AS m FROM t LEFT JOIN visits AS v ON t.pid = v.pid AND t.g = v.kind GROUP BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	sqlText := rewrite(pl)
	want := `LEFT JOIN main."visits" AS _q INDEXED BY "visits_pid" ON _q."pid" = _p."pid" AND _q.rowid IN (SELECT _i.rowid FROM main."visits" AS _i INDEXED BY "visits_pid" WHERE _i."pid" = _p."pid" LIMIT 4)`
	if !strings.Contains(sqlText, want) {
		t.Fatalf("the join's SQL:\n%s\nwant it to contain\n%s", sqlText, want)
	}
	if err := prepareAll(ctx, conn, pl); err != nil {
		t.Fatal(err)
	}
	if d := fmt.Sprint(pl.explain()[0]); !strings.Contains(d, "each row of t joining at most 4 row(s) of its person in visits") {
		t.Errorf("EXPLAIN's statement row does not state the join's bounds: %s", d)
	}
	for _, bad := range []string{
		`SELECT count(*) FROM main."t" AS _p CROSS JOIN main."visits" AS _q ON _q.kind = _p.g`,
		`SELECT count(*) FROM main."t" AS _p CROSS JOIN main."visits" AS _q INDEXED BY "visits_pid" ON _q.pid = _p.pid`,
	} {
		if err := checkJoinPlan(ctx, conn, bad, seekRows); err == nil {
			t.Fatalf("%s passed the plan check", bad)
		}
	}
}

// An engine outside SQLite (dpsql-beam, through PlanStatement) refuses
// joins in words, before anything is read or charged.
func TestProtectedJoinRefusedOutsideSQLite(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, _ := pjoinNeighbours(t, pt, pv)
	_, err := PlanStatement(context.Background(), e0.path, "default",
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM t JOIN visits ON t.pid = visits.pid`)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "joins run only inside SQLite") {
		t.Fatalf("got %v, want a refusal saying joins run only inside SQLite", err)
	}
}

// Running time: a person with 60 rows in t and 20,000 visits adds to the
// join's CPU at most what the bound states for their 60 rows of t (the
// statement's rowWork each, with a margin of 3 for a shared machine and 2
// µs a row for reading and bounding it), where the 1.2 million pairs of a
// plain join would take a thousand times more. Outcome: held.
func TestProtectedJoinWorkBound(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, e1 := pjoinNeighboursVisits(t, pt, pv, false)
	db, err := sql.Open("sqlite3", "file:"+e1.path+"?_journal_mode=WAL&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 20000)
		INSERT INTO visits SELECT 999, 'k' || (i % 3), i % 50 FROM s`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) kind, COUNT(*) AS n, SUM(cost) AS s FROM t JOIN visits ON t.pid = visits.pid GROUP BY kind`
	pl, _ := exact(t, e1, q)
	cpu := cpuPerRow(t, []*Engine{e0, e1}, pl, 1)
	extra := cpu[1] - cpu[0]
	bound := time.Duration(3 * 60 * (pl.rowWork + 2000))
	if extra > bound {
		t.Fatalf("the heavy person's 60 rows of t and 20,000 visits add %v of CPU to the join, over the bound of %v (rowWork %.0f units, K %d)",
			extra, bound, pl.rowWork, pl.join.prot.k)
	}
	t.Logf("the heavy person adds %v of CPU (bound %v; rowWork %.0f, K %d)", extra, bound, pl.rowWork, pl.join.prot.k)
}

// A GROUP BY key from the joined protected table is released in its
// canonical form (keys.go), as a key of the FROM table is: under NOCASE, one
// person's 'K1' among everyone's 'k1' comes out as 'k1' on both neighbours.
func TestProtectedJoinCanonicalKeys(t *testing.T) {
	pt, pv := clinicPolicies()
	e0, e1 := pjoinNeighbours(t, pt, pv,
		`CREATE TABLE tags (pid INTEGER, tag TEXT COLLATE NOCASE)`, `CREATE INDEX tags_pid ON tags(pid)`,
		`INSERT INTO tags SELECT DISTINCT pid, 'K1' FROM t WHERE pid = 999`,
		`INSERT INTO tags SELECT DISTINCT pid, 'k1' FROM t WHERE pid <> 999`)
	for _, e := range []*Engine{e0, e1} {
		db, _ := sql.Open("sqlite3", "file:"+e.path+"?_journal_mode=WAL&_busy_timeout=10000")
		if err := Protect(context.Background(), db, "tags", Policy{PrivacyUnit: "pid", Persons: "clinic"}); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) tag, COUNT(*) AS n FROM t JOIN tags ON t.pid = tags.pid GROUP BY tag`
	for i, e := range []*Engine{e0, e1} {
		_, gs := exact(t, e, q)
		if len(gs) != 1 || fmt.Sprint(gs[0].keys[0]) != "k1" {
			t.Fatalf("neighbour %d: groups %v, want the one key 'k1'", i, gs)
		}
	}
}
