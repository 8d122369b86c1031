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

// rewrite returns the SQLite SQL of a plan.
func rewrite(pl *plan) string {
	var b strings.Builder
	t := "main." + dpselect.QuoteIdent(pl.table)
	keys := make([]string, len(pl.keys))
	for i := range pl.keys {
		keys[i] = pl.keyExpr(i) // the canonical form (keys.go)
	}
	where := "1"
	if pl.where != "" {
		where = pl.where
	}
	for i := range pl.keySources {
		// Rows whose keys are not in the public lists are dropped.
		where = fmt.Sprintf("(%s) AND %s", where, pl.keyFilter(i))
	}
	if pl.unitUnique {
		// One row per person at most: nothing to bound, but rows without a
		// person are dropped as below.
		where = fmt.Sprintf("(%s) AND %s IS NOT NULL", where, dpselect.QuoteIdent(pl.policy.PrivacyUnit))
	}
	if pl.policy.PrivacyUnit == "" || pl.unitUnique {
		// Each row is a person: one row in one group, nothing to bound.
		b.WriteString("SELECT ")
		for _, k := range keys {
			b.WriteString(k + ", ")
		}
		b.WriteString("count(*)")
		for _, a := range pl.aggs {
			switch a.kind {
			case dpselect.Median: // read by its own query (rewriteHistogram)
				b.WriteString(", 0")
			case dpselect.Count:
				if a.column == "" {
					b.WriteString(", count(*)")
				} else {
					b.WriteString(", count(" + dpselect.QuoteIdent(a.column) + ")")
				}
			default:
				v := valueExpr(a)
				fmt.Fprintf(&b, ", coalesce(sum(%s), 0)", v)
				if a.needsCount() {
					b.WriteString(", " + countNumbers(dpselect.QuoteIdent(a.column), !a.numericCompare))
				}
				if a.needsSq() {
					fmt.Fprintf(&b, ", coalesce(sum(%s), 0)", squareExpr(a))
				}
			}
		}
		fmt.Fprintf(&b, " FROM %s WHERE %s", t, where)
		if len(keys) > 0 {
			b.WriteString(" GROUP BY " + strings.Join(keys, ", "))
		}
		return b.String()
	}
	u := dpselect.QuoteIdent(pl.policy.PrivacyUnit)
	if pl.maxRows == 1 && pl.maxGroups == 1 {
		return rewriteOneRow(pl, t, u, keys, where)
	}
	// Level 1: the rows, their values and a random rank within (person, group).
	var l1 strings.Builder
	l1.WriteString("SELECT " + u + " AS _u")
	for i, k := range keys {
		fmt.Fprintf(&l1, ", %s AS _k%d", k, i)
	}
	for j, a := range pl.aggs {
		switch {
		case a.kind == dpselect.Median:
		case a.kind == dpselect.Count && a.column != "":
			fmt.Fprintf(&l1, ", (%s IS NOT NULL) AS _v%d", dpselect.QuoteIdent(a.column), j)
		case a.kind != dpselect.Count:
			fmt.Fprintf(&l1, ", %s AS _v%d", valueExpr(a), j)
			if a.needsSq() {
				fmt.Fprintf(&l1, ", %s AS _w%d", squareExpr(a), j)
			}
		}
	}
	fmt.Fprintf(&l1, ", row_number() OVER (PARTITION BY %s ORDER BY random()) AS _rn FROM %s WHERE (%s) AND %s IS NOT NULL",
		strings.Join(append([]string{u}, keys...), ", "), t, where, u)
	kk := make([]string, len(keys))
	for i := range keys {
		kk[i] = "_k" + strconv.Itoa(i)
	}
	// Level 2: one row per (person, group), at most max_rows rows in it, and
	// a random rank of the group among the person's groups.
	var l2 strings.Builder
	l2.WriteString("SELECT _u")
	for _, k := range kk {
		l2.WriteString(", " + k)
	}
	l2.WriteString(", count(*) AS _n")
	for j, a := range pl.aggs {
		switch {
		case a.kind == dpselect.Median:
		case a.kind == dpselect.Count && a.column != "":
			fmt.Fprintf(&l2, ", sum(_v%d) AS _s%d", j, j)
		case a.kind != dpselect.Count:
			fmt.Fprintf(&l2, ", coalesce(sum(_v%d), 0) AS _s%d, count(_v%d) AS _c%d", j, j, j, j)
			if a.needsSq() {
				fmt.Fprintf(&l2, ", coalesce(sum(_w%d), 0) AS _q%d", j, j)
			}
		}
	}
	fmt.Fprintf(&l2, ", row_number() OVER (PARTITION BY _u ORDER BY random()) AS _gn FROM (%s) WHERE _rn <= %d GROUP BY %s",
		l1.String(), pl.maxRows, strings.Join(append([]string{"_u"}, kk...), ", "))
	// Level 3: the groups.
	b.WriteString("SELECT ")
	for _, k := range kk {
		b.WriteString(k + ", ")
	}
	b.WriteString("count(*)")
	for j, a := range pl.aggs {
		switch {
		case a.kind == dpselect.Median:
			b.WriteString(", 0")
		case a.kind == dpselect.Count && a.column == "":
			b.WriteString(", sum(_n)")
		case a.kind == dpselect.Count:
			fmt.Fprintf(&b, ", sum(_s%d)", j)
		default:
			fmt.Fprintf(&b, ", sum(_s%d)", j)
			if a.needsCount() {
				fmt.Fprintf(&b, ", sum(_c%d)", j)
			}
			if a.needsSq() {
				fmt.Fprintf(&b, ", sum(_q%d)", j)
			}
		}
	}
	fmt.Fprintf(&b, " FROM (%s) WHERE _gn <= %d", l2.String(), pl.maxGroups)
	if len(kk) > 0 {
		b.WriteString(" GROUP BY " + strings.Join(kk, ", "))
	}
	return b.String()
}

