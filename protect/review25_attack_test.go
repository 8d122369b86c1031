package protect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// Review 25 (second round): attacks on joins of two protected tables on a
// shared privacy unit (pjoin.go) by an analyst who writes the SQL, knows
// every other row, times the statement or owns a copy of the file. The
// attacks in this file hold; the last five found a weakness (the columns a
// joined row carries were outside the join's work bound; the unit index was
// chosen by name; refusals' words) and are regression tests of the fixes
// (joincarry.go, unitIndex, pjoinRefusalf).

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

// r25Plan plans q (after r25DP) and returns the plan, or the refusal.
func r25Plan(t *testing.T, e *Engine, q string) (*plan, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return e.plan(ctx, conn, "default", r25DP+q)
}

// r25Guard is the guard the join writes for column col on alias t.
func r25Guard(t, col string, n int) string {
	return fmt.Sprintf("(octet_length(%s.%s) > %d) IS NOT 1", t, dpselect.QuoteIdent(col), n)
}

// A value of the joined protected table was copied into every joined row,
// once per row of its person in the FROM table: a person with R rows of a
// and one row of b holding an S-byte GROUP BY key (or COUNT(DISTINCT)
// input) made the rows level sort and canonicalise R x S bytes, a data value
// times another (R = 400, S = 1 MB: 3.9 s; COUNT(DISTINCT note): 6.2 s),
// because the work bound counted each carried column as a number and only
// ON/WHERE columns were guarded. Outcome: fixed (joincarry.go). Every
// column of b a joined row carries is guarded by its max_length inside the
// join (a row of b whose value is longer is not joined, as for the ON
// columns), the bound counts each at its max_length per joined row, and a
// statement over MaxRowWork is refused naming the columns. One CPU check,
// with a wide margin: the long value now costs a small fraction of the 3.9 s.
func TestReview25JoinedValueGuardedInJoin(t *testing.T) {
	build := func(long bool, pol, polB Policy) *Engine {
		kind, note := `'k'`, `x'00'`
		if long {
			kind, note = `hex(zeroblob(524288))`, `zeroblob(1048576)` // 1 MB each
		}
		e, _ := r25DB(t, []string{
			`CREATE TABLE a (pid INTEGER, g TEXT)`,
			`CREATE TABLE b (pid INTEGER, kind TEXT, note BLOB)`, `CREATE INDEX b_pid ON b(pid)`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 999) INSERT INTO a SELECT i, 'g' FROM s`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 999) INSERT INTO b SELECT i, 'k', x'00' FROM s`,
			// person 7: 400 more rows of a; their one row of b holds the long values (or short ones)
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 399) INSERT INTO a SELECT 7, 'g' FROM s`,
			`UPDATE b SET kind = ` + kind + `, note = ` + note + ` WHERE pid = 7`,
		}, r25Pol{"a", pol}, r25Pol{"b", polB})
		return e
	}
	pol := Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 1, MaxGroups: 1, MaxLength: map[string]int{"pid": 8}}
	long := build(true, pol, pol)
	const byKind = `kind, COUNT(*) AS n FROM a JOIN b USING (pid) GROUP BY kind`
	for _, c := range []struct{ q, col string }{{byKind, "kind"}, {`COUNT(DISTINCT note) AS n FROM a JOIN b USING (pid)`, "note"}} {
		pl, err := r25Plan(t, long, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		texts := []string{rewrite(pl)}
		for _, a := range pl.aggs {
			if a.distinct && !a.persons {
				texts = append(texts, rewriteDistinct(pl, a))
			}
		}
		for _, text := range texts {
			if g := r25Guard("_q", c.col, DefaultMaxLength); !strings.Contains(text, g) {
				t.Errorf("%s: the join does not guard b.%s by its max_length (%s):\n%s", c.q, c.col, g, text)
			}
		}
		if least := float64(pl.join.prot.k) * (8 + DefaultMaxLength); pl.rowWork < least {
			t.Errorf("%s: rowWork %.0f, under K = %d joined rows carrying a.pid (8 bytes) and b.%s (%d bytes)",
				c.q, pl.rowWork, pl.join.prot.k, c.col, DefaultMaxLength)
		}
		_, gs := exact(t, long, r25DP+c.q)
		for _, g := range gs {
			for _, k := range g.keys {
				if s, ok := k.(string); ok && len(s) > DefaultMaxLength {
					t.Errorf("%s: a group keyed by a %d-byte kind: the long row of b was joined", c.q, len(s))
				}
			}
		}
	}
	// A max_length that lets the copies exceed MaxRowWork is refused, in
	// words that name the column.
	big := pol
	big.MaxLength = map[string]int{"pid": 8, "kind": 1 << 20}
	_, err := r25Plan(t, build(false, pol, big), byKind)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "b.kind (1048576 bytes)") || !strings.Contains(err.Error(), "max_length") {
		t.Fatalf("%s with b.kind's max_length 1 MB: %v; want a refusal naming b.kind's max_length", byKind, err)
	}
	if testing.Short() {
		return
	}
	// CPU: the long value was 3.9 s of work; now the person's 400 rows cost
	// at most their rowWork each (under 0.1 s), plus a floor for a shared
	// machine.
	short := build(false, pol, pol)
	pl, _ := exact(t, long, r25DP+byKind)
	cpu := cpuPerRow(t, []*Engine{short, long}, pl, 1)
	if extra, bound := cpu[1]-cpu[0], time.Duration(400*pl.rowWork)+300*time.Millisecond; extra > bound {
		t.Errorf("%s: one person's 1 MB kind adds %v of CPU, over %v (rowWork %.0f, K %d)", byKind, extra, bound,
			pl.rowWork, pl.join.prot.k)
	}
}

// The FROM table's side: a row of a was copied into each of the K joined
// rows of its person (K = max_rows x max_groups, lowered to fit
// MaxRowWork), each copy's key counted as a number: one row of a with a
// 2 MB key cost K x 2 MB of sorting and canonicalising (seconds). Outcome:
// fixed (joincarry.go): a's carried columns are guarded by their max_length
// and counted K times in the bound.
func TestReview25JoinFromRowGuardedInJoin(t *testing.T) {
	const q = `g, COUNT(*) AS n FROM a JOIN b USING (pid) GROUP BY g`
	build := func(pol, polB Policy) *Engine {
		e, _ := r25DB(t, []string{
			`CREATE TABLE a (pid INTEGER, g TEXT)`,
			`CREATE TABLE b (pid INTEGER, kind TEXT)`, `CREATE INDEX b_pid ON b(pid)`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 999) INSERT INTO a SELECT i, 'g' FROM s`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 999) INSERT INTO b SELECT i, 'k' FROM s`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 299) INSERT INTO b SELECT 7, 'k' FROM s`,
			`UPDATE a SET g = hex(zeroblob(1048576)) WHERE pid = 7`,
		}, r25Pol{"a", pol}, r25Pol{"b", polB})
		return e
	}
	pol := Policy{PrivacyUnit: "pid", Persons: "c", MaxRows: 50, MaxGroups: 4, MaxLength: map[string]int{"pid": 8}}
	e := build(pol, pol)
	pl, err := r25Plan(t, e, q)
	if err != nil {
		t.Fatal(err)
	}
	if g := r25Guard("_p", "g", DefaultMaxLength); !strings.Contains(rewrite(pl), g) {
		t.Errorf("%s: the join does not guard a.g by its max_length (%s):\n%s", q, g, rewrite(pl))
	}
	if least := float64(pl.join.prot.k) * (8 + DefaultMaxLength); pl.rowWork < least {
		t.Errorf("%s: rowWork %.0f, under K = %d copies of a.pid (8 bytes) and a.g (%d bytes)", q, pl.rowWork,
			pl.join.prot.k, DefaultMaxLength)
	}
	_, gs := exact(t, e, r25DP+q)
	for _, g := range gs {
		if s, ok := g.keys[0].(string); ok && len(s) > DefaultMaxLength {
			t.Errorf("%s: a group keyed by a %d-byte g: the long row of a was joined", q, len(s))
		}
	}
	big := pol
	big.MaxLength = map[string]int{"pid": 8, "g": 1 << 20}
	_, err = r25Plan(t, build(big, pol), q)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "a.g (1048576 bytes)") {
		t.Fatalf("%s with a.g's max_length 1 MB: %v; want a refusal naming a.g", q, err)
	}
}

