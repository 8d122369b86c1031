package protect

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// The fast fixed-point expressions (bounds tested by comparisons, constants
// beyond them) give, row by row, exactly what the reference rule gives —
// typeof() guard, clamp with max/min, centre, scale, round half away from
// zero — on every kind of value and every column affinity; on a column that
// might have TEXT affinity the rewrite keeps typeof().
func TestFixedPointMatchesReference(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	values := []string{"NULL", "0", "-3", "2.5", "10", "60", "59.999", "10.0001", "35", "-1e300", "1e300", "9e999", "-9e999",
		"'55'", "'abc'", "''", "x'00'", "x'3535'", "1e15", "-7", "61", "9", "34.99609375", "35.00390625", "22.123456789",
		// halves of the quanta, where rounding goes away from zero
		"35.03125", "34.96875", "35.0078125", "34.9921875", "0.5", "-0.5", "4.76837158203125e-07", "-4.76837158203125e-07", "4.9999995", "-4.9999995", "1e-320", "-1e-320", "-0.0"}
	for _, typ := range []string{"REAL", "INTEGER", "", "NUMERIC", "TEXT", "VARCHAR(10)", "ANY", "FLOAT", "BLOB"} {
		t.Run("type="+typ, func(t *testing.T) {
			if _, err := db.Exec(`DROP TABLE IF EXISTS v; CREATE TABLE v (x ` + typ + `)`); err != nil {
				t.Fatal(err)
			}
			for _, v := range values {
				if _, err := db.Exec(`INSERT INTO v VALUES (` + v + `)`); err != nil {
					t.Fatal(err)
				}
			}
			pl := &plan{table: "v", aggs: []aggPlan{
				{kind: dpselect.Sum, column: "x", lo: 10, hi: 60, quant: 0x1p-4},
				{kind: dpselect.Var, column: "x", lo: 10, hi: 60, centred: true, mid: 35, quant: 0x1p-6, sqMid: 312.5, sqQuant: 0x1p-3},
				{kind: dpselect.Sum, column: "x", lo: -5, hi: 5, quant: 0x1p-20},
				{kind: dpselect.Avg, column: "x", lo: -5, hi: 5, centred: true, mid: 0, quant: 0x1p-20},
				{kind: dpselect.Avg, column: "x", lo: 34.5, hi: 35.5, centred: true, mid: 35, quant: 0x1p-6},
				{kind: dpselect.Sum, column: "x", lo: -60, hi: -10, quant: 0x1p-4},
				{kind: dpselect.Sum, column: "x", lo: 0, hi: 35, quant: 0x1p-5},
				{kind: dpselect.Sum, column: "x", lo: -35, hi: 0, quant: 0x1p-5},
			}}
			conn, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			numeric, err := columnNumeric(t.Context(), conn, pl.table)
			if err != nil {
				t.Fatal(err)
			}
			pl.applySchema(numeric, false, SchemaFacts{})
			text := typ == "TEXT" || typ == "VARCHAR(10)"
			for _, a := range pl.aggs {
				if a.numericCompare == text {
					t.Fatalf("numericCompare %v for type %q", a.numericCompare, typ)
				}
				ref := func(sq bool, scale float64) string {
					y := fmt.Sprintf("(max(%s, min(%s, x)) - %s)", num(a.lo), num(a.hi), num(a.mid))
					if sq {
						y = fmt.Sprintf("(%s * %s - %s)", y, y, num(a.sqMid))
					}
					return fmt.Sprintf("CASE WHEN typeof(x) IN ('integer', 'real') THEN CAST(round(%s * %s) AS INTEGER) END", y, num(scale))
				}
				pairs := [][2]string{
					{valueExpr(a), ref(false, 1/a.quant)},
					{"CASE WHEN " + numberGuard("x", !a.numericCompare) + " THEN 1 END", "CASE WHEN typeof(x) IN ('integer', 'real') THEN 1 END"},
					{"(SELECT " + countNumbers("x", !a.numericCompare) + " FROM v AS w WHERE w.rowid = v.rowid)", "CASE WHEN typeof(x) IN ('integer', 'real') THEN 1 ELSE 0 END"},
				}
				if a.needsSq() {
					pairs = append(pairs, [2]string{squareExpr(a), ref(true, 1/a.sqQuant)})
				}
				m := a
				m.kind = dpselect.Median
				pairs = append(pairs, [2]string{bucketExpr(m), fmt.Sprintf("CASE WHEN typeof(x) IN ('integer', 'real') THEN max(0, min(%d, CAST((max(%s, min(%s, x)) - %s) * %s AS INTEGER))) END",
					MedianBuckets-1, num(a.lo), num(a.hi), num(a.lo), num(MedianBuckets/(a.hi-a.lo)))})
				for _, p := range pairs {
					rows, err := db.Query(`SELECT quote(x), ` + p[0] + `, ` + p[1] + ` FROM v`)
					if err != nil {
						t.Fatal(err)
					}
					n := 0
					for rows.Next() {
						var x string
						var got, want sql.NullInt64
						if err := rows.Scan(&x, &got, &want); err != nil {
							t.Fatal(err)
						}
						if got != want {
							t.Errorf("%s: x = %s: %v, reference %v", p[0], x, got, want)
						}
						n++
					}
					rows.Close()
					if n != len(values) {
						t.Fatalf("%d rows", n)
					}
				}
			}
		})
	}
}
