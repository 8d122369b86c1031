package protect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ledger"
)

// Review 25 (second round): attacks on joins of two protected tables on a
// shared privacy unit (pjoin.go) by an analyst who writes the SQL, knows
// every other row, times the statement or owns a copy of the file. The
// attacks in this file hold; the ones that found a weakness are in
// review25_open_test.go on the review25 branch until they are fixed.

// r25Pol is a table and the policy the owner protects it with.
type r25Pol struct {
	table string
	p     Policy
}

// r25DB makes a file with a ledger (scope "default", mu 1e6, delta 1e-5),
// runs the owner's setup, protects the tables in order and returns an
// engine over it and the owner's connection.
func r25DB(t testing.TB, setup []string, pols ...r25Pol) (*Engine, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r25.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	b, err := accountant.NewBudget("default", 1e6, 0, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Init(ctx, db, b); err != nil {
		t.Fatal(err)
	}
	for _, q := range setup {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, p := range pols {
		if err := Protect(ctx, db, p.table, p.p); err != nil {
			t.Fatal(err)
		}
	}
	e, err := EngineFor(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Release() })
	return e, db
}

const r25DP = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `

// r25Groups plans and reads q's bounded exact groups, as "key|key=v,v".
func r25Groups(t *testing.T, e *Engine, q string) (*plan, []string) {
	t.Helper()
	pl, gs := exact(t, e, r25DP+q)
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%v=%v", g.keys, g.vals))
	}
	return pl, out
}

// Units that SQLite could compare across types, cases or trailing spaces:
// one person is whoever both tables group as one (the same value under the
// column's comparison), and the join never pairs rows of two persons. With
// max_rows = max_groups = 1 a person adds one row to one group, however
// their unit is spelled in either table. Outcome: held.
func TestReview25JoinUnitSpellings(t *testing.T) {
	one := Policy{PrivacyUnit: "pid", Persons: "p", MaxRows: 1, MaxGroups: 1}
	for _, c := range []struct {
		name  string
		setup []string
		q     string
		want  string
	}{
		{"NOCASE: bob in three spellings in each table is one person",
			[]string{`CREATE TABLE a (pid TEXT COLLATE NOCASE, g TEXT)`, `CREATE TABLE b (pid TEXT COLLATE NOCASE, kind TEXT)`,
				`CREATE INDEX b_pid ON b(pid)`, `INSERT INTO a VALUES ('bob', 'x'), ('Bob', 'y'), ('BOB', 'z')`,
				`INSERT INTO b VALUES ('bOb', 'k1'), ('boB', 'k2'), ('BOb', 'k3')`},
			`COUNT(*) AS n, COUNT(DISTINCT a.pid) AS persons FROM a JOIN b USING (pid)`, "one row"},
		{"untyped units: 1 and 1.0 are one person, '1' and x'31' two others",
			[]string{`CREATE TABLE a (pid, g TEXT)`, `CREATE TABLE b (pid, kind TEXT)`, `CREATE INDEX b_pid ON b(pid)`,
				`INSERT INTO a VALUES (1, 'int'), ('1', 'text'), (1.0, 'real'), (x'31', 'blob')`,
				`INSERT INTO b VALUES (1, 'k-int'), ('1', 'k-text'), (1.0, 'k-real'), (x'31', 'k-blob')`},
			`COUNT(*) AS n FROM a JOIN b USING (pid)`, "three rows"},
		{"BINARY text: 'x' and 'x ' are two persons",
			[]string{`CREATE TABLE a (pid TEXT, g TEXT)`, `CREATE TABLE b (pid TEXT, kind TEXT)`, `CREATE INDEX b_pid ON b(pid)`,
				`INSERT INTO a VALUES ('x', 'plain'), ('x ', 'space')`, `INSERT INTO b VALUES ('x', 'k-plain'), ('x ', 'k-space')`},
			`g, kind, COUNT(*) AS n FROM a JOIN b USING (pid) GROUP BY g, kind`, "plain with k-plain, space with k-space"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, _ := r25DB(t, c.setup, r25Pol{"a", one}, r25Pol{"b", one})
			_, gs := r25Groups(t, e, c.q)
			got := strings.Join(gs, " ")
			switch c.want {
			case "one row":
				if len(gs) != 1 || !strings.HasPrefix(gs[0], "[]=[1 ") {
					t.Fatalf("%s: %s; want one joined row of one person", c.q, got)
				}
			case "three rows":
				if len(gs) != 1 || gs[0] != "[]=[3]" {
					t.Fatalf("%s: %s; want 3 (persons 1 = 1.0, '1', x'31', one row each)", c.q, got)
				}
			default:
				if got != "[plain k-plain]=[1] [space k-space]=[1]" {
					t.Fatalf("%s: %s; want %s", c.q, got, c.want)
				}
			}
		})
	}
}

// The FROM table's unit is unique (its INTEGER PRIMARY KEY: one row per
// person, which alone would be bounded as one row in one group), and the
// joined table gives that row 5 visits of 5 kinds: bounded after the join
// with the stricter figures, the person adds at most max_rows rows to at
// most max_groups = 1 group, not one row to each of 5 kinds. Outcome: held.
func TestReview25JoinUniqueFromTable(t *testing.T) {
	e, _ := r25DB(t, []string{
		`CREATE TABLE p (pid INTEGER PRIMARY KEY, sex TEXT)`,
		`CREATE TABLE v (pid INTEGER, kind TEXT)`, `CREATE INDEX v_pid ON v(pid)`,
		`INSERT INTO p VALUES (7, 'F')`,
		`INSERT INTO v VALUES (7, 'a'), (7, 'b'), (7, 'c'), (7, 'd'), (7, 'e')`,
	}, r25Pol{"p", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 3, MaxGroups: 1}},
		r25Pol{"v", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 5, MaxGroups: 5}})
	for _, q := range []string{
		`kind, COUNT(*) AS n FROM p JOIN v USING (pid) GROUP BY kind`,
		`kind, COUNT(*) AS n FROM v JOIN p USING (pid) GROUP BY kind`,
		`kind, COUNT(*) AS n FROM p LEFT JOIN v USING (pid) GROUP BY kind`,
	} {
		pl, gs := r25Groups(t, e, q)
		if len(gs) != 1 || pl.maxGroups != 1 || pl.maxRows != 3 || pl.unitUnique {
			t.Fatalf("%s: groups %v, max_rows %d, max_groups %d, unique %v; want one group (max_groups 1 of p), max_rows 3",
				q, gs, pl.maxRows, pl.maxGroups, pl.unitUnique)
		}
	}
}

// OPTIONS max_groups_contributed may lower max_groups, never raise it: under
// a join the ceiling is the stricter policy's, not the FROM table's.
// Outcome: held (the join step replaces the policy before OPTIONS are read).
func TestReview25JoinOptionCannotRaiseStricterBound(t *testing.T) {
	e, _ := r25DB(t, []string{
		`CREATE TABLE a (pid INTEGER, g TEXT)`, `CREATE TABLE b (pid INTEGER, kind TEXT)`, `CREATE INDEX b_pid ON b(pid)`,
		`INSERT INTO a VALUES (1, 'x')`, `INSERT INTO b VALUES (1, 'k')`,
	}, r25Pol{"a", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 4, MaxGroups: 3}},
		r25Pol{"b", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 2, MaxGroups: 1}})
	_, err := e.Query(context.Background(), "default",
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, max_groups_contributed = 3) kind, COUNT(*) AS n FROM a JOIN b USING (pid) GROUP BY kind`)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "[1, 1]") {
		t.Fatalf("max_groups_contributed = 3 over a join whose stricter max_groups is 1: %v; want a refusal naming [1, 1]", err)
	}
}

