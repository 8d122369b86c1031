package protect

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Per-row work. How long a statement runs is observable, and it depends on
// the rows it reads; the checker makes that dependence bounded, per row, by
// public constants, so that one row moves a statement's running time by at
// most a public amount (which enough repetitions can still measure: see the
// threat model in docs/protected-mode.md). The bound:
//
//	work(statement) <= rows read x (rowWork + sort)
//
// (rowWork counts WHERE once per pass over the table: once, and once more
// for each MEDIAN, whose histogram is a query of its own.)
//
// where rowWork, computed from the statement and the policy alone, bounds
// the work of WHERE and of the per-row value expressions in units of about
// a nanosecond (one byte compared, copied or converted; SQLite's two-argument
// trim counts trimPairWork per pair of characters it may compare, LIKE
// likePairWork), and is refused above MaxRowWork; sort is the bounding and
// grouping's O(log2 rows) comparisons of the row's privacy unit and keys,
// which depends on the data's sizes and not on the SQL. rowWork is finite
// because every value WHERE sees has a public length bound:
//
//   - a literal has at most MaxLiteralBytes bytes, and a statement's
//     literals (LIKE patterns included) at most MaxStatementLiteralBytes;
//   - a column whose value WHERE passes to a function or an operator has at
//     most its max_length bytes (the policy's, or DefaultMaxLength): a row
//     whose value is longer is dropped (a public rule, like a NULL privacy
//     unit), by a guard that reads the value's size and not the value,
//     before anything else looks at it. A column only compared with literals
//     (age >= 18, sex IN ('F', 'M'), x BETWEEN 1 AND 5, x IS NULL) needs no
//     guard: the comparison's work is bounded by the literal's length;
//   - every function and operator has a bound on its result's length in
//     terms of its arguments' (lower(x) is as long as x, CASE as its longest
//     branch, substr(x, a, n) at most 4n bytes), and a cost in terms of them:
//     linear for comparisons, IN, BETWEEN, CAST, lower, upper, length,
//     substr and one-argument trim, the product of the two lengths for
//     instr, two-argument trim/ltrim/rtrim and LIKE (|X| x |pattern|).
//
// Every branch of a CASE counts, whichever runs: which one runs may depend on
// the row. TestRowWorkBound checks the bound against measured CPU time over
// adversarial rows.

// MaxLiteralBytes bounds one literal of a DP statement (string, blob or
// number, in bytes of its value; a LIKE pattern included).
const MaxLiteralBytes = 1000

// MaxStatementLiteralBytes bounds the bytes of all a statement's literals.
const MaxStatementLiteralBytes = 10000

// DefaultMaxLength is the length bound, in bytes, of a column without a
// max_length in the policy: rows whose value of a column WHERE reads is
// longer are dropped.
const DefaultMaxLength = 1024

// MaxMaxLength bounds a policy's max_length.
const MaxMaxLength = 1 << 24

// MaxRowWork bounds a statement's per-row work (rowWork, above), in units
// of about a nanosecond on the machine of TestRowWorkBound.
const MaxRowWork = 1 << 18

// Weights of the products of lengths, measured (TestRowWorkBound): SQLite's
// trim with a character set compares characters one pair at a time, some
// 4-5 ns a pair; LIKE about 1 ns.
const (
	trimPairWork  = 8
	likePairWork  = 2
	instrPairWork = 1
)

// keyEvaluations bounds how many times the rewritten SQL evaluates a
// computed GROUP BY key per row (its canonical form evaluates it at most
// four times, and the rewrite names it at most twice).
const keyEvaluations = 8

// strftimeExpansion bounds the bytes strftime writes per byte of its format
// (%J, the longest, writes a Julian day of about 16 bytes for 2).
const strftimeExpansion = 12

// numberBytes bounds the text of a number (SQLite renders a REAL in at most
// 24 bytes, an INTEGER in at most 20).
const numberBytes = 32

// maxLength returns the length bound of column c.
func (p Policy) maxLength(c string) int {
	for k, n := range p.MaxLength {
		if strings.EqualFold(k, c) {
			return n
		}
	}
	return DefaultMaxLength
}

// costed is an expression's bound: the bytes of its value (as text or blob)
// and the work of computing it once.
type costed struct{ length, work float64 }

