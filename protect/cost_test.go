package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// workValues are the values of workTable's text columns: at the default
// max_length, of characters that trim, instr and LIKE must compare one by
// one, and a longer one that the guards drop.
var workValues = []string{
	strings.Repeat("a", DefaultMaxLength),
	strings.Repeat(" ", DefaultMaxLength),
	strings.Repeat("ab", DefaultMaxLength/2),
	strings.Repeat("é", DefaultMaxLength/2),
	strings.Repeat("a", 10*DefaultMaxLength), // dropped by any WHERE that reads it
}

// workTable is a file whose protected table t(pid, a, b, n) holds rows
// built to make string functions slow: a is workValues[kind] in every row,
// b each of workValues in turn.
func workTable(t *testing.T, rows, kind int) *Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	ctx := context.Background()
	b, _ := accountant.NewBudget("default", 1000, 0, 1e-5)
	if err := ledger.Init(ctx, db, b); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (pid INTEGER, a TEXT, b TEXT, n)`); err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin()
	for i := range rows {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?, ?, ?)`, i, workValues[kind], workValues[i%len(workValues)], []any{int64(i), 1.5, "7"}[i%3]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := Protect(ctx, db, "t", Policy{}); err != nil {
		t.Fatal(err)
	}
	e, err := EngineFor(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Release() })
	return e
}

// exprGen writes random WHERE expressions of the accepted grammar.
type exprGen struct{ r *rand.Rand }

func (g exprGen) lit() string {
	switch g.r.IntN(4) {
	case 0:
		return fmt.Sprint(g.r.IntN(2000) - 1000)
	case 1:
		return "NULL"
	}
	chars := []string{"a", "b", " ", "%", "_", "é"}
	n := []int{0, 1, 3, 20, 100, 400, 1000}[g.r.IntN(7)]
	var b strings.Builder
	c := chars[g.r.IntN(len(chars))]
	for b.Len() < n {
		if g.r.IntN(8) == 0 {
			c = chars[g.r.IntN(len(chars))]
		}
		b.WriteString(c)
	}
	return dpselect.QuoteString(b.String())
}

func (g exprGen) expr(depth int) string {
	if depth == 0 || g.r.IntN(4) == 0 {
		if g.r.IntN(2) == 0 {
			return []string{"a", "b", "n", "pid"}[g.r.IntN(4)]
		}
		return g.lit()
	}
	x := func() string { return g.expr(depth - 1) }
	switch g.r.IntN(14) {
	case 0:
		return fmt.Sprintf("(%s %s %s)", x(), []string{"=", "<", ">=", "<>", "IS"}[g.r.IntN(5)], x())
	case 1:
		return fmt.Sprintf("(%s %s %s)", x(), []string{"AND", "OR"}[g.r.IntN(2)], x())
	case 2:
		return fmt.Sprintf("(%s %s %s)", x(), []string{"+", "-", "*", "/", "%"}[g.r.IntN(5)], x())
	case 3:
		return fmt.Sprintf("(CASE WHEN %s THEN %s ELSE %s END)", x(), x(), x())
	case 4:
		return fmt.Sprintf("(%s LIKE %s)", x(), g.lit())
	case 5:
		return fmt.Sprintf("(%s IN (%s, %s, %s))", x(), x(), x(), x())
	case 6:
		return fmt.Sprintf("(%s BETWEEN %s AND %s)", x(), x(), x())
	case 7:
		return fmt.Sprintf("CAST(%s AS %s)", x(), []string{"TEXT", "INTEGER", "BLOB", "REAL"}[g.r.IntN(4)])
	case 8:
		f := []string{"trim", "ltrim", "rtrim", "instr"}[g.r.IntN(4)]
		return fmt.Sprintf("%s(%s, %s)", f, x(), x())
	case 9:
		return fmt.Sprintf("substr(%s, %d, %d)", x(), g.r.IntN(50), g.r.IntN(300))
	case 10:
		f := []string{"lower", "upper", "length", "octet_length", "typeof", "unicode", "trim", "round", "sign"}[g.r.IntN(9)]
		return fmt.Sprintf("%s(%s)", f, x())
	case 11:
		f := []string{"coalesce", "ifnull", "nullif", "min", "max"}[g.r.IntN(5)]
		return fmt.Sprintf("%s(%s, %s)", f, x(), x())
	case 12:
		return fmt.Sprintf("iif(%s, %s, %s)", x(), x(), x())
	}
	return fmt.Sprintf("(NOT %s)", x())
}

