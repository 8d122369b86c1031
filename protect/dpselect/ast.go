// Package dpselect parses the one SELECT form analysts may run over a
// protected table, BigQuery's differential-privacy syntax:
//
//	[EXPLAIN] [WITH name AS (SELECT col [AS name] | *, ... FROM table | cte [WHERE expr]), ...]
//	SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (name = number | 'string', ...)
//	       item, ...
//	FROM table | cte | (SELECT ... FROM table | cte [WHERE expr]) [AS] name
//	     | table [[AS] alias] [INNER | LEFT [OUTER]] JOIN table [[AS] alias]
//	       ON col = col [AND col = col ...] | USING (col, ...)
//	[WHERE expr]
//	[GROUP BY key, ...]
//	[HAVING condition on outputs]
//	[ORDER BY output [ASC|DESC], ...]
//	[LIMIT integer]
//	[;]
//
// where each item is a group key (a column, or an expression of columns that
// GROUP BY names too) or one of COUNT(*), COUNT(col),
// SUM(col [, contribution_bounds_per_group => (lo, hi)]), AVG(col [, ...]),
// VAR_POP(col [, ...]), STDDEV_POP(col [, ...]), MEDIAN(col [, ...]),
// COUNT(DISTINCT col), PERCENTILE_CONT(col, p [, contribution_bounds_per_row
// => (lo, hi)]) and APPROX_QUANTILES(col, k [, ...]), optionally followed by
// [AS] alias. WHERE takes literals, columns, unary and
// binary operators, IS [NOT] NULL, [NOT] BETWEEN, [NOT] IN (list),
// [NOT] LIKE 'literal', CASE, CAST and function calls; which functions are
// allowed is the checker's decision (package protect), not the parser's.
// A GROUP BY key is such an expression, an output's alias or a 1-based
// position in the SELECT list; HAVING is such an expression over the
// outputs' names (post-processing of the released rows).
//
// The parser is small and strict: anything outside this grammar is an error
// that says what is accepted. It never evaluates anything.
package dpselect

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Statement is a parsed DP SELECT.
type Statement struct {
	// Explain: the statement was written EXPLAIN SELECT WITH
	// DIFFERENTIAL_PRIVACY ...: its plan is asked for, not its rows.
	Explain bool
	Options []Option
	Items   []Item
	Table   string
	Where   Expr // nil if absent
	// GroupBy are the GROUP BY terms as written: a *Col (a column, or an
	// output's alias), a number *Lit (a position in the SELECT list) or
	// another expression (a computed key).
	GroupBy []Expr
	// Having is the HAVING condition, over output names; nil if absent.
	Having Expr
	// With are the CTEs (WITH name AS (SELECT ...)) and, last, a subquery
	// in FROM (named by its alias); Table may name one of them.
	With    []CTE
	OrderBy []OrderTerm
	Limit   int64 // -1 if absent
	// Alias is the FROM table's alias ("" if none; only with a join).
	Alias string
	// Join is the one join after the FROM table; nil if none.
	Join *Join
}

// Join is FROM table [AS alias] [INNER | LEFT [OUTER]] JOIN table [AS
// alias] ON a.x = b.y [AND ...] | USING (col, ...): which tables it may name
// is the checker's decision (package protect).
type Join struct {
	Table, Alias string
	Left         bool
	// On are the ON clause's equalities, each between two columns (their
	// qualifiers as written); Using are USING's columns. One of them is set.
	On    [][2]*Col
	Using []string
}

// CTE is one WITH name AS (SELECT ...), or a subquery in FROM.
type CTE struct {
	Name string
	Body *SubSelect
}

// SubSelect is the SELECT of a CTE or subquery: columns of one table or
// earlier CTE, filtered by WHERE.
type SubSelect struct {
	Items []SubItem
	Table string
	Where Expr // nil if absent
	pos   int
}

// SubItem is one column of a SubSelect: *, a column, or an expression,
// with its alias.
type SubItem struct {
	Star   bool
	Column string
	Expr   Expr
	Alias  string
}