// Public joins: the work bound counted each public column a joined row
// carries as a number, whatever the public table holds: a 1 MB public
// region made each protected row joining it cost about a millisecond, four
// times MaxRowWork (a person's 400 rows of that g: 1.8-2.8 s). Outcome:
// fixed (joincarry.go): the public columns the statement reads are counted
// at their longest values (public data), and the statement is refused
// above MaxRowWork.
func TestReview25PublicJoinCountsPublicLengths(t *testing.T) {
	build := func(region string) *Engine {
		e, _ := r25DB(t, []string{
			`CREATE TABLE a (pid INTEGER, g TEXT)`,
			`CREATE TABLE regions (g TEXT, region TEXT)`,
			`INSERT INTO regions VALUES ('a', ` + region + `), ('b', 'north'), ('c', 'south')`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 999) INSERT INTO a SELECT i, CASE i % 2 WHEN 0 THEN 'b' ELSE 'c' END FROM s`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 399) INSERT INTO a SELECT 7, 'a' FROM s`,
		}, r25Pol{"a", Policy{PrivacyUnit: "pid", MaxLength: map[string]int{"g": 8}}})
		return e
	}
	const q = `region, COUNT(*) AS n FROM a JOIN regions USING (g) GROUP BY region`
	_, err := r25Plan(t, build(`hex(zeroblob(524288))`), q)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "regions.region (longest 1048576 bytes)") {
		t.Fatalf("%s with a 1 MB region: %v; want a refusal naming regions.region's longest value", q, err)
	}
	pl, err := r25Plan(t, build(`hex(zeroblob(50000))`), q)
	if err != nil {
		t.Fatalf("%s with a 100,000-byte region: %v", q, err)
	}
	if pl.rowWork < 100000 {
		t.Errorf("%s: rowWork %.0f, under the 100,000-byte region each joined row carries", q, pl.rowWork)
	}
}