// cpuPerRow runs pl's read on each engine three times and returns, per
// engine, its least CPU time per row read.
func cpuPerRow(t *testing.T, es []*Engine, pl *plan, rows int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var out []time.Duration
	for _, e := range es {
		conn, err := e.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		best := time.Duration(1 << 62)
		for range 3 {
			c0 := processCPU()
			if _, err := e.read(ctx, conn, pl); err != nil {
				t.Fatalf("%s: %v", pl.where, err)
			}
			best = min(best, processCPU()-c0)
		}
		conn.Close()
		out = append(out, best/time.Duration(rows))
	}
	return out
}

// TestRowWorkBound: for random accepted statements over rows built to be
// slow (a table of each kind of value), the CPU time per row read stays
// under the documented bound, rowWork units of about a nanosecond
// (cost.go) beyond reading the row (measured on each table by a statement
// that reads both text columns and does nothing with them), with a margin
// for a shared machine; and statements whose bound exceeds MaxRowWork are
// refused. The costliest shapes (trim with a
// character set, LIKE, instr at the limits) are always among them.
func TestRowWorkBound(t *testing.T) {
	const rows = 100
	var es []*Engine
	for kind := range workValues {
		es = append(es, workTable(t, rows, kind))
	}
	e := es[0]
	ctx := context.Background()
	conn, err := e.meta.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	planOf := func(where string) (*plan, error) {
		return e.plan(ctx, conn, "default", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE `+where)
	}
	base, err := planOf("a >= '' AND b >= ''")
	if err != nil {
		t.Fatal(err)
	}
	baseCPU := cpuPerRow(t, es, base, rows)
	fixed := []string{
		"trim(a, " + dpselect.QuoteString(strings.Repeat("b", 29)+"a") + ") = 'x'",
		"rtrim(b, ' ') = ltrim(a, 'a ')",
		"a LIKE " + dpselect.QuoteString("%"+strings.Repeat("a", 120)+"b"),
		"instr(a, " + dpselect.QuoteString(strings.Repeat("a", 200)+"b") + ") > 0",
		"instr(substr(a, 1, 100), substr(b, 1, 100)) > 0",
		"lower(a) = upper(b) AND length(a) > length(b) AND substr(a, 3, 500) < substr(b, 2, 600)",
		// LIKE's worst patterns: many wildcards, each followed by a
		// character most of the value matches.
		"a LIKE " + dpselect.QuoteString(strings.Repeat("%a_", 40)+"b"),
		"b LIKE " + dpselect.QuoteString(strings.Repeat("_%", 60)+"x"),
		"a LIKE " + dpselect.QuoteString(strings.Repeat("%ab", 40)+"%c"),
	}
	g := exprGen{rand.New(rand.NewPCG(22, 1))}
	var accepted, refused int
	worst := 0.0
	for i := 0; accepted < len(fixed)+40 && i < 5000; i++ {
		where := g.expr(4)
		if i < len(fixed) {
			where = fixed[i]
		}
		pl, err := planOf(where)
		if err != nil {
			if !IsRefusal(err) || i < len(fixed) {
				t.Fatalf("WHERE %s: %v", where, err)
			}
			refused++
			continue
		}
		if pl.rowWork > MaxRowWork {
			t.Fatalf("WHERE %s: accepted with rowWork %g over %d", where, pl.rowWork, MaxRowWork)
		}
		accepted++
		for k, cpu := range cpuPerRow(t, es, pl, rows) {
			// The bound, in nanoseconds, beyond reading the row, with a
			// margin of 3 for a shared machine.
			bound := 3 * (pl.rowWork + float64(baseCPU[k].Nanoseconds()) + 200)
			worst = max(worst, float64((cpu-baseCPU[k]).Nanoseconds())/pl.rowWork)
			if float64(cpu.Nanoseconds()) > bound {
				t.Errorf("WHERE %.200s: %v of CPU per row on table %d, over the bound of %.0f ns (rowWork %.0f units)", where, cpu, k, bound, pl.rowWork)
			}
		}
	}
	t.Logf("%d accepted, %d refused; reading a row %v of CPU (per kind of row); at most %.3f ns per unit of rowWork beyond it", accepted, refused, baseCPU, worst)
	if accepted < len(fixed)+40 || refused == 0 {
		t.Errorf("%d accepted, %d refused: the generator does not cover both sides", accepted, refused)
	}
}

// The costliest shapes just beyond the limits are refused, whatever the
// literal a CASE chooses.
func TestRowWorkRefusals(t *testing.T) {
	policies := map[string]Policy{"t": {MaxGroups: 1, MaxRows: 1, MaxLength: map[string]int{"b": 100}}}
	cols := map[string]string{"pid": "pid", "a": "a", "b": "b"}
	for _, tc := range []struct{ where, want string }{
		{"trim(CASE WHEN pid = 17 THEN '" + strings.Repeat("a", 1001) + "' ELSE '' END, 'b') = 'x'", "at most 1000 bytes"},
		{"trim(CASE WHEN pid = 17 THEN '" + strings.Repeat("a", 1000) + "' ELSE '' END, '" + strings.Repeat("b", 999) + "a') = 'x'", "units of work per row"},
		{"instr(a, a) > 0", "units of work per row"},
		{"a IN (" + strings.Repeat("'"+strings.Repeat("x", 1000)+"', ", 10) + "'y')", "add up to more than"},
		{"a LIKE '%" + strings.Repeat("a", 200) + "%'", "units of work per row"},
	} {
		st, err := dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE ` + tc.where)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkStatement(st, policies, cols, 1e-5); !IsRefusal(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WHERE %.80s: %v, want a refusal containing %q", tc.where, err, tc.want)
		}
	}
	// Each MEDIAN evaluates WHERE again: a WHERE that fits once does not
	// fit three times.
	where := "instr(a, '" + strings.Repeat("x", 120) + "') > 0"
	st, _ := dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE ` + where)
	if _, err := checkStatement(st, policies, cols, 1e-5); err != nil {
		t.Errorf("WHERE %s once: %v", where, err)
	}
	st, _ = dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) MEDIAN(pid, contribution_bounds_per_group => (0, 9)) AS m1,
		MEDIAN(pid, contribution_bounds_per_group => (0, 9)) AS m2 FROM t WHERE ` + where)
	if _, err := checkStatement(st, policies, cols, 1e-5); !IsRefusal(err) || !strings.Contains(err.Error(), "units of work per row") {
		t.Errorf("WHERE %s with two MEDIANs: %v, want a refusal", where, err)
	}
	// A declared max_length lowers the bound: instr over b (100 bytes) fits.
	st, _ = dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE instr(b, b) > 0`)
	pl, err := checkStatement(st, policies, cols, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pl.where, `(octet_length("b") > 100) IS NOT 1`) {
		t.Errorf("WHERE %s: no guard of b's max_length", pl.where)
	}
	// Columns only compared with literals need no guard (their comparisons
	// cost at most the literals' lengths); a column passed to a function
	// does.
	for where, guarded := range map[string]string{
		`a >= 'x' AND b IN ('p', 'q') AND pid BETWEEN 1 AND 5 AND a IS NULL AND 3 < pid`: "",
		`lower(a) = 'x' AND b = 'y'`:            `(octet_length("a") > 1024) IS NOT 1 AND (`,
		`a = b`:                                 `(octet_length("a") > 1024) IS NOT 1 AND (octet_length("b") > 100) IS NOT 1 AND (`,
		`b IN ('p', a) AND pid BETWEEN a AND 3`: `(octet_length("b") > 100) IS NOT 1 AND (octet_length("a") > 1024) IS NOT 1 AND (octet_length("pid") > 1024) IS NOT 1 AND (`,
	} {
		st, _ := dpselect.Parse(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM t WHERE ` + where)
		pl, err := checkStatement(st, policies, cols, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(pl.where, "octet_length"); got != (guarded != "") || guarded != "" && !strings.HasPrefix(pl.where, guarded) {
			t.Errorf("WHERE %s: rewritten %s, want guards %q", where, pl.where, guarded)
		}
	}
}
