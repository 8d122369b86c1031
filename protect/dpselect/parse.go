package dpselect

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrNotDP is returned by Parse for a statement that does not start with
// SELECT WITH DIFFERENTIAL_PRIVACY: it is not this package's to parse.
var ErrNotDP = errors.New("not a SELECT WITH DIFFERENTIAL_PRIVACY statement")

// Accepted is the one-line summary of the grammar that parse errors point to.
const Accepted = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = ...) keys and COUNT(*), COUNT(col), COUNT(DISTINCT col), SUM(col), AVG(col), VAR_POP(col), STDDEV_POP(col), MEDIAN(col), PERCENTILE_CONT(col, p), APPROX_QUANTILES(col, k) FROM protected_table [WHERE ...] [GROUP BY keys] [HAVING condition on outputs] [ORDER BY outputs] [LIMIT n]"

// MaxLikePattern is the longest LIKE pattern accepted, well under SQLite's
// default limit of 50,000 bytes.
const MaxLikePattern = 1000

// maxDepth bounds expression nesting (the parser recurses).
const maxDepth = 100

// joinRefusal says why joins are refused, and what to write instead.
const joinRefusal = "this join is not accepted: a DP SELECT reads one protected table, directly or through " +
	"CTEs and subqueries that filter it and select its columns, or joins that table (named directly) with one " +
	"public table: FROM protected [AS p] [INNER | LEFT [OUTER]] JOIN public [AS q] ON p.col = q.col [AND ...] | USING (col)"

// dpStart reports whether toks (after EXPLAIN) start a DP statement: SELECT
// WITH DIFFERENTIAL_PRIVACY, possibly after WITH name AS (...), ... (CTEs,
// not RECURSIVE).
func dpStart(toks []token) bool {
	i := 0
	if len(toks) > 0 && toks[0].is("WITH") {
		i = skipWith(toks)
		if i < 0 {
			return false
		}
	}
	return len(toks) >= i+3 && toks[i].is("SELECT") && toks[i+1].is("WITH") && toks[i+2].is("DIFFERENTIAL_PRIVACY")
}

// skipWith returns the index of the token after a WITH clause at toks[0]
// (name [(...)] AS [[NOT] MATERIALIZED] (...), ...), or -1 if it is not one
// (WITH RECURSIVE included).
func skipWith(toks []token) int {
	i := 1
	skipParens := func() bool { // at "(": skip to after its ")"
		depth := 0
		for ; i < len(toks) && toks[i].kind != tEOF; i++ {
			switch {
			case toks[i].op("("):
				depth++
			case toks[i].op(")"):
				depth--
				if depth == 0 {
					i++
					return true
				}
			}
		}
		return false
	}
	for {
		if i >= len(toks) || toks[i].kind != tIdent || toks[i].is("RECURSIVE") {
			return -1
		}
		i++
		if toks[i].op("(") && !skipParens() {
			return -1
		}
		if !toks[i].is("AS") {
			return -1
		}
		i++
		if toks[i].is("NOT") {
			i++
		}
		if toks[i].is("MATERIALIZED") {
			i++
		}
		if !toks[i].op("(") || !skipParens() {
			return -1
		}
		if !toks[i].op(",") {
			return i
		}
		i++
	}
}

// IsDP reports whether src is protected mode's to run: it starts (after
// white space and comments) with SELECT WITH DIFFERENTIAL_PRIVACY, or EXPLAIN
// SELECT WITH DIFFERENTIAL_PRIVACY (its plan, which reads and charges
// nothing: Statement.Explain), and its
// tokens are ones this package reads (no token SQLite would refuse;
// otherwise SQLite gets it and names the bad token; a bind parameter is
// routed here, and Parse refuses it). It is the one
// place that routes statements: the analyst connections' driver
// (protect.AnalystConn), the analyst service's classifier (serve), and
// through them the command line, and dpsql-beam all decide by it, so a form
// added later (EXPLAIN ..., WITH ... SELECT WITH DIFFERENTIAL_PRIVACY) is
// recognised here once.
func IsDP(src string) bool {
	toks, err := lex(src)
	if err != nil {
		return false
	}
	if len(toks) > 0 && toks[0].is("EXPLAIN") {
		toks = toks[1:]
	}
	return dpStart(toks)
}

func (t token) is(kw string) bool {
	return t.kind == tIdent && !t.quoted && strings.EqualFold(t.text, kw)
}

func (t token) op(o string) bool { return t.kind == tOp && t.text == o }

// SyntaxError is a parse error at an offset of the statement.
type SyntaxError struct {
	Pos int
	Msg string
	// Bare is set when Msg says all there is (what was wrong and what to
	// write): the error is Msg alone, without the grammar's summary.
	Bare bool
}