// BaseTable returns the table the statement reads: its FROM table, or the
// table under the CTEs it names.
func (st *Statement) BaseTable() string {
	name, upto := st.Table, len(st.With)
	for {
		found := false
		for i := upto - 1; i >= 0; i-- {
			if strings.EqualFold(st.With[i].Name, name) {
				name, upto, found = st.With[i].Body.Table, i, true
				break
			}
		}
		if !found {
			return name
		}
	}
}

// Option is one OPTIONS entry: a lower-case name and a number, or a string
// literal (IsText, as in noise = 'laplace').
type Option struct {
	Name   string
	Value  float64
	Text   string
	IsText bool
}

// Aggregate names.
const (
	Count = "COUNT"
	Sum   = "SUM"
	Avg   = "AVG"
	Var   = "VAR_POP"
	Std   = "STDDEV_POP"
	// Median is MEDIAN(col [, contribution_bounds_per_group => (lo, hi)]).
	Median = "MEDIAN"
	// Percentile is PERCENTILE_CONT(col, p [, contribution_bounds_per_row
	// => (lo, hi)]), p a number literal (Item.Param).
	Percentile = "PERCENTILE_CONT"
	// Quantiles is APPROX_QUANTILES(col, k [, contribution_bounds_per_row
	// => (lo, hi)]), k an integer literal (Item.Param): its k+1 quantiles
	// as one JSON array.
	Quantiles = "APPROX_QUANTILES"
)

// Item is one output of the SELECT list: a group key (Agg == ""), a column
// or an expression, or an aggregate.
type Item struct {
	Column string      // the key column, or the aggregate's argument ("" for COUNT(*))
	Qual   string      // Column's table qualifier as written ("" if none)
	Expr   Expr        // a computed group key (Agg == "", Column == ""); nil otherwise
	Agg    string      // "", Count, Sum, Avg, Var, Std, Median, Percentile or Quantiles
	Bounds *[2]float64 // contribution_bounds_per_group (or _per_row), if given
	Alias  string      // "" if none
	// Distinct: COUNT(DISTINCT col).
	Distinct bool
	// Param is PERCENTILE_CONT's p or APPROX_QUANTILES's k, as written
	// (ParamText).
	Param     float64
	ParamText string
}

// Name returns the output column name: the alias, the key column, or the
// aggregate as written in canonical form.
func (it Item) Name() string {
	switch {
	case it.Alias != "":
		return it.Alias
	case it.Expr != nil:
		return String(it.Expr)
	case it.Agg == "":
		return it.Column
	case it.Column == "":
		return it.Agg + "(*)"
	case it.Distinct:
		return it.Agg + "(DISTINCT " + it.Column + ")"
	case it.ParamText != "":
		return it.Agg + "(" + it.Column + ", " + it.ParamText + ")"
	}
	return it.Agg + "(" + it.Column + ")"
}

// OrderTerm is one ORDER BY term: an output name or a 1-based position.
type OrderTerm struct {
	Name string // "" when Pos is set
	Pos  int
	Desc bool
}

// Expr is a WHERE expression. SQL renders it fully parenthesised in SQLite's
// syntax, identifiers double-quoted.
type Expr interface {
	SQL(b *strings.Builder)
}

// Lit is a literal. Kind is "number", "string", "blob", "null", "true" or "false".
type Lit struct{ Kind, Text string }

// Col is a column reference. Qual is its table qualifier as written, ""
// if none: without a join it must name the FROM table; with one, the
// checker resolves it (and clears it). SQL does not render it.
type Col struct{ Name, Qual string }

// Unary is -x, +x, ~x or NOT x.
type Unary struct {
	Op string
	X  Expr
}

// Binary is x op y for an arithmetic, comparison or logical operator.
type Binary struct {
	Op   string
	L, R Expr
}

// IsNull is x IS [NOT] NULL.
type IsNull struct {
	X   Expr
	Not bool
}