// The charge of a join is the charge of the same statement over one table
// with the stricter figures (min max_rows, min max_groups) and each column's
// own bounds. Outcome: held.
func TestReview25JoinChargeIsStricterSingleTable(t *testing.T) {
	setup := []string{
		`CREATE TABLE a (pid INTEGER, g TEXT)`, `CREATE TABLE b (pid INTEGER, kind TEXT, cost REAL)`, `CREATE INDEX b_pid ON b(pid)`,
		`CREATE TABLE s (pid INTEGER, g TEXT, kind TEXT, cost REAL)`,
		`INSERT INTO a VALUES (1, 'x')`, `INSERT INTO b VALUES (1, 'k', 3)`, `INSERT INTO s VALUES (1, 'x', 'k', 3)`,
	}
	e, _ := r25DB(t, setup,
		r25Pol{"a", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 4, MaxGroups: 2, MaxLength: map[string]int{"pid": 8}}},
		r25Pol{"b", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 3, MaxGroups: 5, Bounds: map[string][2]float64{"cost": {0, 50}}}},
		r25Pol{"s", Policy{PrivacyUnit: "pid", MaxRows: 3, MaxGroups: 2, Bounds: map[string][2]float64{"cost": {0, 50}}}})
	for _, q := range [][2]string{
		{`kind, COUNT(*) AS n, SUM(cost) AS c FROM a JOIN b USING (pid) GROUP BY kind`, `kind, COUNT(*) AS n, SUM(cost) AS c FROM s GROUP BY kind`},
		{`COUNT(*) AS n, AVG(cost) AS c FROM a LEFT JOIN b USING (pid)`, `COUNT(*) AS n, AVG(cost) AS c FROM s`},
		{`g, COUNT(DISTINCT pid) AS persons, MEDIAN(cost) AS m FROM a JOIN b USING (pid) GROUP BY g`, `g, COUNT(DISTINCT pid) AS persons, MEDIAN(cost) AS m FROM s GROUP BY g`},
	} {
		pj, _ := exact(t, e, r25DP+q[0])
		ps, _ := exact(t, e, r25DP+q[1])
		dj, ds := pj.details, ps.details
		dj.Table, ds.Table = "", ""
		if a, b := fmt.Sprint(pj.mech, dj), fmt.Sprint(ps.mech, ds); a != b {
			t.Errorf("%s\n charged %s\n the single table with the stricter figures: %s", q[0], a, b)
		}
	}
}