func (e *SyntaxError) Error() string {
	if e.Bare {
		return e.Msg
	}
	return fmt.Sprintf("syntax error at offset %d: %s (accepted: %s)", e.Pos, e.Msg, Accepted)
}

type parser struct {
	toks  []token
	i     int
	depth int
	quals []string // table qualifiers written before columns
	// having: the parser is in HAVING, whose names are outputs' (an
	// aggregate written there is refused with how to name it instead).
	having bool
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errf(format string, args ...any) error {
	return &SyntaxError{Pos: p.peek().pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) kw(k string) bool {
	if p.peek().is(k) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectKw(k string) error {
	if !p.kw(k) {
		return p.errf("expected %s, found %s", k, p.peek().describe())
	}
	return nil
}

func (p *parser) isOp(o string) bool {
	if p.peek().op(o) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectOp(o string) error {
	if !p.isOp(o) {
		return p.errf("expected %q, found %s", o, p.peek().describe())
	}
	return nil
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of statement"
	case tString:
		return "a string"
	case tNumber:
		return "number " + t.text
	}
	return strconv.Quote(t.text)
}

// reserved words that cannot be an alias or a column without quotes.
var reserved = map[string]bool{
	"SELECT": true, "FROM": true, "WHERE": true, "GROUP": true, "BY": true, "ORDER": true, "LIMIT": true,
	"HAVING": true, "UNION": true, "INTERSECT": true, "EXCEPT": true, "JOIN": true, "ON": true, "AS": true,
	"AND": true, "OR": true, "NOT": true, "IS": true, "IN": true, "LIKE": true, "BETWEEN": true, "NULL": true,
	"CASE": true, "WHEN": true, "THEN": true, "ELSE": true, "END": true, "WITH": true, "ASC": true, "DESC": true,
	"OFFSET": true, "WINDOW": true, "OVER": true, "DISTINCT": true, "ALL": true, "CAST": true, "ESCAPE": true,
	"GLOB": true, "REGEXP": true, "MATCH": true, "EXISTS": true, "COLLATE": true, "LEFT": true, "INNER": true,
	"CROSS": true, "NATURAL": true, "USING": true, "VALUES": true,
}

func (p *parser) ident(what string) (string, error) {
	t := p.peek()
	if t.kind != tIdent || (!t.quoted && reserved[strings.ToUpper(t.text)]) {
		return "", p.errf("expected %s, found %s", what, t.describe())
	}
	p.i++
	return t.text, nil
}

// Parse parses one DP SELECT statement (an optional trailing semicolon, nothing after it).
func Parse(src string) (*Statement, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, &SyntaxError{Msg: err.Error()}
	}
	p := &parser{toks: toks}
	explain := p.kw("EXPLAIN")
	if !dpStart(toks[p.i:]) {
		return nil, ErrNotDP
	}
	if err := paramError(toks); err != nil {
		return nil, err
	}
	st := &Statement{Limit: -1, Explain: explain}
	if p.peek().is("WITH") {
		if err := p.with(st); err != nil {
			return nil, err
		}
	}
	if !(p.kw("SELECT") && p.kw("WITH") && p.kw("DIFFERENTIAL_PRIVACY")) {
		return nil, ErrNotDP
	}
	if err := p.options(st); err != nil {
		return nil, err
	}
	for {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		st.Items = append(st.Items, it)
		if !p.isOp(",") {
			break
		}
	}
	if err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	if p.peek().op("(") {
		// A subquery in FROM: an anonymous CTE, named by its alias.
		p.next()
		sub, err := p.subSelect()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		p.kw("AS")
		name := "(subquery)"
		if t := p.peek(); t.kind == tIdent && (t.quoted || !reserved[strings.ToUpper(t.text)]) {
			name = t.text
			p.next()
		}
		for _, c := range st.With {
			if strings.EqualFold(c.Name, name) {
				return nil, p.errf("the subquery's alias %s is a CTE's name: choose another", name)
			}
		}
		st.With = append(st.With, CTE{Name: name, Body: sub})
		st.Table = name
	} else if st.Table, err = p.ident("a table name"); err != nil {
		return nil, err
	}
	if p.peek().op(".") {
		return nil, p.errf("schema-qualified tables are not accepted; name the protected table alone")
	}
	if err := p.join(st); err != nil {
		return nil, err
	}
	if p.kw("WHERE") {
		if st.Where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if p.kw("GROUP") {
		if err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			st.GroupBy = append(st.GroupBy, x)
			if !p.isOp(",") {
				break
			}
		}
	}
	if p.kw("HAVING") {
		p.having = true
		if st.Having, err = p.expr(); err != nil {
			return nil, err
		}
		p.having = false
	}
	if p.kw("ORDER") {
		if err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			var ot OrderTerm
			if t := p.peek(); t.kind == tNumber {
				p.next()
				n, err := strconv.Atoi(t.text)
				if err != nil || n < 1 || n > len(st.Items) {
					return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("ORDER BY position %s is not between 1 and %d", t.text, len(st.Items))}
				}
				ot.Pos = n
			} else if ot.Name, err = p.ident("an output name or position in ORDER BY"); err != nil {
				return nil, err
			}
			if p.kw("DESC") {
				ot.Desc = true
			} else {
				p.kw("ASC")
			}
			st.OrderBy = append(st.OrderBy, ot)
			if !p.isOp(",") {
				break
			}
		}
	}
	if p.kw("LIMIT") {
		t := p.next()
		n, err := strconv.ParseInt(t.text, 10, 64)
		if t.kind != tNumber || err != nil || n < 0 {
			return nil, &SyntaxError{Pos: t.pos, Msg: "LIMIT takes a non-negative integer literal"}
		}
		st.Limit = n
		if p.peek().is("OFFSET") || p.peek().op(",") {
			return nil, p.errf("OFFSET is not accepted")
		}
	}
	for _, q := range p.quals {
		if st.Join == nil && !strings.EqualFold(q, st.Table) {
			return nil, &SyntaxError{Msg: fmt.Sprintf("column qualifier %q is not the FROM table %q", q, st.Table)}
		}
	}
	p.isOp(";")
	if t := p.peek(); t.kind != tEOF {
		if t.is("UNION") || t.is("INTERSECT") || t.is("EXCEPT") {
			return nil, p.errf("compound SELECTs (%s) are not accepted", strings.ToUpper(t.text))
		}
		return nil, p.errf("unexpected %s after the statement (one statement only)", t.describe())
	}
	return st, nil
}