// rowCost walks a statement's WHERE.
type rowCost struct {
	pl       *plan
	literals float64 // bytes of literals so far
	worst    costed  // the costliest node's own work and length
	worstAt  string  // that node, as SQL
	// clause is the clause being walked (WHERE, or GROUP BY for a computed
	// key), worstIn the costliest node's: refusals name it.
	clause, worstIn string
	// guarded are the columns (as WHERE names them, in order) whose value
	// WHERE passes to a function or an operator, which see it only up to
	// the column's max_length.
	guarded []string
	err     error
}

// boundRowWork checks a planned statement's literals and per-row work, and
// adds to its WHERE the guards that drop rows whose values exceed their
// columns' max_length. Called at the end of checkStatement.
func (pl *plan) boundRowWork() error {
	rc := &rowCost{pl: pl, clause: dpselect.ClauseWhere}
	work := 0.0
	if pl.stmt.Where != nil {
		work = rc.expr(pl.stmt.Where).work
	}
	rc.clause = dpselect.ClauseGroupBy
	// A computed GROUP BY key is evaluated per row in its canonical form
	// (up to four times: its type, then a branch) and where the rewrite
	// names the key (the rank's partition and the key's column): counted
	// keyEvaluations times.
	for _, info := range pl.keyInfo {
		if info.expr != nil {
			work += keyEvaluations * rc.expr(info.expr).work
		}
	}
	if rc.err != nil {
		return rc.err
	}
	// Each histogram (MEDIAN, PERCENTILE_CONT, APPROX_QUANTILES) and
	// distinct count is a query of its own, which evaluates WHERE and the
	// keys again for every row.
	passes := 1.0
	for _, a := range pl.aggs {
		if a.ownQuery() {
			passes++
		}
	}
	work *= passes
	work += 64 * float64(len(pl.aggs)) // per aggregate: a value's guard, clamp and fixed point on a number
	pl.rowWork = work
	if work > MaxRowWork {
		return inClause(refusef("the statement may do about %.3g units of work per row (about a nanosecond each), over the limit of %d (protect.MaxRowWork): the costliest part is %s (%.3g units); use shorter literals or patterns, or compare substr(column, 1, n) instead of a whole column (see max_length in the policy)",
			work, MaxRowWork, abbreviateSQL(rc.worstAt, 80), rc.worst.work), rc.worstIn)
	}
	// The guards, in the order WHERE names the columns.
	var guards []string
	seen := map[string]bool{}
	for _, c := range rc.guarded {
		if !seen[strings.ToLower(c)] {
			seen[strings.ToLower(c)] = true
			guards = append(guards, fmt.Sprintf("(octet_length(%s) > %d) IS NOT 1", dpselect.QuoteIdent(c), pl.policy.maxLength(c)))
		}
	}
	switch {
	case len(guards) > 0 && pl.where != "":
		pl.where = strings.Join(guards, " AND ") + " AND " + pl.where
	case len(guards) > 0:
		pl.where = strings.Join(guards, " AND ")
	}
	return nil
}

// inClause names clause in a refusal (the row-work step checks WHERE and
// the computed GROUP BY keys).
func inClause(err error, clause string) error {
	if r, ok := err.(*Refusal); ok && clause != "" {
		r.Clause = clause
	}
	return err
}

