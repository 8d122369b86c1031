package protect

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
)

// A privacy-unit column the schema makes unique (the only PRIMARY KEY
// column, or a UNIQUE constraint in the table's declaration) needs no
// bounding: the rewrite skips the GROUP BY by person, and its figures are
// those of the bounded rewrite (each person has one row), rows without a
// person dropped. A separately created UNIQUE INDEX (which may declare
// another collation) or a partial one does not count.
func TestUniquePrivacyUnit(t *testing.T) {
	for _, tc := range []struct {
		ddl    string
		extra  string
		unique bool
	}{
		{`CREATE TABLE t (pid INTEGER PRIMARY KEY, g TEXT, x REAL)`, "", true},
		{`CREATE TABLE t (pid TEXT UNIQUE, g TEXT, x REAL)`, "", true},
		{`CREATE TABLE t (pid TEXT, g TEXT, x REAL, PRIMARY KEY (pid))`, "", true},
		{`CREATE TABLE t (pid TEXT, g TEXT, x REAL, PRIMARY KEY (pid, g))`, "", false},
		{`CREATE TABLE t (pid TEXT, g TEXT, x REAL, UNIQUE (pid, g))`, "", false},
		{`CREATE TABLE t (pid TEXT, g TEXT, x REAL)`, `CREATE UNIQUE INDEX t_pid ON t(pid COLLATE NOCASE)`, false},
		{`CREATE TABLE t (pid TEXT COLLATE NOCASE, g TEXT, x REAL)`, `CREATE UNIQUE INDEX t_pid ON t(pid COLLATE BINARY)`, false},
		{`CREATE TABLE t (pid TEXT, g TEXT, x REAL)`, `CREATE UNIQUE INDEX t_pid ON t(pid) WHERE pid > 'a'`, false},
		{`CREATE TABLE t (pid TEXT, g TEXT, x REAL)`, "", false},
	} {
		t.Run(tc.ddl+tc.extra, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "u.db")
			db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			b, _ := accountant.NewBudget("default", 100, 0, 1e-5)
			if err := ledger.Init(ctx, db, b); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{tc.ddl, tc.extra,
				`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 300) INSERT INTO t SELECT i, CASE i % 3 WHEN 0 THEN 'a' ELSE 'b' END, i % 10 FROM s`,
			} {
				if q != "" {
					if _, err := db.Exec(q); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !strings.Contains(tc.ddl, "INTEGER PRIMARY KEY") && !strings.Contains(tc.ddl, "PRIMARY KEY (pid)") {
				// Rows without a person (a UNIQUE column holds any number of NULLs).
				if _, err := db.Exec(`INSERT INTO t VALUES (NULL, 'a', 1), (NULL, 'a', 2)`); err != nil {
					t.Fatal(err)
				}
			}
			if err := Protect(ctx, db, "t", Policy{PrivacyUnit: "pid", MaxGroups: 2, MaxRows: 2}); err != nil {
				t.Fatal(err)
			}
			e, err := EngineFor(path)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Release()
			pl, gs := exact(t, e, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) g, COUNT(*) AS n, SUM(x, contribution_bounds_per_group => (0, 10)) AS s, MEDIAN(x, contribution_bounds_per_group => (0, 10)) AS m FROM t GROUP BY g`)
			if pl.unitUnique != tc.unique {
				t.Fatalf("unitUnique = %v, want %v", pl.unitUnique, tc.unique)
			}
			if skips := !strings.Contains(rewrite(pl), "PARTITION BY") && !strings.Contains(rewrite(pl), `GROUP BY "pid"`); skips != tc.unique {
				t.Errorf("rewrite skips bounding: %v, want %v\n%s", skips, tc.unique, rewrite(pl))
			}
			want := map[string][2]int64{"a": {100, 0}, "b": {200, 0}}
			for i := 1; i <= 300; i++ {
				k := map[bool]string{true: "a", false: "b"}[i%3 == 0]
				w := want[k]
				w[1] += int64(i % 10)
				want[k] = w
			}
			for _, g := range gs {
				k := g.keys[0].(string)
				var hist int64
				for _, c := range g.hists[2] {
					hist += c
				}
				if g.persons != want[k][0] || g.vals[0] != want[k][0] || float64(g.vals[1])*pl.aggs[1].quant != float64(want[k][1]) || hist != want[k][0] {
					t.Errorf("group %s: persons %d, count %d, sum %v, histogram %d; want %v", k, g.persons, g.vals[0], float64(g.vals[1])*pl.aggs[1].quant, hist, want[k])
				}
			}
		})
	}
}