func (p *parser) options(st *Statement) error {
	if !p.kw("OPTIONS") {
		return p.errf("expected OPTIONS (mu = ...) after SELECT WITH DIFFERENTIAL_PRIVACY")
	}
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.peek().op(")") {
		name, err := p.ident("an option name")
		if err != nil {
			return err
		}
		if err := p.expectOp("="); err != nil {
			return err
		}
		if t := p.peek(); t.kind == tString {
			p.next()
			st.Options = append(st.Options, Option{Name: strings.ToLower(name), Text: t.text, IsText: true})
			if !p.isOp(",") {
				break
			}
			continue
		}
		neg := p.isOp("-")
		t := p.next()
		if t.kind != tNumber {
			return &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("option %s takes a number or a 'string'", name)}
		}
		v, err := parseFloat(t.text)
		if err != nil {
			return &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("option %s: %v", name, err)}
		}
		if neg {
			v = -v
		}
		st.Options = append(st.Options, Option{Name: strings.ToLower(name), Value: v})
		if !p.isOp(",") {
			break
		}
	}
	return p.expectOp(")")
}

// column reads a column name, optionally qualified by a table name
// (returned as qual, and recorded in p.quals).
func (p *parser) column() (name, qual string, err error) {
	c, err := p.ident("a column name")
	if err != nil {
		return "", "", err
	}
	if p.isOp(".") {
		p.quals = append(p.quals, c)
		n, err := p.ident("a column name after the table qualifier")
		return n, c, err
	}
	return c, "", nil
}

// dpAggregate reports whether name (upper case) is a DP aggregate.
func dpAggregate(name string) bool {
	switch name {
	case Count, Sum, Avg, Var, Std, Median, Percentile, Quantiles:
		return true
	}
	return false
}

// sqlAggregates are SQL aggregates that are not DP aggregates, refused by
// name in the SELECT list (min and max with one argument).
var sqlAggregates = map[string]bool{"min": true, "max": true, "total": true, "group_concat": true,
	"string_agg": true, "json_group_array": true, "json_group_object": true, "any_value": true,
	"percentile": true, "percentile_disc": true, "approx_count_distinct": true}

