package protect

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// The rewritten SQL returns one row per group present in the data:
// the group keys, _p (the number of distinct persons in the group, after
// bounding), then per aggregate its exact, bounded figure: COUNT an integer
// count; SUM the sum of clamped values in units of the quantum; AVG that sum
// (of values centred on the midpoint) and the count of its values.
//
// Per-person bounding (privacy unit column u): each (person, group) keeps at
// most max_rows of its rows and each person at most max_groups of their
// groups, chosen by SQLite's random() (a ChaCha20 stream seeded from the
// operating system), drawn afresh for each row and each (person, group): which
// rows are kept depends only on that person's rows and fresh randomness, never
// on anyone else's. Rows whose privacy unit is NULL are dropped (public rule).
//
// Values (public rule): a SUM/AVG value that is not an INTEGER or REAL (NULL,
// text, blob; SQLite stores NaN as NULL) is dropped; a number outside the
// bounds is clamped to them (infinities included); it is then rounded to the
// quantum. COUNT(col) counts non-NULL values.

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// roundHalfAway rounds as SQLite's round(x) does: half away from zero.
func roundHalfAway(x float64) int64 { return int64(math.Round(x)) }

// numberGuard is true exactly for the rows whose value of column c is an
// INTEGER or REAL (NaN is stored as NULL; infinities are numbers). On a
// column without TEXT affinity it is one comparison with +infinity (NULL
// compares to NULL, text and blobs sort after every number, every number is
// at most +infinity), much cheaper than typeof(); a TEXT-affinity column
// would compare them as text, so there it is typeof().
func numberGuard(c string, text bool) string {
	if text {
		return fmt.Sprintf("typeof(%s) IN ('integer', 'real')", c)
	}
	return fmt.Sprintf("%s <= 9e999", c)
}

// countNumbers is the SQL of the count of the rows whose value of column c
// is a number.
func countNumbers(c string, text bool) string {
	return fmt.Sprintf("count(*) FILTER (WHERE %s)", numberGuard(c, text))
}

// fixedPoint returns the SQL of f(clamp(x)) in units of 1/scale, rounded
// half away from zero to an INTEGER, NULL when x is not a number: sq false
// gives f(y) = y - mid (y for an uncentred SUM), sq true f(y) = (y - mid)^2 - sqMid. On a column
// without TEXT affinity the bounds are tested first, so that the rows beyond
// them (and only numbers get there: text and blobs sort after every number,
// NULL compares to NULL) take a constant computed here, and only the rows
// inside pay for the arithmetic.
func fixedPoint(a aggPlan, sq bool, scale float64) string {
	c := dpselect.QuoteIdent(a.column)
	f := func(y string) string {
		if a.centred {
			y = fmt.Sprintf("(%s - %s)", y, num(a.mid))
		}
		if sq {
			y = fmt.Sprintf("(%s * %s - %s)", y, y, num(a.sqMid))
		}
		return fmt.Sprintf("CAST(round(%s * %s) AS INTEGER)", y, num(scale))
	}
	if !a.numericCompare {
		return fmt.Sprintf("CASE WHEN %s THEN %s END", numberGuard(c, true), f(fmt.Sprintf("max(%s, min(%s, %s))", num(a.lo), num(a.hi), c)))
	}
	fv := func(y float64) int64 {
		if a.centred {
			y -= a.mid
		}
		if sq {
			y = y*y - a.sqMid
		}
		return roundHalfAway(y * scale)
	}
	if sq {
		return fmt.Sprintf("CASE WHEN %[1]s >= %[2]s THEN CASE WHEN %[1]s <= 9e999 THEN %[4]d END WHEN %[1]s <= %[3]s THEN %[5]d ELSE %[6]s END",
			c, num(a.hi), num(a.lo), fv(a.hi), fv(a.lo), f(c))
	}
	// The centred value y = (x - m) * scale (m = mid, or 0 for an uncentred SUM) is
	// rounded as SQLite's round() rounds, y >= 0 to CAST(y + 0.5 AS INTEGER)
	// and y < 0 to -CAST(-y + 0.5 AS INTEGER) ((m - x) * scale is exactly
	// -y), with the sign read off a comparison of x with m instead of a
	// function call; the comparisons are nested so that a row inside the
	// bounds makes two. A number at or beyond a bound takes the bound's
	// constant; NULL, text and blobs fail every comparison but
	// x <= +infinity's and come out NULL.
	m := 0.0
	if a.centred {
		m = a.mid
	}
	pos := fmt.Sprintf("CAST((%s - %s) * %s + 0.5 AS INTEGER)", c, num(m), num(scale))
	neg := fmt.Sprintf("-CAST((%s - %s) * %s + 0.5 AS INTEGER)", num(m), c, num(scale))
	switch {
	case a.lo < m && m < a.hi:
		return fmt.Sprintf("CASE WHEN %[1]s < %[2]s THEN CASE WHEN %[1]s > %[3]s THEN %[5]s ELSE %[7]d END WHEN %[1]s < %[4]s THEN %[6]s WHEN %[1]s <= 9e999 THEN %[8]d END",
			c, num(m), num(a.lo), num(a.hi), neg, pos, fv(a.lo), fv(a.hi))
	case m <= a.lo:
		return fmt.Sprintf("CASE WHEN %[1]s < %[3]s THEN CASE WHEN %[1]s > %[2]s THEN %[4]s ELSE %[5]d END WHEN %[1]s <= 9e999 THEN %[6]d END",
			c, num(a.lo), num(a.hi), pos, fv(a.lo), fv(a.hi))
	default: // hi <= m
		return fmt.Sprintf("CASE WHEN %[1]s <= %[2]s THEN %[5]d WHEN %[1]s < %[3]s THEN %[4]s WHEN %[1]s <= 9e999 THEN %[6]d END",
			c, num(a.lo), num(a.hi), neg, fv(a.lo), fv(a.hi))
	}
}