// rewriteOneRow bounds each person to one row (max_rows = max_groups = 1)
// in one GROUP BY: SQLite's min() gives its bare columns the values of the
// row where the minimum is reached, here of random(), a fresh uniform choice
// among the person's rows.
func rewriteOneRow(pl *plan, t, u string, keys []string, where string) string {
	var in strings.Builder
	in.WriteString("SELECT ")
	kk := make([]string, len(keys))
	for i, k := range keys {
		kk[i] = "_k" + strconv.Itoa(i)
		fmt.Fprintf(&in, "%s AS _k%d, ", k, i)
	}
	for j, a := range pl.aggs {
		switch {
		case a.kind == dpselect.Median:
		case a.kind == dpselect.Count && a.column != "":
			fmt.Fprintf(&in, "(%s IS NOT NULL) AS _v%d, ", dpselect.QuoteIdent(a.column), j)
		case a.kind != dpselect.Count:
			fmt.Fprintf(&in, "%s AS _v%d, ", valueExpr(a), j)
			if a.needsSq() {
				fmt.Fprintf(&in, "%s AS _w%d, ", squareExpr(a), j)
			}
		}
	}
	fmt.Fprintf(&in, "min(random()) AS _r FROM %s WHERE (%s) AND %s IS NOT NULL GROUP BY %s", t, where, u, u)
	var b strings.Builder
	b.WriteString("SELECT ")
	for _, k := range kk {
		b.WriteString(k + ", ")
	}
	b.WriteString("count(*)")
	for j, a := range pl.aggs {
		switch {
		case a.kind == dpselect.Median:
			b.WriteString(", 0")
		case a.kind == dpselect.Count && a.column == "":
			b.WriteString(", count(*)")
		case a.kind == dpselect.Count:
			fmt.Fprintf(&b, ", sum(_v%d)", j)
		default:
			fmt.Fprintf(&b, ", coalesce(sum(_v%d), 0)", j)
			if a.needsCount() {
				fmt.Fprintf(&b, ", count(_v%d)", j)
			}
			if a.needsSq() {
				fmt.Fprintf(&b, ", coalesce(sum(_w%d), 0)", j)
			}
		}
	}
	fmt.Fprintf(&b, " FROM (%s)", in.String())
	if len(kk) > 0 {
		b.WriteString(" GROUP BY " + strings.Join(kk, ", "))
	}
	return b.String()
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

// rewriteHistogram returns the SQL of MEDIAN aggregate a's histograms: one
// row (group keys, bucket, count) per non-empty bucket of each group, over
// rows bounded per person as the main statement bounds them (at most
// max_rows rows in each of at most max_groups groups, chosen afresh at
// random: the histogram is its own release, bounded on its own).
func rewriteHistogram(pl *plan, a aggPlan) string {
	t := "main." + dpselect.QuoteIdent(pl.table)
	keys := make([]string, len(pl.keys))
	kk := make([]string, len(pl.keys))
	for i := range pl.keys {
		keys[i] = pl.keyExpr(i) // the canonical form, as the main statement's (keys.go)
		kk[i] = "_k" + strconv.Itoa(i)
	}
	where := "1"
	if pl.where != "" {
		where = pl.where
	}
	for i := range pl.keySources {
		where = fmt.Sprintf("(%s) AND %s", where, pl.keyFilter(i))
	}
	var sel strings.Builder // the keys as _k0, ...
	for i, k := range keys {
		fmt.Fprintf(&sel, "%s AS %s, ", k, kk[i])
	}
	group := strings.Join(append(append([]string(nil), kk...), "_b"), ", ")
	if pl.unitUnique {
		where = fmt.Sprintf("(%s) AND %s IS NOT NULL", where, dpselect.QuoteIdent(pl.policy.PrivacyUnit))
	}
	if pl.policy.PrivacyUnit == "" || pl.unitUnique {
		return fmt.Sprintf("SELECT %s FROM (SELECT %s%s AS _b FROM %s WHERE %s) WHERE _b IS NOT NULL GROUP BY %s",
			strings.Join(append(append([]string(nil), kk...), "_b", "count(*)"), ", "), sel.String(), bucketExpr(a), t, where, group)
	}
	u := dpselect.QuoteIdent(pl.policy.PrivacyUnit)
	part := strings.Join(append([]string{u}, keys...), ", ")
	rows := fmt.Sprintf("SELECT %s AS _u, %s%s AS _b, row_number() OVER (PARTITION BY %s ORDER BY random()) AS _rn FROM %s WHERE (%s) AND %s IS NOT NULL",
		u, sel.String(), bucketExpr(a), part, t, where, u)
	pk := strings.Join(append([]string{"_u"}, kk...), ", ")
	groups := fmt.Sprintf("SELECT %s, row_number() OVER (PARTITION BY _u ORDER BY random()) AS _gn FROM (SELECT DISTINCT %s FROM _r)", pk, pk)
	on := []string{"_r._u IS _g._u"}
	rk := make([]string, len(kk))
	for i, k := range kk {
		on = append(on, fmt.Sprintf("_r.%s IS _g.%s", k, k))
		rk[i] = "_r." + k
	}
	return fmt.Sprintf("WITH _r AS (%s), _g AS (%s) SELECT %s FROM _r JOIN _g ON %s WHERE _r._rn <= %d AND _g._gn <= %d AND _r._b IS NOT NULL GROUP BY %s",
		rows, groups, strings.Join(append(append([]string(nil), rk...), "_r._b", "count(*)"), ", "),
		strings.Join(on, " AND "), pl.maxRows, pl.maxGroups, strings.Join(append(append([]string(nil), rk...), "_r._b"), ", "))
}