func (p *parser) item() (Item, error) {
	var it Item
	t := p.peek()
	if t.op("*") {
		return it, p.errf("SELECT * is not accepted: list group keys and DP aggregates")
	}
	if t.is("DISTINCT") {
		return it, p.errf("DISTINCT is not accepted")
	}
	agg := strings.ToUpper(t.text)
	if t.kind == tIdent && !t.quoted && p.toks[p.i+1].op("(") && dpAggregate(agg) {
		p.i += 2
		it.Agg = agg
		if p.isOp("*") {
			if agg != Count {
				return it, p.errf("%s(*) is not accepted", agg)
			}
		} else {
			if p.kw("DISTINCT") {
				if agg != Count {
					return it, p.errf("%s(DISTINCT ...) is not accepted: DISTINCT is for COUNT(DISTINCT col)", agg)
				}
				it.Distinct = true
			}
			c, q, err := p.column()
			if err != nil {
				return it, fmt.Errorf("%w (aggregates take one column)", err)
			}
			it.Column, it.Qual = c, q
		}
		if agg == Percentile || agg == Quantiles {
			if err := p.param(&it); err != nil {
				return it, err
			}
		}
		if p.isOp(",") {
			if err := p.boundsArg(&it); err != nil {
				return it, err
			}
		}
		if err := p.expectOp(")"); err != nil {
			return it, err
		}
		if p.peek().is("OVER") || p.peek().is("FILTER") {
			return it, p.errf("window functions and FILTER are not accepted")
		}
	} else {
		// A group key: a column, or an expression that GROUP BY names too.
		x, err := p.expr()
		if err != nil {
			return it, fmt.Errorf("%w: the SELECT list takes group keys and DP aggregates", err)
		}
		switch x := x.(type) {
		case *Col:
			it.Column, it.Qual = x.Name, x.Qual
		case *Call:
			if sqlAggregates[x.Name] && (len(x.Args) == 1 || x.Name != "min" && x.Name != "max") {
				return it, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("%s(...) is not a DP aggregate: use COUNT(*), COUNT(col), "+
					"COUNT(DISTINCT col), SUM(col), AVG(col), VAR_POP(col), STDDEV_POP(col), MEDIAN(col), PERCENTILE_CONT(col, p) "+
					"or APPROX_QUANTILES(col, k)", t.text)}
			}
			it.Expr = x
		default:
			it.Expr = x
		}
	}
	if p.kw("AS") {
		a, err := p.ident("an alias")
		if err != nil {
			return it, err
		}
		it.Alias = a
	} else if t := p.peek(); t.kind == tIdent && (t.quoted || !reserved[strings.ToUpper(t.text)]) {
		it.Alias = t.text
		p.i++
	}
	if t := p.peek(); !t.op(",") && !t.is("FROM") {
		return it, p.errf("expressions are not accepted around DP aggregates in the SELECT list: write a group key or a DP aggregate, optionally AS alias, and compute from the released values")
	}
	return it, nil
}

// param reads PERCENTILE_CONT's p or APPROX_QUANTILES's k: ", number".
func (p *parser) param(it *Item) error {
	what := "PERCENTILE_CONT(col, p) takes the percentile p as a number literal in [0, 1], as in PERCENTILE_CONT(x, 0.9)"
	if it.Agg == Quantiles {
		what = "APPROX_QUANTILES(col, k) takes the number of quantiles k as an integer literal, as in APPROX_QUANTILES(x, 4)"
	}
	if !p.isOp(",") {
		return p.errf("%s", what)
	}
	neg := p.isOp("-")
	t := p.next()
	if t.kind != tNumber {
		return &SyntaxError{Pos: t.pos, Msg: what}
	}
	v, err := parseFloat(t.text)
	if err != nil {
		return &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("%s: %v", what, err)}
	}
	it.ParamText = t.text
	if neg {
		v, it.ParamText = -v, "-"+t.text
	}
	it.Param = v
	return nil
}

// boundsArg reads the named argument after ",": contribution_bounds_per_group
// => (lo, hi) (SUM, AVG, VAR_POP, STDDEV_POP, MEDIAN) or
// contribution_bounds_per_row => (lo, hi) (PERCENTILE_CONT, APPROX_QUANTILES,
// MEDIAN): each row's value is clamped to them.
func (p *parser) boundsArg(it *Item) error {
	perRow := it.Agg == Percentile || it.Agg == Quantiles
	switch {
	case p.kw("contribution_bounds_per_group"):
		if perRow {
			return p.errf("%s takes contribution_bounds_per_row => (lo, hi), as in %s(%s, %s, "+
				"contribution_bounds_per_row => (0, 100))", it.Agg, it.Agg, it.Column, it.ParamText)
		}
	case p.kw("contribution_bounds_per_row"):
		if !perRow && it.Agg != Median && it.Agg != Count {
			return p.errf("%s takes contribution_bounds_per_group => (lo, hi)", it.Agg)
		}
	default:
		if perRow {
			return p.errf("the only named argument of %s is contribution_bounds_per_row => (lo, hi)", it.Agg)
		}
		return p.errf("the only named argument is contribution_bounds_per_group => (lo, hi)")
	}
	if it.Agg == Count {
		return p.errf("COUNT takes no contribution bounds: each person counts at most max_rows rows per group, set by the table's policy")
	}
	if err := p.expectOp("=>"); err != nil {
		return err
	}
	lo, hi, err := p.pair()
	if err != nil {
		return err
	}
	it.Bounds = &[2]float64{lo, hi}
	return nil
}