// valueExpr is the fixed-point value of aggregate a for one row, NULL when the
// row's value is dropped.
func valueExpr(a aggPlan) string { return fixedPoint(a, false, 1/a.quant) }

// squareExpr is the fixed-point square of the centred value (VAR_POP,
// STDDEV_POP), itself centred on sqMid, NULL when the value is dropped.
func squareExpr(a aggPlan) string { return fixedPoint(a, true, 1/a.sqQuant) }

// The rewrite in levels, one builder each:
//
//	level 1, rows:    the rows the statement reads (rowFilter), with their
//	                  keys' canonical forms and per aggregate its value
//	                  columns (valueColumns), or a MEDIAN's bucket;
//	level 2, persons: per-person bounding, either at most max_rows rows per
//	                  (person, group) ranked at random (rankedRows) and at
//	                  most max_groups groups per person (personGroups), or
//	                  one row per person (onePerPerson);
//	level 3, groups:  per group the number of persons and each aggregate's
//	                  figures (groupLevel), from level 1 itself when each row
//	                  is a person, else from level 2.
//
// rewrite and rewriteHistogram compose them; Statement.RowSQL (an engine
// outside SQLite) reads level 1's rows through rowFilter and valueExpr.

// rewriter holds what every level of one plan's SQL uses.
type rewriter struct {
	pl    *plan
	table string   // main."table"
	where string   // the rows read (rowFilter), with the unit not NULL when each row is a person
	unit  string   // the privacy unit, quoted; "" when each row is a person (no unit, or a unique one)
	keys  []string // the GROUP BY keys' canonical forms (keys.go)
	kk    []string // their names above level 1: _k0, _k1, ...
}

func newRewriter(pl *plan) *rewriter {
	r := &rewriter{pl: pl, table: "main." + dpselect.QuoteIdent(pl.table), where: rowFilter(pl),
		keys: make([]string, len(pl.keys)), kk: make([]string, len(pl.keys))}
	for i := range pl.keys {
		r.keys[i], r.kk[i] = pl.keyExpr(i), "_k"+strconv.Itoa(i)
	}
	switch {
	case pl.join != nil:
		// The joined rows (join.go), bounded per person after the join;
		// when each protected row is a person, by joinUnit, one row each.
		r.table = pl.joinedRows()
		r.unit = dpselect.QuoteIdent(pl.policy.PrivacyUnit)
		if pl.policy.PrivacyUnit == "" || pl.unitUnique {
			r.unit = joinUnit
		}
	case pl.unitUnique:
		// One row per person at most: nothing to bound, but rows without a
		// person are dropped as below.
		r.where = fmt.Sprintf("(%s) AND %s", r.where, unitKnown(pl))
	case pl.policy.PrivacyUnit != "":
		r.unit = dpselect.QuoteIdent(pl.policy.PrivacyUnit)
	}
	return r
}