func abbreviateSQL(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// literal accounts for a literal of n bytes.
func (rc *rowCost) literal(n int) {
	if rc.err != nil {
		return
	}
	if n > MaxLiteralBytes {
		rc.err = inClause(refusef("a literal of %d bytes: literals (and LIKE patterns) may be at most %d bytes (protect.MaxLiteralBytes)", n, MaxLiteralBytes), rc.clause)
		return
	}
	rc.literals += float64(n)
	if rc.literals > MaxStatementLiteralBytes {
		rc.err = inClause(refusef("the statement's literals (and LIKE patterns) add up to more than %d bytes (protect.MaxStatementLiteralBytes)", MaxStatementLiteralBytes), rc.clause)
	}
}

// own records a node's own work (beyond its children's) and returns the
// node's bound.
func (rc *rowCost) own(e dpselect.Expr, length, own float64, kids ...costed) costed {
	w := 1 + own
	for _, k := range kids {
		w += k.work
	}
	if own > rc.worst.work {
		rc.worst, rc.worstAt, rc.worstIn = costed{length, own}, dpselect.String(e), rc.clause
	}
	return costed{length, w}
}

// expr returns e's bound.
func (rc *rowCost) expr(e dpselect.Expr) costed {
	switch e := e.(type) {
	case *dpselect.Lit:
		n := 0
		switch e.Kind {
		case "string":
			n = len(e.Text)
		case "blob":
			n = len(e.Text) / 2
		case "number":
			n = len(e.Text)
		}
		rc.literal(n)
		if e.Kind == "number" {
			n = numberBytes // its value, rendered as text
		}
		return costed{float64(n), 1}
	case *dpselect.Col:
		rc.guarded = append(rc.guarded, e.Name)
		n := float64(rc.pl.policy.maxLength(e.Name))
		return rc.own(e, n, n) // reading the value
	case *dpselect.Unary:
		x := rc.expr(e.X)
		if e.Op == "NOT" {
			return rc.own(e, 1, 0, x)
		}
		return rc.own(e, numberBytes, x.length, x) // text becomes a number
	case *dpselect.Binary:
		if lit, ok := colVsLit(e.Op, e.L, e.R); ok {
			return costed{1, 2 + 2*rc.expr(lit).length}
		}
		l, r := rc.expr(e.L), rc.expr(e.R)
		switch e.Op {
		case "AND", "OR":
			return rc.own(e, 1, 0, l, r)
		case "+", "-", "*", "/", "%":
			return rc.own(e, numberBytes, l.length+r.length, l, r)
		}
		return rc.own(e, 1, l.length+r.length, l, r) // a comparison: converted, then compared
	case *dpselect.IsNull:
		if _, ok := e.X.(*dpselect.Col); ok {
			return costed{1, 2} // the value's type, not the value
		}
		x := rc.expr(e.X)
		return rc.own(e, 1, 0, x)
	case *dpselect.Between:
		loLit, ok1 := colVsLit(">=", e.X, e.Lo)
		hiLit, ok2 := colVsLit("<=", e.X, e.Hi)
		if ok1 && ok2 {
			return costed{1, 3 + 2*rc.expr(loLit).length + 2*rc.expr(hiLit).length}
		}
		x, lo, hi := rc.expr(e.X), rc.expr(e.Lo), rc.expr(e.Hi)
		return rc.own(e, 1, 2*x.length+lo.length+hi.length, x, x, lo, hi)
	case *dpselect.In:
		all := true
		for _, it := range e.List {
			if _, ok := colVsLit("=", e.X, it); !ok {
				all = false
			}
		}
		if all {
			w := 1.0
			for _, it := range e.List {
				w += 1 + 2*rc.expr(it).length
			}
			return costed{1, w}
		}
		x := rc.expr(e.X)
		kids := []costed{x}
		own := 0.0
		for _, it := range e.List {
			c := rc.expr(it)
			kids = append(kids, c)
			own += x.length + c.length + 1
		}
		return rc.own(e, 1, own, kids...)
	case *dpselect.Like:
		x := rc.expr(e.X)
		rc.literal(len(e.Pattern))
		p := float64(len(e.Pattern))
		return rc.own(e, 1, x.length+likePairWork*x.length*(p+1), x)
	case *dpselect.Case:
		var kids []costed
		length := 0.0
		if e.Operand != nil {
			kids = append(kids, rc.expr(e.Operand))
		}
		own := 0.0
		for _, w := range e.Whens {
			c, v := rc.expr(w[0]), rc.expr(w[1])
			kids = append(kids, c, v)
			length = math.Max(length, v.length)
			if e.Operand != nil {
				own += kids[0].length + c.length // CASE x WHEN y: a comparison
			}
		}
		if e.Else != nil {
			v := rc.expr(e.Else)
			kids = append(kids, v)
			length = math.Max(length, v.length)
		}
		return rc.own(e, length, own, kids...)
	case *dpselect.Cast:
		x := rc.expr(e.X)
		n := numberBytes
		if e.Type == "TEXT" || e.Type == "BLOB" {
			return rc.own(e, math.Max(x.length, numberBytes), 2*x.length, x)
		}
		return rc.own(e, float64(n), x.length, x)
	case *dpselect.Call:
		return rc.call(e)
	}
	rc.err = fmt.Errorf("protect: internal error, no cost for %T", e)
	return costed{}
}

// colVsLit reports whether op (a comparison operator) compares a column
// with a literal, and returns the literal. SQLite compares the column's value
// as it is: the work is bounded by the literal's length (a comparison stops
// at the shorter value; the column's affinity converts the literal), so the
// column needs no guard. Reading the value, and RTRIM's skipping of its
// trailing spaces, cost time in proportion to the row's stored size, as
// reading any column does.
func colVsLit(op string, a, b dpselect.Expr) (*dpselect.Lit, bool) {
	switch op {
	case "=", "<>", "<", "<=", ">", ">=", "IS", "IS NOT":
	default:
		return nil, false
	}
	if _, ok := a.(*dpselect.Col); !ok {
		a, b = b, a
	}
	_, isCol := a.(*dpselect.Col)
	lit, isLit := b.(*dpselect.Lit)
	return lit, isCol && isLit
}

// call returns a function call's bound (the functions of safeFunctions).
func (rc *rowCost) call(e *dpselect.Call) costed {
	args := make([]costed, len(e.Args))
	for i, a := range e.Args {
		args[i] = rc.expr(a)
	}
	maxLen := func(cs []costed) float64 {
		m := 0.0
		for _, c := range cs {
			m = math.Max(m, c.length)
		}
		return m
	}
	sumLen := func(cs []costed) float64 {
		s := 0.0
		for _, c := range cs {
			s += c.length
		}
		return s
	}
	x := args[0]
	switch e.Name {
	case "coalesce", "ifnull", "likely", "unlikely":
		return rc.own(e, maxLen(args), 0, args...)
	case "nullif":
		return rc.own(e, x.length, sumLen(args), args...)
	case "iif":
		return rc.own(e, maxLen(args[1:]), 0, args...)
	case "min", "max":
		return rc.own(e, maxLen(args), sumLen(args), args...)
	case "typeof":
		return rc.own(e, 7, 0, args...)
	case "octet_length":
		return rc.own(e, numberBytes, 0, args...)
	case "length":
		return rc.own(e, numberBytes, x.length, args...)
	case "unicode":
		return rc.own(e, numberBytes, 4, args...)
	case "round", "sign":
		return rc.own(e, numberBytes, sumLen(args), args...)
	case "lower", "upper":
		return rc.own(e, x.length, 2*x.length, args...)
	case "trim", "ltrim", "rtrim":
		if len(args) == 1 {
			return rc.own(e, x.length, 2*x.length, args...)
		}
		y := args[1]
		return rc.own(e, x.length, 2*x.length+y.length+trimPairWork*x.length*(y.length+1), args...)
	case "instr":
		y := args[1]
		return rc.own(e, numberBytes, x.length+y.length+instrPairWork*x.length*(y.length+1), args...)
	case "strftime":
		// The date is parsed once (linear in its length), the format
		// (a literal, checker.safeTerm) written once.
		n := strftimeExpansion * x.length
		return rc.own(e, n, args[1].length+n, args...)
	case "substr", "substring":
		n := x.length
		if len(args) == 3 {
			if k, ok := literalNumber(e.Args[2]); ok {
				n = math.Min(n, 4*math.Ceil(math.Abs(k))) // k characters of at most 4 bytes
			}
		}
		return rc.own(e, n, 2*x.length+sumLen(args[1:]), args...)
	}
	rc.err = fmt.Errorf("protect: internal error, no cost for %s()", e.Name)
	return costed{}
}

// literalNumber returns the value of a number literal, possibly signed.
func literalNumber(e dpselect.Expr) (float64, bool) {
	neg := false
	for {
		u, ok := e.(*dpselect.Unary)
		if !ok || (u.Op != "-" && u.Op != "+") {
			break
		}
		neg = neg != (u.Op == "-")
		e = u.X
	}
	l, ok := e.(*dpselect.Lit)
	if !ok || l.Kind != "number" {
		return 0, false
	}
	var v float64
	if _, err := fmt.Sscan(l.Text, &v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