func (p *parser) signedNumber() (float64, error) {
	neg := false
	if p.isOp("-") {
		neg = true
	} else {
		p.isOp("+")
	}
	t := p.next()
	if t.kind != tNumber {
		return 0, &SyntaxError{Pos: t.pos, Msg: "contribution bounds must be number literals"}
	}
	v, err := parseFloat(t.text)
	if err != nil || math.IsInf(v, 0) {
		return 0, &SyntaxError{Pos: t.pos, Msg: "contribution bound out of range"}
	}
	if neg {
		v = -v
	}
	return v, nil
}

func (p *parser) pair() (float64, float64, error) {
	if err := p.expectOp("("); err != nil {
		return 0, 0, err
	}
	lo, err := p.signedNumber()
	if err != nil {
		return 0, 0, err
	}
	if err := p.expectOp(","); err != nil {
		return 0, 0, err
	}
	hi, err := p.signedNumber()
	if err != nil {
		return 0, 0, err
	}
	return lo, hi, p.expectOp(")")
}

// ---- expressions (precedence from low to high: OR, AND, NOT, comparison,
// additive, multiplicative, unary) ----

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errf("expression nested deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) expr() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.kw("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: "OR", L: l, R: r}
	}
	return l, nil
}

func (p *parser) and() (Expr, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.kw("AND") {
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: "AND", L: l, R: r}
	}
	return l, nil
}

func (p *parser) not() (Expr, error) {
	if p.kw("NOT") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &Unary{Op: "NOT", X: x}, nil
	}
	return p.comparison()
}

var compareOps = map[string]string{"=": "=", "==": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func (p *parser) comparison() (Expr, error) {
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if op, ok := compareOps[t.text]; ok && t.kind == tOp {
			p.next()
			r, err := p.additive()
			if err != nil {
				return nil, err
			}
			l = &Binary{Op: op, L: l, R: r}
			continue
		}
		if p.kw("IS") {
			neg := p.kw("NOT")
			if p.kw("NULL") {
				l = &IsNull{X: l, Not: neg}
				continue
			}
			r, err := p.additive()
			if err != nil {
				return nil, err
			}
			op := "IS"
			if neg {
				op = "IS NOT"
			}
			l = &Binary{Op: op, L: l, R: r}
			continue
		}
		if p.kw("ISNULL") {
			l = &IsNull{X: l}
			continue
		}
		if p.kw("NOTNULL") {
			l = &IsNull{X: l, Not: true}
			continue
		}
		save := p.i
		neg := p.kw("NOT")
		switch {
		case p.kw("BETWEEN"):
			lo, err := p.additive()
			if err != nil {
				return nil, err
			}
			if err := p.expectKw("AND"); err != nil {
				return nil, err
			}
			hi, err := p.additive()
			if err != nil {
				return nil, err
			}
			l = &Between{X: l, Lo: lo, Hi: hi, Not: neg}
		case p.kw("IN"):
			if err := p.expectOp("("); err != nil {
				return nil, err
			}
			if p.peek().is("SELECT") || p.peek().is("WITH") || p.peek().is("VALUES") {
				return nil, p.errf("subqueries are not accepted")
			}
			in := &In{X: l, Not: neg}
			for {
				x, err := p.expr()
				if err != nil {
					return nil, err
				}
				in.List = append(in.List, x)
				if !p.isOp(",") {
					break
				}
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			l = in
		case p.kw("LIKE"):
			t := p.next()
			if t.kind != tString {
				return nil, &SyntaxError{Pos: t.pos, Msg: "LIKE takes a string literal pattern"}
			}
			if p.peek().is("ESCAPE") {
				return nil, p.errf("LIKE ... ESCAPE is not accepted")
			}
			if len(t.text) > MaxLikePattern {
				// SQLite fails ("pattern too complex") past its limit, and
				// only when some row reaches the LIKE: an error that
				// would depend on the data.
				return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("a LIKE pattern may be at most %d bytes", MaxLikePattern)}
			}
			l = &Like{X: l, Pattern: t.text, Not: neg}
		case p.peek().is("GLOB") || p.peek().is("REGEXP") || p.peek().is("MATCH"):
			return nil, p.errf("%s is not accepted; use LIKE with a literal pattern", strings.ToUpper(p.peek().text))
		default:
			p.i = save
			return l, nil
		}
	}
}