// rowFilter is the SQL of the rows a plan reads: those that pass WHERE and
// whose keys are in their public lists (rows with other keys are dropped).
func rowFilter(pl *plan) string {
	where := "1"
	if pl.where != "" {
		where = pl.where
	}
	for i := range pl.keySources {
		where = fmt.Sprintf("(%s) AND %s", where, pl.keyFilter(i))
	}
	return where
}

// unitKnown is the SQL that drops the rows whose privacy unit is NULL (a
// public rule: they belong to no person).
func unitKnown(pl *plan) string { return dpselect.QuoteIdent(pl.policy.PrivacyUnit) + " IS NOT NULL" }

// sqlList writes SQL terms separated by ", ".
type sqlList struct {
	b strings.Builder
	n int
}

func (l *sqlList) add(terms ...string) {
	for _, t := range terms {
		l.sep()
		l.b.WriteString(t)
	}
}

func (l *sqlList) addf(format string, args ...any) {
	l.sep()
	fmt.Fprintf(&l.b, format, args...)
}

func (l *sqlList) sep() {
	if l.n > 0 {
		l.b.WriteString(", ")
	}
	l.n++
}

func (l *sqlList) String() string { return l.b.String() }

// keyColumns adds level 1's key columns: each key's canonical form AS _k<i>.
func (r *rewriter) keyColumns(l *sqlList) {
	for i, k := range r.keys {
		l.add(k + " AS " + r.kk[i])
	}
}

// valueColumns adds level 1's value columns, per aggregate j: COUNT(col)'s
// non-NULL flag _v<j>; a sum's fixed-point value _v<j> and, for VAR_POP and
// STDDEV_POP, its square _w<j> (COUNT(*) needs none, MEDIAN its own query).
func (r *rewriter) valueColumns(l *sqlList) {
	for j, a := range r.pl.aggs {
		switch {
		case !a.mainFigure():
		case a.kind == dpselect.Count && a.column != "":
			l.addf("(%s IS NOT NULL) AS _v%d", dpselect.QuoteIdent(a.column), j)
		case a.kind != dpselect.Count:
			l.addf("%s AS _v%d", valueExpr(a), j)
			if a.needsSq() {
				l.addf("%s AS _w%d", squareExpr(a), j)
			}
		}
	}
}

// rankedRows is level 1 under a privacy unit: the rows of persons, with the
// person (_u), the keys, the columns values adds, and a random rank within
// (person, group), _rn, drawn afresh for each row.
func (r *rewriter) rankedRows(values func(*sqlList)) string {
	var l sqlList
	l.add(r.unit + " AS _u")
	r.keyColumns(&l)
	values(&l)
	l.addf("row_number() OVER (PARTITION BY %s ORDER BY random()) AS _rn",
		strings.Join(append([]string{r.unit}, r.keys...), ", "))
	return fmt.Sprintf("SELECT %s FROM %s WHERE (%s) AND %s IS NOT NULL", l.String(), r.table, r.where, r.unit)
}

// personGroups is level 2: one row per (person, group) of rankedRows, at most
// max_rows rows in it, their count _n and per aggregate j its sums (_s<j>, of
// non-NULL values _c<j>, of squares _q<j>), and a random rank of the group
// among the person's groups, _gn.
func (r *rewriter) personGroups() string {
	var l sqlList
	l.add("_u")
	l.add(r.kk...)
	l.add("count(*) AS _n")
	for j, a := range r.pl.aggs {
		switch {
		case !a.mainFigure():
		case a.kind == dpselect.Count && a.column != "":
			l.addf("sum(_v%d) AS _s%d", j, j)
		case a.kind != dpselect.Count:
			l.addf("coalesce(sum(_v%d), 0) AS _s%d, count(_v%d) AS _c%d", j, j, j, j)
			if a.needsSq() {
				l.addf("coalesce(sum(_w%d), 0) AS _q%d", j, j)
			}
		}
	}
	l.add("row_number() OVER (PARTITION BY _u ORDER BY random()) AS _gn")
	return fmt.Sprintf("SELECT %s FROM (%s) WHERE _rn <= %d GROUP BY %s", l.String(), r.rankedRows(r.valueColumns),
		r.pl.maxRows, strings.Join(append([]string{"_u"}, r.kk...), ", "))
}

