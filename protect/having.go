package protect

import (
	"cmp"
	"encoding/hex"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// HAVING is post-processing, like ORDER BY and LIMIT: it filters the
// released rows, after their noise is drawn, by the released values named by
// their outputs (HAVING n > 10, HAVING mean_bmi_lo > 20), so it reads
// nothing that the release does not already show and costs no budget; a
// group it drops was still selected and paid for. It never sees an exact
// aggregate: an aggregate written in HAVING (COUNT(*) > 10) names the output
// of the same aggregate in the SELECT list, its noisy value, and is refused
// when there is none. The condition takes output names, literals,
// arithmetic, comparisons, AND, OR, NOT, IS [NOT] NULL, BETWEEN and IN
// (list), evaluated as SQLite evaluates them (NULL is unknown; a number
// sorts before text, text before a blob).

// havingClause is a checked HAVING: its condition, with names resolved to
// released columns.
type havingClause struct {
	cond dpselect.Expr
	cols map[string]int // lower-case output name -> released column
}

// having checks HAVING: names of outputs (or aggregates that are outputs)
// and the operators the post-processing evaluates.
func (c *checker) having() error {
	if c.st.Having == nil {
		return nil
	}
	cols := map[string]int{}
	for i, n := range c.pl.columns() {
		cols[strings.ToLower(n)] = i
	}
	var err error
	cond := dpselect.Rewrite(c.st.Having, func(e dpselect.Expr) dpselect.Expr {
		if err != nil {
			return e
		}
		switch x := e.(type) {
		case *dpselect.Col:
			if _, ok := cols[strings.ToLower(x.Name)]; ok {
				return e
			}
			if _, ok := c.cols[strings.ToLower(x.Name)]; ok {
				err = refusef("HAVING %s: HAVING filters the released rows by their output names, and %s is a column, "+
					"not an output: filter rows before aggregation in WHERE, or select the key and name it", x.Name, x.Name)
			} else {
				err = refusef("HAVING %s: no output is named %s (HAVING takes the names of the SELECT list's outputs)",
					x.Name, x.Name)
			}
		case *dpselect.AggRef:
			// An aggregate names the one output of the same function and
			// column; two (two percentiles, two sums with other bounds)
			// make it ambiguous: refused rather than read off the first.
			var names []string
			for _, it := range c.st.Items {
				if it.Agg == x.Agg && strings.EqualFold(it.Column, x.Column) && it.Distinct == x.Distinct {
					names = append(names, it.Name())
				}
			}
			ref := dpselect.String(x)
			switch len(names) {
			case 1:
				return &dpselect.Col{Name: names[0]}
			case 0:
			default:
				err = refusef("HAVING %s: %d outputs are %s; name the one to filter on by its alias (%s)",
					ref, len(names), ref, strings.Join(names, " or "))
				return e
			}
			err = refusef("HAVING %s: %s is not an output, and HAVING never reads an exact aggregate: add it to the "+
				"SELECT list with a name and filter on its released value, e.g. SELECT ..., %s AS v ... HAVING v > 10",
				ref, ref, ref)
		case *dpselect.Lit, *dpselect.Unary, *dpselect.Binary, *dpselect.IsNull, *dpselect.Between, *dpselect.In:
		default:
			err = refusef("HAVING %s: HAVING takes output names, literals, arithmetic, comparisons, AND, OR, NOT, "+
				"IS NULL, BETWEEN and IN (list)", dpselect.String(e))
		}
		return e
	})
	if err != nil {
		return err
	}
	c.pl.having = &havingClause{cond: cond, cols: cols}
	return nil
}

// keep reports whether HAVING keeps a released row (its condition true).
func (h *havingClause) keep(row []any) bool {
	if h == nil {
		return true
	}
	return sqlTruth(h.eval(h.cond, row)) == 1
}

// filterRows keeps the released rows HAVING keeps.
func (h *havingClause) filterRows(rows [][]any) [][]any {
	if h == nil {
		return rows
	}
	out := rows[:0]
	for _, r := range rows {
		if h.keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// sqlTruth is SQLite's truth value of v: 1 true, 0 false, -1 unknown (NULL).
func sqlTruth(v any) int {
	switch x := v.(type) {
	case nil:
		return -1
	case int64:
		return b2i(x != 0)
	case float64:
		return b2i(x != 0)
	}
	f, _ := numeric(v)
	return b2i(toFloat(f) != 0)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func boolValue(t int) any {
	if t < 0 {
		return nil
	}
	return int64(t)
}

// sqlValue is a released value as SQLite holds it: the driver returns a
// DATE, DATETIME or TIMESTAMP column's text as a time.Time, which is text
// to SQLite (spelled as the driver writes times), and a BOOLEAN column's
// integer as a bool.
func sqlValue(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.Format(sqliteTime)
	case bool: // a BOOLEAN column's integer
		return int64(b2i(x))
	}
	return v
}

// sqliteTime is how go-sqlite3 writes a time.Time.
const sqliteTime = "2006-01-02 15:04:05.999999999-07:00"

// numeric converts v to a number as SQLite's arithmetic does (text and
// blobs by their leading decimal number, else 0); ok false for NULL. Linear
// in the text's length: a released key may be long.
func numeric(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case int64, float64:
		return x, true
	case []byte:
		v = string(x)
	}
	s, _ := v.(string)
	m := leadingNumber.FindString(strings.TrimLeft(s, " \t\n\v\f\r"))
	if !strings.ContainsAny(m, ".eE") {
		if i, err := strconv.ParseInt(m, 10, 64); err == nil {
			return i, true
		}
	}
	if f, err := strconv.ParseFloat(m, 64); err == nil || math.IsInf(f, 0) {
		return f, true
	}
	return int64(0), true
}

// leadingNumber is the decimal number SQLite reads at the start of a text
// (no hexadecimal, no "inf" or "nan", no digit separators).
var leadingNumber = regexp.MustCompile(`^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?`)

// eval evaluates e over a released row (SQLite's semantics for the
// operators HAVING takes).
func (h *havingClause) eval(e dpselect.Expr, row []any) any {
	switch x := e.(type) {
	case *dpselect.Col:
		return sqlValue(row[h.cols[strings.ToLower(x.Name)]])
	case *dpselect.Lit:
		switch x.Kind {
		case "number": // as SQLite reads it: decimal (010 is ten), or 0x hexadecimal as 64 bits
			if h, ok := strings.CutPrefix(strings.ToLower(x.Text), "0x"); ok {
				u, _ := strconv.ParseUint(h, 16, 64)
				return int64(u)
			}
			if i, err := strconv.ParseInt(x.Text, 10, 64); err == nil {
				return i
			}
			f, _ := strconv.ParseFloat(x.Text, 64)
			return f
		case "string":
			return x.Text
		case "true":
			return int64(1)
		case "false":
			return int64(0)
		case "null":
			return nil
		}
		b, _ := hex.DecodeString(x.Text)
		return b
	case *dpselect.Unary:
		v := h.eval(x.X, row)
		if x.Op == "NOT" {
			t := sqlTruth(v)
			if t < 0 {
				return nil
			}
			return int64(1 - t)
		}
		n, ok := numeric(v)
		if !ok {
			return nil
		}
		if x.Op == "-" {
			if i, isInt := n.(int64); isInt && i != math.MinInt64 {
				return -i
			}
			return -toFloat(n)
		}
		return n
	case *dpselect.IsNull:
		return boolValue(b2i((h.eval(x.X, row) == nil) != x.Not))
	case *dpselect.Between:
		v, lo, hi := h.eval(x.X, row), h.eval(x.Lo, row), h.eval(x.Hi, row)
		t := and3(cmp3(v, lo, ">="), cmp3(v, hi, "<="))
		if x.Not && t >= 0 {
			t = 1 - t
		}
		return boolValue(t)
	case *dpselect.In:
		v := h.eval(x.X, row)
		t := 0
		for _, it := range x.List {
			switch cmp3(v, h.eval(it, row), "=") {
			case 1:
				t = 1
			case -1:
				if t == 0 {
					t = -1
				}
			}
			if t == 1 {
				break
			}
		}
		if x.Not && t >= 0 {
			t = 1 - t
		}
		return boolValue(t)
	case *dpselect.Binary:
		switch x.Op {
		case "AND":
			return boolValue(and3(sqlTruth(h.eval(x.L, row)), sqlTruth(h.eval(x.R, row))))
		case "OR":
			l, r := sqlTruth(h.eval(x.L, row)), sqlTruth(h.eval(x.R, row))
			switch {
			case l == 1 || r == 1:
				return int64(1)
			case l < 0 || r < 0:
				return nil
			}
			return int64(0)
		case "+", "-", "*", "/", "%":
			return arith(x.Op, h.eval(x.L, row), h.eval(x.R, row))
		case "IS", "IS NOT":
			l, r := h.eval(x.L, row), h.eval(x.R, row)
			eq := l == nil && r == nil || l != nil && r != nil && compareValues(l, r) == 0
			return boolValue(b2i(eq != (x.Op == "IS NOT")))
		}
		return boolValue(cmp3(h.eval(x.L, row), h.eval(x.R, row), x.Op))
	}
	return nil
}

// and3 is three-valued AND.
func and3(a, b int) int {
	switch {
	case a == 0 || b == 0:
		return 0
	case a < 0 || b < 0:
		return -1
	}
	return 1
}

// cmp3 compares a and b with op: 1, 0, or -1 when either is NULL.
func cmp3(a, b any, op string) int {
	if a == nil || b == nil {
		return -1
	}
	c := compareValues(a, b)
	switch op {
	case "=":
		return b2i(c == 0)
	case "<>":
		return b2i(c != 0)
	case "<":
		return b2i(c < 0)
	case "<=":
		return b2i(c <= 0)
	case ">":
		return b2i(c > 0)
	}
	return b2i(c >= 0) // >=
}

// compareNumbers compares two numbers (int64 or float64) exactly, as SQLite
// does: integers as integers, and an integer with a real by their exact
// values, never through float64, which holds every integer only up to 2^53
// (HAVING n > 9007199254740992 must not keep n = 9007199254740993 as equal).
func compareNumbers(a, b any) int {
	i, aInt := a.(int64)
	j, bInt := b.(int64)
	switch {
	case aInt && bInt:
		return cmp.Compare(i, j)
	case aInt:
		return intFloatCompare(i, b.(float64))
	case bInt:
		return -intFloatCompare(j, a.(float64))
	}
	x, y := a.(float64), b.(float64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// intFloatCompare compares the integer i with the real r exactly (SQLite's
// sqlite3IntFloatCompare; r is never NaN: SQLite stores NaN as NULL and
// arith returns NULL for it).
func intFloatCompare(i int64, r float64) int {
	switch {
	case r < -9223372036854775808.0:
		return 1
	case r >= 9223372036854775808.0:
		return -1
	}
	y := int64(r) // r truncated toward zero: exact where it matters
	switch {
	case i < y:
		return -1
	case i > y:
		return 1
	}
	s := float64(i) // i == trunc(r), which a float64 holds exactly: the fraction decides
	switch {
	case s < r:
		return -1
	case s > r:
		return 1
	}
	return 0
}

// arith is SQLite's arithmetic on two values: NULL if either is NULL or on
// division by zero; integers stay integers unless they overflow.
func arith(op string, a, b any) any {
	x, ok1 := numeric(a)
	y, ok2 := numeric(b)
	if !ok1 || !ok2 {
		return nil
	}
	i, xInt := x.(int64)
	j, yInt := y.(int64)
	if xInt && yInt {
		switch op {
		case "+":
			if s := i + j; (s > i) == (j > 0) {
				return s
			}
		case "-":
			if s := i - j; (s < i) == (j > 0) {
				return s
			}
		case "*":
			if i == 0 || j == 0 {
				return int64(0)
			}
			if p := i * j; p/j == i && !(i == -1 && j == math.MinInt64) && !(j == -1 && i == math.MinInt64) {
				return p
			}
		case "/":
			if j == 0 {
				return nil
			}
			if !(i == math.MinInt64 && j == -1) {
				return i / j
			}
		case "%":
			if j == 0 {
				return nil
			}
			if j == -1 {
				return int64(0)
			}
			return i % j
		}
	}
	f, g := toFloat(x), toFloat(y)
	var r float64
	switch op {
	case "+":
		r = f + g
	case "-":
		r = f - g
	case "*":
		r = f * g
	case "/":
		if g == 0 {
			return nil
		}
		r = f / g
	}
	switch {
	case math.IsNaN(r): // SQLite's arithmetic gives NULL for NaN (Inf - Inf, 0 * Inf)
		return nil
	case op != "%":
		return r
	}
	// % on reals: SQLite takes the integer parts.
	ii, jj := int64(f), int64(g)
	if jj == 0 {
		return nil
	}
	if jj == -1 {
		return float64(0)
	}
	return float64(ii % jj)
}