func (p *parser) additive() (Expr, error) {
	l, err := p.multiplicative()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.op("||") {
			return nil, p.errf("|| is not accepted in WHERE (a long result could fail with 'string or blob too big')")
		}
		if !t.op("+") && !t.op("-") {
			return l, nil
		}
		p.next()
		r, err := p.multiplicative()
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: t.text, L: l, R: r}
	}
}

func (p *parser) multiplicative() (Expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !t.op("*") && !t.op("/") && !t.op("%") {
			return l, nil
		}
		p.next()
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: t.text, L: l, R: r}
	}
}

func (p *parser) unary() (Expr, error) {
	t := p.peek()
	if t.op("-") || t.op("+") || t.op("~") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Unary{Op: t.text, X: x}, nil
	}
	return p.primary()
}

var castTypes = map[string]bool{"INTEGER": true, "REAL": true, "TEXT": true, "NUMERIC": true, "BLOB": true}

func (p *parser) primary() (Expr, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		if _, err := parseFloat(t.text); err != nil {
			return nil, &SyntaxError{Pos: t.pos, Msg: "malformed number " + t.text}
		}
		return &Lit{Kind: "number", Text: t.text}, nil
	case tString:
		return &Lit{Kind: "string", Text: t.text}, nil
	case tBlob:
		return &Lit{Kind: "blob", Text: t.text}, nil
	case tOp:
		if t.text == "(" {
			if p.peek().is("SELECT") || p.peek().is("WITH") || p.peek().is("VALUES") {
				return nil, p.errf("subqueries are not accepted")
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.peek().op(",") {
				return nil, p.errf("row values are not accepted")
			}
			return x, p.expectOp(")")
		}
	case tIdent:
		if !t.quoted {
			switch strings.ToUpper(t.text) {
			case "NULL":
				return &Lit{Kind: "null"}, nil
			case "TRUE":
				return &Lit{Kind: "true"}, nil
			case "FALSE":
				return &Lit{Kind: "false"}, nil
			case "EXISTS", "SELECT":
				return nil, &SyntaxError{Pos: t.pos, Msg: "subqueries are not accepted"}
			case "CASE":
				return p.caseExpr()
			case "CAST":
				if err := p.expectOp("("); err != nil {
					return nil, err
				}
				x, err := p.expr()
				if err != nil {
					return nil, err
				}
				if err := p.expectKw("AS"); err != nil {
					return nil, err
				}
				ty := strings.ToUpper(p.next().text)
				if !castTypes[ty] {
					return nil, p.errf("CAST takes INTEGER, REAL, TEXT, NUMERIC or BLOB")
				}
				return &Cast{X: x, Type: ty}, p.expectOp(")")
			}
			if reserved[strings.ToUpper(t.text)] {
				return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("unexpected %s in an expression", strings.ToUpper(t.text))}
			}
			if p.peek().op("(") {
				return p.call(t)
			}
		}
		if p.isOp(".") {
			p.quals = append(p.quals, t.text)
			c, err := p.ident("a column name after the table qualifier")
			if err != nil {
				return nil, err
			}
			return &Col{Name: c, Qual: t.text}, nil
		}
		return &Col{Name: t.text}, nil
	}
	return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("unexpected %s in an expression", t.describe())}
}