// onePerPerson is level 2 when max_rows = max_groups = 1: one row per person,
// in one GROUP BY; SQLite's min() gives its bare columns the values of the
// row where the minimum is reached, here of random(), a fresh uniform choice
// among the person's rows.
func (r *rewriter) onePerPerson() string {
	var l sqlList
	r.keyColumns(&l)
	r.valueColumns(&l)
	l.add("min(random()) AS _r")
	return fmt.Sprintf("SELECT %s FROM %s WHERE (%s) AND %s IS NOT NULL GROUP BY %s", l.String(), r.table, r.where,
		r.unit, r.unit)
}

// What level 3 reads.
type groupInput int

const (
	overRows         groupInput = iota // level 1 itself, each row a person
	overPersons                        // onePerPerson
	overPersonGroups                   // personGroups
)

// groupLevel is level 3: one row per group of from (SQL after FROM), its keys,
// the number of persons in it and per aggregate its figures (groupFigures).
func (r *rewriter) groupLevel(in groupInput, from string) string {
	keys := r.kk
	if in == overRows {
		keys = r.keys
	}
	var l sqlList
	l.add(keys...)
	l.add("count(*)")
	for j, a := range r.pl.aggs {
		groupFigures(&l, in, j, a)
	}
	s := "SELECT " + l.String() + " FROM " + from
	if len(keys) > 0 {
		s += " GROUP BY " + strings.Join(keys, ", ")
	}
	return s
}

// groupFigures adds aggregate j's figures in a group, read from in: COUNT's
// count; a sum's fixed-point sum, for AVG, VAR_POP and STDDEV_POP its count
// of values, and for VAR_POP and STDDEV_POP its sum of squares; MEDIAN a
// placeholder 0 (its histograms are read by rewriteHistogram's query).
func groupFigures(l *sqlList, in groupInput, j int, a aggPlan) {
	switch {
	case !a.mainFigure():
		l.add("0")
	case a.kind == dpselect.Count && a.column == "":
		if in == overPersonGroups {
			l.add("sum(_n)")
		} else {
			l.add("count(*)")
		}
	case a.kind == dpselect.Count:
		switch in {
		case overRows:
			l.add("count(" + dpselect.QuoteIdent(a.column) + ")")
		case overPersons:
			l.addf("sum(_v%d)", j)
		default:
			l.addf("sum(_s%d)", j)
		}
	default:
		switch in {
		case overRows:
			l.addf("coalesce(sum(%s), 0)", valueExpr(a))
			if a.needsCount() {
				l.add(countNumbers(dpselect.QuoteIdent(a.column), !a.numericCompare))
			}
			if a.needsSq() {
				l.addf("coalesce(sum(%s), 0)", squareExpr(a))
			}
		case overPersons:
			l.addf("coalesce(sum(_v%d), 0)", j)
			if a.needsCount() {
				l.addf("count(_v%d)", j)
			}
			if a.needsSq() {
				l.addf("coalesce(sum(_w%d), 0)", j)
			}
		default:
			l.addf("sum(_s%d)", j)
			if a.needsCount() {
				l.addf("sum(_c%d)", j)
			}
			if a.needsSq() {
				l.addf("sum(_q%d)", j)
			}
		}
	}
}

// rewrite returns the SQLite SQL of a plan: level 3 over level 1 when each
// row is a person, else over level 2.
func rewrite(pl *plan) string {
	r := newRewriter(pl)
	switch {
	case r.unit == "":
		// Each row is a person: one row in one group, nothing to bound.
		return r.groupLevel(overRows, fmt.Sprintf("%s WHERE %s", r.table, r.where))
	case pl.maxRows == 1 && pl.maxGroups == 1:
		return r.groupLevel(overPersons, "("+r.onePerPerson()+")")
	}
	return r.groupLevel(overPersonGroups, fmt.Sprintf("(%s) WHERE _gn <= %d", r.personGroups(), pl.maxGroups))
}