// The joined table's unit index was the first by name whose first column
// is the unit: a two-column index (pid, cost) named before a plain (pid)
// index was chosen, SQLite cannot seek it by (pid, rowid), and the
// statement was refused though the plain index serves. Outcome: fixed
// (unitIndex prefers an index on the unit alone).
func TestReview25JoinIndexChoice(t *testing.T) {
	pol := Policy{PrivacyUnit: "pid", Persons: "c", MaxLength: map[string]int{"pid": 8}}
	e, _ := r25DB(t, []string{
		`CREATE TABLE a (pid INTEGER, g TEXT)`,
		`CREATE TABLE b (pid INTEGER, kind TEXT, cost REAL)`, `CREATE INDEX b_a ON b(pid, cost)`, `CREATE INDEX b_pid ON b(pid)`,
		`INSERT INTO a VALUES (1, 'g')`, `INSERT INTO b VALUES (1, 'k', 1)`,
	}, r25Pol{"a", pol}, r25Pol{"b", pol})
	q := `COUNT(*) AS n FROM a JOIN b USING (pid)`
	if _, err := e.Query(context.Background(), "default", r25DP+q); err != nil {
		t.Fatalf("%s with indexes b_a(pid, cost) and b_pid(pid): %v; want it answered through b_pid", q, err)
	}
	if pl, err := r25Plan(t, e, q); err != nil || pl.join.prot.index != "b_pid" {
		t.Fatalf("%s: %v; want the join through b_pid", q, err)
	}
}

