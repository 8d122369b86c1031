package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// The noisy values of a statement.
//
// A statement's released aggregates are post-processings of a few noisy
// values per group, each drawn once and charged once (package calibrate
// plans their noise):
//
//   - persons: the partition selection's count of persons (GROUP BY without
//     public keys). When each person holds at most one row of a group
//     (max_rows = 1, each row a person, or a unique privacy unit), COUNT(*)
//     of the group is that count, so COUNT(*) is the selection's noisy
//     count: released groups are those whose noisy count reached the
//     threshold, so COUNT(*) is read conditionally on selection (unbiased
//     for groups that selection keeps every time; larger than the true
//     count, on average, near the threshold).
//   - rows: COUNT(*), when it is not the count of persons.
//   - the count of a column's non-NULL values (COUNT(col)), or of its
//     numbers (AVG, VAR_POP, STDDEV_POP); each is COUNT(*)'s when the schema
//     says so (a NOT NULL column; a numeric NOT NULL column of a STRICT
//     table, or the INTEGER PRIMARY KEY).
//   - a sum of clamped values in fixed point, centred on the bounds' midpoint
//     m = (lo + hi)/2 (moving the sum by at most c = (hi - lo)/2 per row)
//     for AVG, VAR_POP and STDDEV_POP, and for SUM when the statement draws
//     the column's count of numbers n anyway (SUM = centred sum + m n, whose
//     variance Var(sum) + m^2 Var(n) is below the uncentred sum's, which moves
//     by max(|lo|, |hi|) per row); SUM is uncentred otherwise.
//   - a sum of squared centred values (VAR_POP, STDDEV_POP), itself centred
//     on c^2/2.
//   - a histogram of MedianBuckets counts (MEDIAN).
//
// Two aggregates that read the same value (AVG(x) and SUM(x) with the same
// bounds, COUNT(*) and the selection) read the same draw: the statement pays
// for it once, and releasing it twice reveals nothing the first release did
// not (post-processing).
//
// Each value's weight in the split is the variance it contributes to the
// released aggregates, each aggregate's in units of its own scale (a count:
// rows; SUM: rows max(|lo|, |hi|); AVG: rows c/n; VAR_POP: rows c^2/n), with
// the selection weighted as a COUNT. The value-to-aggregate sensitivities
// give the coefficients: SUM = centred sum + m n adds (c/M)^2 to the centred
// sum's weight and (m/M)^2 to n's (M = max(|lo|, |hi|)); AVG = m + S/n adds 1
// to S's and 1/3 to n's (its coefficient (mean - m)/n, with (mean - m)^2
// taken as c^2/3, its mean for a mean uniform in the bounds); VAR_POP adds
// 1/4 to the squares', 4/3 to S's and 1/4 to n's; MEDIAN 1 to its histogram.

// figure names where a value's exact per-group figure comes from.
type figure int

const (
	fromPersons figure = iota // group.persons
	fromVal                   // group.vals[agg]
	fromCount                 // group.counts[agg]
	fromSq                    // group.sqs[agg]
	fromHist                  // group.hists[agg]
)

// noisyValue is one value a statement draws per group.
type noisyValue struct {
	calibrate.Noisy
	key    string
	from   figure
	agg    int     // the aggregate whose figure it reads
	column string  // "" for persons and rows
	part   string  // selection, count, sum, squares, histogram
	lo, hi float64 // a sum's or histogram's bounds
	centre float64 // a centred sum's midpoint
	reads  []string
}

// exact returns the value's exact figure of g in real units (coordinate b of
// a histogram).
func (v *noisyValue) exact(g *group, b int) float64 {
	switch v.from {
	case fromPersons:
		return float64(g.persons)
	case fromVal:
		return float64(g.vals[v.agg]) * v.unit()
	case fromCount:
		return float64(g.counts[v.agg])
	case fromSq:
		return float64(g.sqs[v.agg]) * v.unit()
	}
	if h := g.hists[v.agg]; h != nil {
		return float64(h[b])
	}
	return 0
}

// unit is the value of one unit of the figure: the quantum of a fixed-point
// sum, 1 for counts.
func (v *noisyValue) unit() float64 {
	if v.Fixed {
		return v.Quantum
	}
	return 1
}

// SchemaFacts is what a protected table's schema says about its columns, by
// name as the schema spells them: NOT NULL columns, and columns that hold
// numbers only (an INT, INTEGER or REAL NOT NULL column of a STRICT table, or
// the INTEGER PRIMARY KEY of a rowid table). A statement reads them to draw
// one count where SQL's counts agree (values.go).
type SchemaFacts struct {
	NotNull    map[string]bool `json:"not_null,omitempty"`
	NumberOnly map[string]bool `json:"number_only,omitempty"`
}