// bucketExpr is the histogram bucket, in [0, MedianBuckets), of a MEDIAN's
// clamped value for one row, NULL when the value is dropped (not a number).
func bucketExpr(a aggPlan) string {
	c := dpselect.QuoteIdent(a.column)
	top := MedianBuckets - 1
	scale := num(MedianBuckets / (a.hi - a.lo))
	if !a.numericCompare {
		return fmt.Sprintf("CASE WHEN %s THEN max(0, min(%d, CAST((max(%s, min(%s, %s)) - %s) * %s AS INTEGER))) END",
			numberGuard(c, true), top, num(a.lo), num(a.hi), c, num(a.lo), scale)
	}
	return fmt.Sprintf("CASE WHEN %[1]s >= %[2]s THEN CASE WHEN %[1]s <= 9e999 THEN %[4]d END WHEN %[1]s <= %[3]s THEN CASE WHEN %[1]s >= -9e999 THEN 0 END ELSE max(0, min(%[4]d, CAST((%[1]s - %[3]s) * %[5]s AS INTEGER))) END",
		c, num(a.hi), num(a.lo), top, scale)
}

// rewriteHistogram returns the SQL of MEDIAN aggregate a's histograms (and
// PERCENTILE_CONT's, APPROX_QUANTILES's): one row (group keys, bucket, count)
// per non-empty bucket of each group, over rows bounded per person as the
// main statement bounds them (at most max_rows rows in each of at most
// max_groups groups, chosen afresh at random: the histogram is its own
// release, bounded on its own). Its level 1 is the main statement's, with
// the bucket as the value column.
func rewriteHistogram(pl *plan, a aggPlan) string { return ownQuery(pl, bucketExpr(a), true) }

// rewriteDistinct returns the SQL of COUNT(DISTINCT col) aggregate a: one row
// (group keys, the number of distinct non-NULL values) per group, over rows
// bounded per person as rewriteHistogram's are (aggregates.go).
func rewriteDistinct(pl *plan, a aggPlan) string {
	return ownQuery(pl, dpselect.QuoteIdent(a.column), false)
}

// ownQuery is the SQL of an aggregate read by a query of its own, over the
// rows of level 1 with value column _b = value, bounded per person: per
// group and value of _b its count of rows (byValue), or per group the count
// of distinct values of _b. NULL values are not counted.
func ownQuery(pl *plan, value string, byValue bool) string {
	r := newRewriter(pl)
	val := func(l *sqlList) { l.add(value + " AS _b") }
	group := append([]string(nil), r.kk...)
	fig := "count(DISTINCT _b)"
	if byValue {
		group, fig = append(group, "_b"), "count(*)"
	}
	groupBy := func(cols []string) string {
		if len(cols) == 0 {
			return ""
		}
		return " GROUP BY " + strings.Join(cols, ", ")
	}
	if r.unit == "" {
		var l sqlList
		r.keyColumns(&l)
		val(&l)
		rows := fmt.Sprintf("SELECT %s FROM %s WHERE %s", l.String(), r.table, r.where)
		return fmt.Sprintf("SELECT %s FROM (%s) WHERE _b IS NOT NULL%s",
			strings.Join(append(append([]string(nil), group...), fig), ", "), rows, groupBy(group))
	}
	rows := r.rankedRows(val)
	pk := strings.Join(append([]string{"_u"}, r.kk...), ", ")
	groups := fmt.Sprintf("SELECT %s, row_number() OVER (PARTITION BY _u ORDER BY random()) AS _gn "+
		"FROM (SELECT DISTINCT %s FROM _r)", pk, pk)
	on := []string{"_r._u IS _g._u"}
	rg := make([]string, len(group))
	for i, k := range group {
		rg[i] = "_r." + k
	}
	for _, k := range r.kk {
		on = append(on, fmt.Sprintf("_r.%s IS _g.%s", k, k))
	}
	return fmt.Sprintf("WITH _r AS (%s), _g AS (%s) SELECT %s FROM _r JOIN _g ON %s "+
		"WHERE _r._rn <= %d AND _g._gn <= %d AND _r._b IS NOT NULL%s",
		rows, groups, strings.Join(append(append([]string(nil), rg...), strings.Replace(fig, "_b", "_r._b", 1)), ", "),
		strings.Join(on, " AND "), pl.maxRows, pl.maxGroups, groupBy(rg))
}