func (p *parser) call(name token) (Expr, error) {
	p.next() // (
	c := &Call{Name: strings.ToLower(name.text)}
	if p.having && dpAggregate(strings.ToUpper(name.text)) {
		return p.aggRef(name)
	}
	if p.peek().op("*") || p.peek().is("DISTINCT") {
		return nil, p.errf("aggregates are not accepted inside expressions (WHERE, GROUP BY, keys)")
	}
	if !p.peek().op(")") {
		for {
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.Args = append(c.Args, x)
			if !p.isOp(",") {
				break
			}
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if p.peek().is("OVER") || p.peek().is("FILTER") {
		return nil, p.errf("window functions are not accepted")
	}
	return c, nil
}

// with reads WITH name AS (SELECT ...), ...: CTEs that filter a protected
// table (or an earlier CTE) and select its columns.
func (p *parser) with(st *Statement) error {
	p.next() // WITH
	for {
		name, err := p.ident("a CTE name")
		if err != nil {
			return err
		}
		for _, c := range st.With {
			if strings.EqualFold(c.Name, name) {
				return p.errf("two CTEs are named %s", name)
			}
		}
		if p.peek().op("(") {
			return p.errf("a column list after a CTE's name is not accepted: name the columns in its SELECT list (col AS name)")
		}
		if err := p.expectKw("AS"); err != nil {
			return err
		}
		p.kw("NOT")
		p.kw("MATERIALIZED")
		if err := p.expectOp("("); err != nil {
			return err
		}
		sub, err := p.subSelect()
		if err != nil {
			return err
		}
		if err := p.expectOp(")"); err != nil {
			return err
		}
		if strings.EqualFold(sub.Table, name) {
			return &SyntaxError{Pos: sub.pos, Msg: fmt.Sprintf("CTE %s reads itself (a recursive CTE): not accepted", name)}
		}
		st.With = append(st.With, CTE{Name: name, Body: sub})
		if !p.isOp(",") {
			return nil
		}
	}
}

// subSelect reads the SELECT of a CTE or of a subquery in FROM: columns
// (col [AS name], *), FROM one table or earlier CTE, and WHERE. What would
// aggregate, join, order or limit rows is refused: the statement's one DP
// aggregation is the outer SELECT's.
func (p *parser) subSelect() (*SubSelect, error) {
	sub := &SubSelect{pos: p.peek().pos}
	if err := p.expectKw("SELECT"); err != nil {
		return nil, err
	}
	if p.peek().is("WITH") && p.toks[p.i+1].is("DIFFERENTIAL_PRIVACY") {
		return nil, p.errf("a DP SELECT inside a CTE or subquery is not accepted: the DP aggregation is the outer statement's")
	}
	if p.peek().is("DISTINCT") {
		return nil, p.errf("DISTINCT in a CTE or subquery is not accepted (it would merge persons' rows)")
	}
	p.kw("ALL")
	outer := p.quals
	p.quals = nil
	defer func() { p.quals = outer }()
	for {
		var it SubItem
		t := p.peek()
		switch {
		case t.op("*"):
			p.next()
			it.Star = true
		case t.kind == tIdent && p.toks[p.i+1].op(".") && p.toks[p.i+2].op("*"):
			p.quals = append(p.quals, t.text)
			p.i += 3
			it.Star = true
		default:
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if c, ok := x.(*Col); ok {
				it.Column = c.Name
			} else {
				it.Expr = x
			}
			if p.kw("AS") {
				a, err := p.ident("an alias")
				if err != nil {
					return nil, err
				}
				it.Alias = a
			} else if t := p.peek(); t.kind == tIdent && (t.quoted || !reserved[strings.ToUpper(t.text)]) {
				it.Alias = t.text
				p.i++
			}
		}
		sub.Items = append(sub.Items, it)
		if !p.isOp(",") {
			break
		}
	}
	if err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	if p.peek().op("(") {
		return nil, p.errf("a subquery inside a CTE or subquery is not accepted: write it as an earlier CTE")
	}
	var err error
	if sub.Table, err = p.ident("a table or CTE name"); err != nil {
		return nil, err
	}
	if p.peek().op(".") {
		return nil, p.errf("schema-qualified tables are not accepted; name the protected table alone")
	}
	alias := ""
	if p.kw("AS") {
		if alias, err = p.ident("a table alias"); err != nil {
			return nil, err
		}
	} else if t := p.peek(); t.kind == tIdent && (t.quoted || !reserved[strings.ToUpper(t.text)]) {
		alias = t.text
		p.i++
	}
	if t := p.peek(); t.op(",") || t.is("JOIN") || t.is("LEFT") || t.is("INNER") || t.is("CROSS") || t.is("NATURAL") ||
		t.is("RIGHT") || t.is("FULL") {
		return nil, p.errf(joinRefusal)
	}
	if p.kw("WHERE") {
		if sub.Where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if t := p.peek(); t.is("GROUP") || t.is("HAVING") || t.is("ORDER") || t.is("LIMIT") || t.is("WINDOW") ||
		t.is("UNION") || t.is("INTERSECT") || t.is("EXCEPT") {
		return nil, p.errf("%s in a CTE or subquery is not accepted: a CTE filters rows (WHERE) and selects columns; "+
			"grouping, ordering and limits belong to the DP SELECT", strings.ToUpper(t.text))
	}
	for _, q := range p.quals {
		if !strings.EqualFold(q, sub.Table) && !strings.EqualFold(q, alias) {
			return nil, &SyntaxError{Pos: sub.pos, Msg: fmt.Sprintf("column qualifier %q is not the subquery's FROM table %q", q, sub.Table)}
		}
	}
	return sub, nil
}

// aggRef reads an aggregate written in HAVING (after its name): COUNT(*)
// or AGG(col), which names the output of the same aggregate, its released
// (noisy) value.
func (p *parser) aggRef(name token) (Expr, error) {
	a := &AggRef{Agg: strings.ToUpper(name.text)}
	a.Distinct = p.kw("DISTINCT")
	if a.Distinct || !p.isOp("*") {
		c, _, err := p.column()
		if err != nil {
			return nil, err
		}
		a.Column = c
	}
	if !p.peek().op(")") {
		return nil, p.errf("in HAVING an aggregate names an output of the SELECT list (write %s(col) with nothing more, "+
			"or better its alias)", a.Agg)
	}
	p.next()
	return a, nil
}

func (p *parser) caseExpr() (Expr, error) {
	c := &Case{}
	if !p.peek().is("WHEN") {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Operand = x
	}
	for p.kw("WHEN") {
		w, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expectKw("THEN"); err != nil {
			return nil, err
		}
		th, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Whens = append(c.Whens, [2]Expr{w, th})
	}
	if len(c.Whens) == 0 {
		return nil, p.errf("CASE needs at least one WHEN")
	}
	if p.kw("ELSE") {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Else = x
	}
	return c, p.expectKw("END")
}

// joinStart reports whether t starts a join (or a comma join).
func joinStart(t token) bool {
	return t.op(",") || t.is("JOIN") || t.is("LEFT") || t.is("INNER") || t.is("CROSS") || t.is("NATURAL") ||
		t.is("RIGHT") || t.is("FULL")
}

// tableAlias reads an optional [AS] alias after a table name.
func (p *parser) tableAlias() (string, error) {
	if p.kw("AS") {
		return p.ident("a table alias")
	}
	if t := p.peek(); t.kind == tIdent && (t.quoted || !reserved[strings.ToUpper(t.text)]) && !joinStart(t) &&
		!t.is("RIGHT") && !t.is("FULL") && !t.is("OUTER") {
		p.next()
		return t.text, nil
	}
	return "", nil
}

// join reads what follows the FROM table: an optional alias and one
// [INNER] JOIN or LEFT [OUTER] JOIN with ON equalities of columns or USING
// (columns). Other joins, a second join, and a join after a CTE or a
// subquery are refused with what is accepted.
func (p *parser) join(st *Statement) error {
	alias, err := p.tableAlias()
	if err != nil {
		return err
	}
	t := p.peek()
	if !joinStart(t) {
		if alias != "" {
			return p.errf("table aliases are accepted with a join only")
		}
		return nil
	}
	if len(st.With) > 0 {
		return p.errf("%s (the joined tables are named directly, not through CTEs or subqueries)", joinRefusal)
	}
	j := &Join{}
	switch {
	case p.kw("INNER"):
		if err := p.expectKw("JOIN"); err != nil {
			return err
		}
	case p.kw("LEFT"):
		p.kw("OUTER")
		if err := p.expectKw("JOIN"); err != nil {
			return err
		}
		j.Left = true
	case p.kw("JOIN"):
	default:
		return p.errf("%s (%s joins are not accepted)", joinRefusal, strings.ToUpper(t.text))
	}
	if p.peek().op("(") {
		return p.errf("%s (a subquery is not accepted as the joined table)", joinRefusal)
	}
	if j.Table, err = p.ident("the joined table's name"); err != nil {
		return err
	}
	if p.peek().op(".") {
		return p.errf("schema-qualified tables are not accepted; name the public table alone")
	}
	if j.Alias, err = p.tableAlias(); err != nil {
		return err
	}
	switch {
	case p.kw("USING"):
		if err := p.expectOp("("); err != nil {
			return err
		}
		for {
			c, err := p.ident("a column name in USING")
			if err != nil {
				return err
			}
			j.Using = append(j.Using, c)
			if !p.isOp(",") {
				break
			}
		}
		if err := p.expectOp(")"); err != nil {
			return err
		}
	case p.kw("ON"):
		for {
			var pair [2]*Col
			for k := range pair {
				if k == 1 {
					if !p.isOp("=") && !p.isOp("==") {
						return p.errf("%s (ON takes equalities of two columns joined by AND)", joinRefusal)
					}
				}
				t := p.peek()
				if t.kind != tIdent || (!t.quoted && reserved[strings.ToUpper(t.text)]) || p.toks[p.i+1].op("(") {
					return p.errf("%s (ON takes equalities of two columns joined by AND)", joinRefusal)
				}
				n, q, err := p.column()
				if err != nil {
					return err
				}
				pair[k] = &Col{Name: n, Qual: q}
			}
			j.On = append(j.On, pair)
			if !p.kw("AND") {
				break
			}
		}
		if t := p.peek(); t.is("OR") || t.kind == tOp && t.text != ";" && t.text != ")" && t.text != "," {
			return p.errf("%s (ON takes equalities of two columns joined by AND)", joinRefusal)
		}
	default:
		return p.errf("%s (a join needs ON or USING)", joinRefusal)
	}
	st.Alias, st.Join = alias, j
	if joinStart(p.peek()) {
		return p.errf("%s (one join only)", joinRefusal)
	}
	return nil
}