// valueBuilder collects a statement's values.
type valueBuilder struct {
	pl        *plan
	facts     SchemaFacts
	perPerson bool // COUNT(*) of a group is its count of persons
	vals      []noisyValue
	byKey     map[string]int
}

// add returns the index of the value of key, creating it with v, and adds
// weight to it.
func (b *valueBuilder) add(key string, v noisyValue, weight float64) int {
	i, ok := b.byKey[key]
	if !ok {
		v.key = key
		if v.Rows == 0 {
			v.Rows = b.pl.maxRows
		}
		if v.Name == "" {
			v.Name = key
		}
		i = len(b.vals)
		b.vals = append(b.vals, v)
		b.byKey[key] = i
	}
	b.vals[i].Weight += weight
	return i
}

func (b *valueBuilder) read(i int, out string) {
	b.vals[i].reads = append(b.vals[i].reads, out)
}

// persons is the selection's count.
func (b *valueBuilder) persons(weight float64) int {
	return b.add("persons", noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{Name: "count of persons", Rows: 1, Bound: 1,
		Selection: true}}, from: fromPersons, part: "selection"}, weight)
}

// rowsKey is the key COUNT(*) resolves to.
func (b *valueBuilder) rowsKey() string {
	if b.perPerson && b.pl.selection() {
		return "persons"
	}
	return "rows"
}

// rows is COUNT(*), read (if it is not the count of persons) from aggregate
// agg's figure f.
func (b *valueBuilder) rows(weight float64, agg int, f figure) int {
	if b.rowsKey() == "persons" {
		return b.persons(weight)
	}
	return b.add("rows", noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{Name: "COUNT(*)", Bound: 1}}, from: f, agg: agg, part: "count"}, weight)
}

// distinctPersons is COUNT(DISTINCT unit), the group's count of persons:
// the selection's when there is one; else COUNT(*)'s when each person holds
// at most one row of a group (the two figures are then equal); else a value
// of its own, of sensitivity 1 per group (aggregates.go).
func (b *valueBuilder) distinctPersons(weight float64) int {
	switch {
	case b.pl.selection():
		return b.persons(weight)
	case b.perPerson:
		return b.add("rows", noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{Name: "COUNT(*)", Bound: 1}},
			from: fromPersons, part: "count"}, weight)
	}
	return b.add("persons", noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{Name: "count of persons", Rows: 1,
		Bound: 1}}, from: fromPersons, part: "count"}, weight)
}

// numbersKey is the key a column's count of numbers resolves to.
func (b *valueBuilder) numbersKey(col string) string {
	if b.facts.NumberOnly[col] {
		return b.rowsKey()
	}
	return "numbers:" + col
}

func (b *valueBuilder) numbers(col string, weight float64, agg int) int {
	if b.facts.NumberOnly[col] {
		return b.rows(weight, agg, fromCount)
	}
	return b.add("numbers:"+col, noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{Name: "count of numbers in " + col, Bound: 1}},
		from: fromCount, agg: agg, column: col, part: "count"}, weight)
}

func boundsKey(kind, col string, lo, hi float64) string {
	return kind + ":" + col + ":" + strconv.FormatFloat(lo, 'g', -1, 64) + ":" + strconv.FormatFloat(hi, 'g', -1, 64)
}