// Between is x [NOT] BETWEEN lo AND hi.
type Between struct {
	X, Lo, Hi Expr
	Not       bool
}

// In is x [NOT] IN (list).
type In struct {
	X    Expr
	List []Expr
	Not  bool
}

// Like is x [NOT] LIKE 'pattern' (a literal pattern, no ESCAPE).
type Like struct {
	X       Expr
	Pattern string
	Not     bool
}

// Case is CASE [operand] WHEN .. THEN .. [ELSE ..] END.
type Case struct {
	Operand Expr // nil if absent
	Whens   [][2]Expr
	Else    Expr // nil if absent
}

// Cast is CAST(x AS type) with type one of INTEGER, REAL, TEXT, NUMERIC, BLOB.
type Cast struct {
	X    Expr
	Type string
}

// Call is a function call with a lower-case name.
type Call struct {
	Name string
	Args []Expr
}

// AggRef is an aggregate written in HAVING, COUNT(*) or AGG(col): it names
// the output of the same aggregate in the SELECT list (its released value).
type AggRef struct {
	Agg      string // upper case
	Column   string // "" for COUNT(*)
	Distinct bool   // COUNT(DISTINCT col)
}

// QuoteIdent double-quotes an identifier for SQLite.
func QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// QuoteString single-quotes a string literal for SQLite.
func QuoteString(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

func (e *Lit) SQL(b *strings.Builder) {
	switch e.Kind {
	case "string":
		b.WriteString(QuoteString(e.Text))
	case "blob":
		b.WriteString("x'" + e.Text + "'")
	case "null":
		b.WriteString("NULL")
	case "true":
		b.WriteString("1")
	case "false":
		b.WriteString("0")
	default:
		b.WriteString(e.Text)
	}
}

func (e *Col) SQL(b *strings.Builder) { b.WriteString(QuoteIdent(e.Name)) }

func (e *AggRef) SQL(b *strings.Builder) {
	switch {
	case e.Column == "":
		b.WriteString(e.Agg + "(*)")
	case e.Distinct:
		b.WriteString(e.Agg + "(DISTINCT " + QuoteIdent(e.Column) + ")")
	default:
		b.WriteString(e.Agg + "(" + QuoteIdent(e.Column) + ")")
	}
}

func (e *Unary) SQL(b *strings.Builder) {
	b.WriteString("(" + e.Op + " ")
	e.X.SQL(b)
	b.WriteString(")")
}

func (e *Binary) SQL(b *strings.Builder) {
	b.WriteString("(")
	e.L.SQL(b)
	b.WriteString(" " + e.Op + " ")
	e.R.SQL(b)
	b.WriteString(")")
}

func (e *IsNull) SQL(b *strings.Builder) {
	b.WriteString("(")
	e.X.SQL(b)
	if e.Not {
		b.WriteString(" IS NOT NULL)")
	} else {
		b.WriteString(" IS NULL)")
	}
}

func not(b *strings.Builder, n bool) {
	if n {
		b.WriteString(" NOT")
	}
}

func (e *Between) SQL(b *strings.Builder) {
	b.WriteString("(")
	e.X.SQL(b)
	not(b, e.Not)
	b.WriteString(" BETWEEN ")
	e.Lo.SQL(b)
	b.WriteString(" AND ")
	e.Hi.SQL(b)
	b.WriteString(")")
}

func (e *In) SQL(b *strings.Builder) {
	b.WriteString("(")
	e.X.SQL(b)
	not(b, e.Not)
	b.WriteString(" IN (")
	for i, x := range e.List {
		if i > 0 {
			b.WriteString(", ")
		}
		x.SQL(b)
	}
	b.WriteString("))")
}

func (e *Like) SQL(b *strings.Builder) {
	b.WriteString("(")
	e.X.SQL(b)
	not(b, e.Not)
	b.WriteString(" LIKE " + QuoteString(e.Pattern) + ")")
}

func (e *Case) SQL(b *strings.Builder) {
	b.WriteString("(CASE")
	if e.Operand != nil {
		b.WriteString(" ")
		e.Operand.SQL(b)
	}
	for _, w := range e.Whens {
		b.WriteString(" WHEN ")
		w[0].SQL(b)
		b.WriteString(" THEN ")
		w[1].SQL(b)
	}
	if e.Else != nil {
		b.WriteString(" ELSE ")
		e.Else.SQL(b)
	}
	b.WriteString(" END)")
}

func (e *Cast) SQL(b *strings.Builder) {
	b.WriteString("CAST(")
	e.X.SQL(b)
	b.WriteString(" AS " + e.Type + ")")
}

func (e *Call) SQL(b *strings.Builder) {
	b.WriteString(e.Name + "(")
	for i, x := range e.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		x.SQL(b)
	}
	b.WriteString(")")
}