// A refusal of a join of two protected tables says what such a join is,
// not what a join with a public table is.
func TestReview25JoinRefusalWording(t *testing.T) {
	pol := Policy{PrivacyUnit: "pid", Persons: "c"}
	e, _ := r25DB(t, []string{
		`CREATE TABLE a (pid INTEGER, g TEXT)`, `CREATE TABLE b (pid INTEGER, kind TEXT)`,
		`INSERT INTO a VALUES (1, 'g')`, `INSERT INTO b VALUES (1, 'k')`,
	}, r25Pol{"a", pol}, r25Pol{"b", pol})
	q := `COUNT(*) AS n FROM a JOIN b USING (pid)`
	_, err := r25Plan(t, e, q)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "no index on its privacy unit") ||
		!strings.Contains(err.Error(), "joins two protected tables on their shared privacy unit") ||
		strings.Contains(err.Error(), "one public table") {
		t.Fatalf("%s without an index on b.pid: %v; want a refusal in the words of a join of two protected tables", q, err)
	}
}

// The public join's side of the FROM row copied K times: a protected row
// joins up to the public table's largest multiplicity of an ON key (mult)
// public rows, and each joined row copies the protected columns it reads, so
// a long protected key was copied mult times (a public factor, but up to the
// public table's size, where the unjoined statement reads it once).
// Outcome: fixed with the rest (work25): when mult > 1 the protected
// columns the joined rows carry are guarded by their max_length and counted
// mult times; a join whose keys do not repeat is written as before.
func TestReview25PublicJoinRepeatedKeyGuardsProtectedColumns(t *testing.T) {
	build := func(repeat int, pol Policy) *Engine {
		e, _ := r25DB(t, []string{
			`CREATE TABLE a (pid INTEGER, g TEXT, note TEXT)`,
			`CREATE TABLE lookup (g TEXT, label TEXT)`,
			fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < %d) INSERT INTO lookup SELECT 'x', 'l' FROM s`, repeat),
			`INSERT INTO lookup VALUES ('y', 'm')`,
			`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 99) INSERT INTO a SELECT i, 'x', 'n' FROM s`,
			`UPDATE a SET note = hex(zeroblob(1048576)) WHERE pid = 7`,
		}, r25Pol{"a", pol})
		return e
	}
	const q = `note, COUNT(*) AS n FROM a JOIN lookup USING (g) GROUP BY note`
	pol := Policy{PrivacyUnit: "pid", MaxLength: map[string]int{"pid": 8, "g": 8}}
	guard := r25Guard("_p", "note", DefaultMaxLength)
	e := build(50, pol)
	pl, err := r25Plan(t, e, q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rewrite(pl), guard) {
		t.Errorf("%s, a key repeated 50 times: the join does not guard a.note (%s):\n%s", q, guard, rewrite(pl))
	}
	if least := 50.0 * (8 + DefaultMaxLength); pl.rowWork < least {
		t.Errorf("%s: rowWork %.0f, under 50 copies of a.pid and a.note", q, pl.rowWork)
	}
	_, gs := exact(t, e, r25DP+q)
	for _, g := range gs {
		if s, ok := g.keys[0].(string); ok && len(s) > DefaultMaxLength {
			t.Errorf("%s: a group keyed by a %d-byte note: the long row was joined", q, len(s))
		}
	}
	if pl, err := r25Plan(t, build(1, pol), q); err != nil || strings.Contains(rewrite(pl), guard) {
		t.Errorf("%s, keys that do not repeat: %v; want it answered as before, without guarding a.note", q, err)
	}
	big := Policy{PrivacyUnit: "pid", MaxLength: map[string]int{"pid": 8, "g": 8, "note": 1 << 20}}
	if _, err := r25Plan(t, build(50, big), q); !IsRefusal(err) || !strings.Contains(err.Error(), "a.note (1048576 bytes)") {
		t.Fatalf("%s with a.note's max_length 1 MB and a key repeated 50 times: %v; want a refusal naming a.note", q, err)
	}
}