// The plan of the join is the index seek whatever the statistics an owner's
// ANALYZE left (one row per person, or 10^5): never a scan of the joined
// table, so neither the refusal nor the work depends on statistics computed
// from the protected rows. Outcome: held.
func TestReview25JoinPlanIgnoresStatistics(t *testing.T) {
	ctx := context.Background()
	for _, stat := range []string{"1000000 1", "1000000 100000", "10 10", "1000000000 1000000000"} {
		e, _ := r25DB(t, []string{
			`CREATE TABLE a (pid INTEGER, g TEXT)`, `CREATE TABLE b (pid INTEGER, kind TEXT, cost REAL)`, `CREATE INDEX b_pid ON b(pid)`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 59) INSERT INTO a SELECT i, 'g'||(i%3) FROM s`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 599) INSERT INTO b SELECT i % 60, 'k'||(i%3), i%7 FROM s`,
			`ANALYZE`, `DELETE FROM sqlite_stat1`, `INSERT INTO sqlite_stat1 VALUES ('b', 'b_pid', '` + stat + `')`,
			`INSERT INTO sqlite_stat1 VALUES ('a', NULL, '60')`,
		}, r25Pol{"a", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 2, MaxLength: map[string]int{"pid": 8}}},
			r25Pol{"b", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 2, MaxLength: map[string]int{"pid": 8},
				Bounds: map[string][2]float64{"cost": {0, 10}}}})
		for _, q := range []string{
			`COUNT(*) AS n FROM a JOIN b USING (pid)`,
			`kind, COUNT(*) AS n, MEDIAN(cost) AS m FROM a LEFT JOIN b ON a.pid = b.pid AND a.g = b.kind GROUP BY kind`,
		} {
			if _, err := e.Query(ctx, "default", r25DP+q); err != nil {
				t.Errorf("stat1 %q: %s: %v", stat, q, err)
			}
		}
	}
}