// Walk calls f on e and every expression below it, depth first.
func Walk(e Expr, f func(Expr)) {
	if e == nil {
		return
	}
	f(e)
	switch e := e.(type) {
	case *Unary:
		Walk(e.X, f)
	case *Binary:
		Walk(e.L, f)
		Walk(e.R, f)
	case *IsNull:
		Walk(e.X, f)
	case *Between:
		Walk(e.X, f)
		Walk(e.Lo, f)
		Walk(e.Hi, f)
	case *In:
		Walk(e.X, f)
		for _, x := range e.List {
			Walk(x, f)
		}
	case *Like:
		Walk(e.X, f)
	case *Case:
		Walk(e.Operand, f)
		for _, w := range e.Whens {
			Walk(w[0], f)
			Walk(w[1], f)
		}
		Walk(e.Else, f)
	case *Cast:
		Walk(e.X, f)
	case *Call:
		for _, x := range e.Args {
			Walk(x, f)
		}
	}
}

// Rewrite returns e with every expression below it, then e itself,
// replaced by f's result (depth first, children before their parent); f
// returns its argument to keep it. The nodes are changed in place.
func Rewrite(e Expr, f func(Expr) Expr) Expr {
	if e == nil {
		return nil
	}
	r := func(x *Expr) { *x = Rewrite(*x, f) }
	switch e := e.(type) {
	case *Unary:
		r(&e.X)
	case *Binary:
		r(&e.L)
		r(&e.R)
	case *IsNull:
		r(&e.X)
	case *Between:
		r(&e.X)
		r(&e.Lo)
		r(&e.Hi)
	case *In:
		r(&e.X)
		for i := range e.List {
			r(&e.List[i])
		}
	case *Like:
		r(&e.X)
	case *Case:
		if e.Operand != nil {
			r(&e.Operand)
		}
		for i := range e.Whens {
			r(&e.Whens[i][0])
			r(&e.Whens[i][1])
		}
		if e.Else != nil {
			r(&e.Else)
		}
	case *Cast:
		r(&e.X)
	case *Call:
		for i := range e.Args {
			r(&e.Args[i])
		}
	}
	return f(e)
}

// String renders e as SQL.
func String(e Expr) string {
	var b strings.Builder
	e.SQL(&b)
	return b.String()
}

// parseFloat reads a number literal, with an error in words a user knows
// (not strconv's): "1e309" is too large for a double, as SQLite reads it.
func parseFloat(s string) (float64, error) {
	var v float64
	var err error
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		// SQLite reads up to 16 hex digits as a 64-bit two's complement
		// integer: 0xFFFFFFFFFFFFFFFF is -1.
		var u uint64
		u, err = strconv.ParseUint(s[2:], 16, 64)
		v = float64(int64(u))
	} else {
		v, err = strconv.ParseFloat(s, 64)
	}
	hex := strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X")
	switch {
	case err == nil:
		return v, nil
	case hex && errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%s is too large (a hex literal has at most 16 digits)", s)
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%s is too large (the largest number is about 1.8e308)", s)
	}
	return 0, fmt.Errorf("%s is not a number", s)
}