// buildValues decides the values of pl's aggregates (schema facts known)
// and records, per aggregate, which values it reads.
func buildValues(pl *plan, facts SchemaFacts) []noisyValue {
	b := &valueBuilder{pl: pl, facts: facts, byKey: map[string]int{},
		perPerson: pl.maxRows == 1 || pl.policy.PrivacyUnit == "" || pl.unitUnique}
	if pl.selection() {
		b.persons(1)
	}
	names := pl.itemNames()
	// Counts, and the aggregates that draw a count of numbers, first: a SUM
	// is centred when the statement draws its column's count anyway.
	for ai := range pl.aggs {
		a := &pl.aggs[ai]
		a.val, a.cnt, a.sq = -1, -1, -1
		out := names[ai]
		c := (a.hi - a.lo) / 2
		switch a.kind {
		case dpselect.Count:
			switch {
			case a.persons:
				a.val = b.distinctPersons(1)
			case a.distinct:
				a.val = b.add("distinct:"+a.column, noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{
					Name: "COUNT(DISTINCT " + a.column + ")", Bound: 1}}, from: fromVal, agg: ai, column: a.column,
					part: "count"}, 1)
			case a.column == "" || facts.NotNull[a.column]:
				a.val = b.rows(1, ai, fromVal)
			default:
				a.val = b.add("nonnull:"+a.column, noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{Name: "COUNT(" + a.column + ")", Bound: 1}},
					from: fromVal, agg: ai, column: a.column, part: "count"}, 1)
			}
			b.read(a.val, out)
		case dpselect.Avg, dpselect.Var, dpselect.Std:
			a.centred, a.mid = true, (a.lo+a.hi)/2
			ws, wn := 1.0, 1.0/3
			if a.needsSq() {
				a.sqMid = c * c / 2
				ws, wn = 4.0/3, 0.25
				a.sq = b.add(boundsKey("squares", a.column, a.lo, a.hi), noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{
					Name: "sum of squares of " + a.column, Bound: a.sqMid, Fixed: true}}, from: fromSq, agg: ai, column: a.column,
					part: "squares", lo: a.lo, hi: a.hi, centre: a.mid}, 0.25)
				b.read(a.sq, out)
			}
			a.val = b.add(boundsKey("csum", a.column, a.lo, a.hi), noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{
				Name: fmt.Sprintf("sum of %s - %g", a.column, a.mid), Bound: c, Fixed: true}}, from: fromVal, agg: ai, column: a.column,
				part: "sum", lo: a.lo, hi: a.hi, centre: a.mid}, ws)
			a.cnt = b.numbers(a.column, wn, ai)
			b.read(a.val, out)
			b.read(a.cnt, out)
		case dpselect.Median, dpselect.Percentile, dpselect.Quantiles:
			a.val = b.add(boundsKey("histogram", a.column, a.lo, a.hi), noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{
				Name: "histogram of " + a.column, Bound: 1, Dim: MedianBuckets}}, from: fromHist, agg: ai, column: a.column,
				part: "histogram", lo: a.lo, hi: a.hi}, 1)
			b.read(a.val, out)
		}
	}
	for ai := range pl.aggs {
		a := &pl.aggs[ai]
		if a.kind != dpselect.Sum {
			continue
		}
		out := names[ai]
		m := math.Max(math.Abs(a.lo), math.Abs(a.hi))
		c := (a.hi - a.lo) / 2
		if _, ok := b.byKey[b.numbersKey(a.column)]; ok {
			a.centred, a.mid = true, (a.lo+a.hi)/2
			a.val = b.add(boundsKey("csum", a.column, a.lo, a.hi), noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{
				Name: fmt.Sprintf("sum of %s - %g", a.column, a.mid), Bound: c, Fixed: true}}, from: fromVal, agg: ai, column: a.column,
				part: "sum", lo: a.lo, hi: a.hi, centre: a.mid}, (c/m)*(c/m))
			a.cnt = b.numbers(a.column, (a.mid/m)*(a.mid/m), ai)
			b.read(a.cnt, out)
		} else {
			a.val = b.add(boundsKey("sum", a.column, a.lo, a.hi), noisyValue{Noisy: calibrate.Noisy{Value: calibrate.Value{
				Name: "sum of " + a.column, Bound: m, Fixed: true}}, from: fromVal, agg: ai, column: a.column,
				part: "sum", lo: a.lo, hi: a.hi}, 1)
		}
		b.read(a.val, out)
	}
	return b.vals
}

// schemaFactsOf reads the SchemaFacts of a main-schema table.
func schemaFactsOf(ctx context.Context, conn *sql.Conn, table string) (SchemaFacts, error) {
	f := SchemaFacts{NotNull: map[string]bool{}, NumberOnly: map[string]bool{}}
	var strict, withoutRowid, pkIndex bool
	if err := conn.QueryRowContext(ctx, `SELECT strict, wr FROM pragma_table_list(?) WHERE schema = 'main'`, table).Scan(&strict, &withoutRowid); err != nil {
		return f, fmt.Errorf("reading the schema of %s: %w", table, err)
	}
	// An INTEGER PRIMARY KEY is the rowid (integers only, never NULL) unless
	// SQLite gave it an index of its own: "INTEGER PRIMARY KEY DESC" is an
	// ordinary column of INTEGER affinity under a unique index, which holds
	// text, reals and NULLs.
	if err := conn.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pragma_index_list(?, 'main') WHERE origin = 'pk'`, table).Scan(&pkIndex); err != nil {
		return f, fmt.Errorf("reading the schema of %s: %w", table, err)
	}
	rows, err := conn.QueryContext(ctx, `SELECT name, upper(type), "notnull", pk, (SELECT count(*) FROM pragma_table_info(?1, 'main') WHERE pk > 0)
		FROM pragma_table_info(?1, 'main')`, table)
	if err != nil {
		return f, fmt.Errorf("reading the schema of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ string
		var notNull bool
		var pk, pks int
		if err := rows.Scan(&name, &typ, &notNull, &pk, &pks); err != nil {
			return f, err
		}
		typ = strings.TrimSpace(typ)
		rowid := !withoutRowid && !pkIndex && typ == "INTEGER" && pk == 1 && pks == 1
		if notNull || rowid {
			f.NotNull[name] = true
		}
		if rowid || (strict && notNull && (typ == "INT" || typ == "INTEGER" || typ == "REAL")) {
			f.NumberOnly[name] = true
		}
	}
	return f, rows.Err()
}