// Forms that would lose the unit, mix persons, or read the joined table in
// ways the work bound does not cover are refused in words, before anything
// is read or charged, with the same message on two neighbouring files (one
// has a person with 60 rows of t and 100 of visits): a refusal tells
// nothing of the rows. Outcome: held.
func TestReview25JoinRefusalsSameOnNeighbours(t *testing.T) {
	pt, pv := clinicPolicies()
	more := []string{
		`CREATE VIEW visits_v AS SELECT * FROM visits`,
		`CREATE TABLE wr (pid INTEGER PRIMARY KEY, kind TEXT) WITHOUT ROWID`,
		`CREATE TABLE pidx (pid INTEGER, kind TEXT)`, `CREATE INDEX pidx_p ON pidx(pid) WHERE pid > 0`, `CREATE INDEX pidx_e ON pidx(pid + 0)`,
		`CREATE TABLE cidx (pid INTEGER, kind TEXT)`, `CREATE INDEX cidx_p ON cidx(pid COLLATE NOCASE)`,
		`CREATE TABLE lookup (kind TEXT, label TEXT)`,
	}
	e0, e1 := pjoinNeighbours(t, pt, pv, more...)
	for _, e := range []*Engine{e0, e1} {
		db, err := sql.Open("sqlite3", "file:"+e.path+"?_journal_mode=WAL&_busy_timeout=10000")
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range []string{"wr", "pidx", "cidx"} {
			if err := Protect(context.Background(), db, tb, Policy{PrivacyUnit: "pid", Persons: "clinic"}); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n `
	for _, q := range []string{
		`FROM t JOIN visits ON t.pid = visits.pid OR 1`,
		`FROM t JOIN visits ON t.pid = visits.pid + 0`,
		`FROM t JOIN visits ON t.pid = visits.pid COLLATE NOCASE`,
		`FROM t JOIN visits ON t.pid = visits.pid AND visits.rowid = 5`,
		`FROM t JOIN visits ON t.pid = visits.pid AND t.x = 3`,
		`FROM t JOIN visits ON t.g = visits.kind`,
		`FROM t JOIN visits ON t.pid = visits.cost`,
		`FROM t AS a JOIN t AS b ON a.pid = b.pid`,
		`FROM t JOIN visits_v ON t.pid = visits_v.pid`,
		`FROM t JOIN (SELECT * FROM visits) AS v ON t.pid = v.pid`,
		`FROM t JOIN main.visits ON t.pid = visits.pid`,
		`FROM t JOIN temp.visits ON t.pid = visits.pid`,
		`FROM t JOIN visits ON t.pid = visits.pid JOIN lookup ON visits.kind = lookup.kind`,
		`FROM lookup JOIN visits ON lookup.kind = visits.kind`,
		`FROM t, visits WHERE t.pid = visits.pid`,
		`FROM t NATURAL JOIN visits`,
		`FROM t CROSS JOIN visits`,
		`FROM t FULL JOIN visits USING (pid)`,
		`FROM t JOIN wr USING (pid)`,
		`FROM t JOIN pidx USING (pid)`,
		`FROM t JOIN cidx USING (pid)`,
		`FROM t JOIN visits USING (pid) WHERE visits.rowid < 10`,
		`FROM t JOIN visits USING (pid) WHERE EXISTS (SELECT 1 FROM visits)`,
	} {
		var msgs [2]string
		for i, e := range []*Engine{e0, e1} {
			before := r25LedgerRows(t, e)
			_, err := e.Query(context.Background(), "default", dp+q)
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("%s: %v; want a refusal", q, err)
			}
			if after := r25LedgerRows(t, e); after != before {
				t.Fatalf("%s: refused, but the ledger grew from %d to %d rows", q, before, after)
			}
			msgs[i] = err.Error()
		}
		if msgs[0] != msgs[1] {
			t.Errorf("%s: the refusal depends on the rows:\n%s\n%s", q, msgs[0], msgs[1])
		}
	}
}

func r25LedgerRows(t *testing.T, e *Engine) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+e.path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_ledger`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// "INTEGER PRIMARY KEY DESC" is not the rowid (a quirk SQLite keeps for
// compatibility): the column has INTEGER affinity under a unique index of
// its own and holds text, reals and NULLs. The schema facts once called it
// the rowid (NOT NULL, numbers only), so a join's seeks compared its values
// as 8-byte numbers in the work bound (K = 49 of up to 1,024-byte text
// probes: about 60 times MaxRowWork per row), and AVG's count of numbers
// and COUNT(col) read COUNT(*) over rows holding text and NULL. Outcome:
// fixed in schemaFactsOf (values.go): the facts are only a rowid alias's.
func TestReview25IntegerPrimaryKeyDescIsNotRowid(t *testing.T) {
	ctx := context.Background()
	e, db := r25DB(t, []string{
		`CREATE TABLE a (pid INTEGER PRIMARY KEY DESC, g TEXT)`, `CREATE TABLE r (pid INTEGER PRIMARY KEY, g TEXT)`,
		`CREATE TABLE b (pid INTEGER, kind TEXT)`, `CREATE INDEX b_pid ON b(pid)`,
		`INSERT INTO a VALUES ('abc', 'x'), (NULL, 'y'), (2.5, 'z'), (printf('%.1000c', 'q'), 'w')`,
		`INSERT INTO b VALUES ('abc', 'k')`,
	}, r25Pol{"a", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 50, MaxGroups: 4}},
		r25Pol{"b", Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 50, MaxGroups: 4}})
	var types string
	if err := db.QueryRow(`SELECT group_concat(t) FROM (SELECT typeof(pid) AS t FROM a ORDER BY 1)`).Scan(&types); err != nil || types != "null,real,text,text" {
		t.Fatalf("a.pid holds %q (%v): the quirk this test relies on is gone", types, err)
	}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for table, want := range map[string]bool{"a": false, "r": true} {
		f, err := schemaFactsOf(ctx, conn, table)
		if err != nil {
			t.Fatal(err)
		}
		if f.NotNull["pid"] != want || f.NumberOnly["pid"] != want {
			t.Errorf("%s.pid: facts NOT NULL %v, numbers only %v; want %v (rowid alias: %v)", table, f.NotNull["pid"], f.NumberOnly["pid"], want, want)
		}
	}
	pl, err := e.plan(ctx, conn, "default", r25DP+`COUNT(*) AS n FROM a JOIN b USING (pid)`)
	if err != nil {
		t.Fatal(err)
	}
	if pl.rowWork > MaxRowWork || pl.join.prot.k > 4 {
		t.Errorf("the join's K = %d, work per row %g: seeks costed as numbers", pl.join.prot.k, pl.rowWork)
	}
}
