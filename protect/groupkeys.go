package protect

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// GROUP BY keys. A key is a column of the table or an expression of its
// columns that cannot fail (a computed key: age / 10 * 10, CAST(x AS
// INTEGER), substr(zip, 1, 3), round(x, -1), strftime('%Y', d)), written in
// GROUP BY as the expression, as the alias of a SELECT-list expression, or
// as its 1-based position; a SELECT-list key must be a GROUP BY key, written
// the same way (compared after parsing: spacing, case and parentheses do not
// matter).
//
// A computed key is a function of one row, so per-person bounding and the
// partition selection treat it exactly as a column key: a person adds at
// most max_rows rows to at most max_groups groups whatever the key, and a
// group is released only if its noisy count of persons passes the
// threshold. Its value is released in a canonical form (keys.go): an
// integral REAL is its INTEGER (an expression's value has no affinity: 30
// and 30.0 group together, and which one SQLite would print depends on the
// rows), and text is folded as the collation it inherits demands (SQLite
// gives an expression the collation of a column only through CAST and
// unary +; any other expression compares as BINARY).
//
// The owner's public key lists are lists of a column's values: they do not
// list the values of an expression, so a statement with a computed key
// selects its groups privately (partition selection), even when its other
// keys have lists.

// keyInfo is what the plan knows of GROUP BY key i beyond its name.
type keyInfo struct {
	expr dpselect.Expr // the computed key, columns as the schema spells them; nil for a column
	// inherit is the column whose collation the computed key compares with
	// (through CAST and unary +), "" for none (BINARY).
	inherit string
}

// groupBy checks the GROUP BY keys (each once) and finds their public key
// lists. Without GROUP BY a person contributes to the one group.
func (c *checker) groupBy() error {
	pl := c.pl
	for _, g := range c.st.GroupBy {
		name, info, err := c.groupKey(g)
		if err != nil {
			return err
		}
		for _, k := range pl.keys {
			if k == name {
				return refusef("GROUP BY names %s twice", name)
			}
		}
		pl.keys = append(pl.keys, name)
		pl.keyInfo = append(pl.keyInfo, info)
	}
	if len(pl.keys) == 0 {
		pl.maxGroups = 1
	}
	return c.publicKeys()
}

// groupKey resolves one GROUP BY term to its key: a column (by name first),
// the expression of a SELECT-list key by its alias or position, or a
// computed key. It returns the key's name (the column as the schema spells
// it, or the expression's SQL) and what else the plan needs.
func (c *checker) groupKey(g dpselect.Expr) (string, keyInfo, error) {
	switch e := g.(type) {
	case *dpselect.Col:
		if _, ok := c.cols[strings.ToLower(e.Name)]; ok {
			col, err := c.column(e.Name, "GROUP BY")
			return col, keyInfo{}, err
		}
		for _, it := range c.st.Items {
			switch {
			case it.Agg != "" || !strings.EqualFold(it.Alias, e.Name):
			case it.Expr != nil:
				return c.computedKey(it.Expr)
			default: // the alias of a column key (sex AS s ... GROUP BY s)
				col, err := c.column(it.Column, "GROUP BY")
				return col, keyInfo{}, err
			}
		}
		_, err := c.column(e.Name, "GROUP BY")
		return "", keyInfo{}, err
	case *dpselect.Lit:
		if e.Kind == "number" {
			n, err := strconv.Atoi(e.Text)
			if err != nil || n < 1 || n > len(c.st.Items) {
				return "", keyInfo{}, refusef("GROUP BY %s: a position in GROUP BY is between 1 and %d (the SELECT list)",
					e.Text, len(c.st.Items))
			}
			it := c.st.Items[n-1]
			switch {
			case it.Agg != "":
				return "", keyInfo{}, refusef("GROUP BY %d names %s, an aggregate: group by keys only", n, it.Name())
			case it.Expr != nil:
				return c.computedKey(it.Expr)
			}
			col, err := c.column(it.Column, "GROUP BY")
			return col, keyInfo{}, err
		}
	}
	return c.computedKey(g)
}

// computedKey checks a computed key: columns of the table and functions
// that cannot fail, as in WHERE.
func (c *checker) computedKey(e dpselect.Expr) (string, keyInfo, error) {
	if col, ok := e.(*dpselect.Col); ok { // (x), or an alias of a plain column
		name, err := c.column(col.Name, "GROUP BY")
		return name, keyInfo{}, err
	}
	e, err := c.safeExpr(e, "GROUP BY")
	if err != nil {
		return "", keyInfo{}, err
	}
	return dpselect.String(e), keyInfo{expr: e, inherit: inheritedCollation(e)}, nil
}

// safeExpr checks an expression of the table's columns (WHERE, a computed
// key): its columns exist (respelled as the schema spells them) and its
// functions cannot fail. round(x, -k) is read as BigQuery reads it, x
// rounded to a multiple of 10^k (SQLite's round() would ignore a negative
// number of digits): round(x / 1e k) * 1e k. It returns the expression to
// use.
func (c *checker) safeExpr(e dpselect.Expr, clause string) (dpselect.Expr, error) {
	e = dpselect.Rewrite(e, bigQueryRound)
	var err error
	dpselect.Walk(e, func(x dpselect.Expr) {
		if err == nil {
			err = c.safeTerm(x, clause)
		}
	})
	return e, err
}

// safeTerm checks one node of an expression of clause.
func (c *checker) safeTerm(e dpselect.Expr, clause string) error {
	switch e := e.(type) {
	case *dpselect.Col:
		col, err := c.column(e.Name, clause)
		if err != nil {
			return err
		}
		e.Name = col
	case *dpselect.AggRef:
		return refusef("aggregates are not accepted in %s", clause)
	case *dpselect.Call:
		n, ok := safeFunctions[e.Name]
		if !ok {
			return refusef("function %s() is not allowed in %s: "+
				"only functions that cannot fail on any input are (%s)", e.Name, clause, safeList())
		}
		if len(e.Args) < n {
			return refusef("%s() needs at least %d arguments here", e.Name, n)
		}
		if e.Name == "strftime" {
			if lit, ok := e.Args[0].(*dpselect.Lit); !ok || lit.Kind != "string" || len(e.Args) != 2 {
				return refusef("strftime() takes two arguments here, a format literal and a value " +
					"(as in strftime('%%Y', d)); modifiers are not accepted ('localtime' can fail)")
			}
		}
	}
	return nil
}

// bigQueryRound turns round(x, -k), k a positive integer literal, into
// round(x / 1ek) * 1ek.
func bigQueryRound(e dpselect.Expr) dpselect.Expr {
	call, ok := e.(*dpselect.Call)
	if !ok || call.Name != "round" || len(call.Args) != 2 {
		return e
	}
	n, ok := literalNumber(call.Args[1])
	if !ok || n >= 0 || n != float64(int(n)) || n < -300 {
		return e
	}
	p := &dpselect.Lit{Kind: "number", Text: "1e" + strconv.Itoa(int(-n))}
	return &dpselect.Binary{Op: "*", L: &dpselect.Call{Name: "round",
		Args: []dpselect.Expr{&dpselect.Binary{Op: "/", L: call.Args[0], R: p}}}, R: p}
}

// inheritedCollation returns the column whose collation SQLite gives e:
// a column, seen through CAST and unary +; "" for none.
func inheritedCollation(e dpselect.Expr) string {
	for {
		switch x := e.(type) {
		case *dpselect.Col:
			return x.Name
		case *dpselect.Cast:
			e = x.X
		case *dpselect.Unary:
			if x.Op != "+" {
				return ""
			}
			e = x.X
		default:
			return ""
		}
	}
}

// computedKeyItem checks a SELECT-list expression: it must be a computed
// GROUP BY key, and returns its index among the keys.
func (c *checker) computedKeyItem(it dpselect.Item) (int, error) {
	e, err := c.safeExpr(it.Expr, "the SELECT list")
	if err != nil {
		return -1, err
	}
	name := dpselect.String(e)
	for i, k := range c.pl.keys {
		if c.pl.keyInfo[i].expr != nil && k == name {
			return i, nil
		}
	}
	return -1, refusef("%s is neither a GROUP BY key nor a DP aggregate: a computed key is selected and grouped by "+
		"the same expression (SELECT %s AS k, COUNT(*) AS n ... GROUP BY %s, or GROUP BY k)", name, name, name)
}

// readKeyForms reads the forms of the plan's GROUP BY keys, by key name: a
// column's declared affinity and collation; for a computed key no affinity
// (its value's type is its own) and the collation it inherits, or BINARY.
func (pl *plan) readKeyForms(ctx context.Context, conn *sql.Conn) (map[string]KeyForm, error) {
	var cols []string
	for i, k := range pl.keys {
		switch {
		case pl.keyInfo[i].expr == nil:
			cols = append(cols, k)
		case pl.keyInfo[i].inherit != "":
			cols = append(cols, pl.keyInfo[i].inherit)
		}
	}
	var own, pubCols []string
	for _, c := range cols {
		if pl.join != nil && pl.join.flat[strings.ToLower(c)] != "" {
			pubCols = append(pubCols, pl.join.flat[strings.ToLower(c)])
		} else {
			own = append(own, c)
		}
	}
	colForms, err := readKeyForms(ctx, conn, pl.table, own)
	if err != nil {
		return nil, err
	}
	if len(pubCols) > 0 { // public columns of a join (join.go), by their flat names
		pubForms, err := readKeyForms(ctx, conn, pl.join.pub.name, pubCols)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if q := pl.join.flat[strings.ToLower(c)]; q != "" {
				colForms[c] = pubForms[q]
			}
		}
	}
	forms := make(map[string]KeyForm, len(pl.keys))
	for i, k := range pl.keys {
		switch info := pl.keyInfo[i]; {
		case info.expr == nil:
			forms[k] = colForms[k]
		case info.inherit != "":
			forms[k] = KeyForm{Affinity: "BLOB", Collation: colForms[info.inherit].Collation}
		default:
			forms[k] = KeyForm{Affinity: "BLOB", Collation: "BINARY"}
		}
	}
	return forms, nil
}

// keySQL returns the SQL of key i's value for one row (before its canonical
// form): the column, or the computed key's expression.
func (pl *plan) keySQL(i int) string {
	if i < len(pl.keyInfo) && pl.keyInfo[i].expr != nil {
		return pl.keys[i]
	}
	return dpselect.QuoteIdent(pl.keys[i])
}

// computedKeys reports whether a GROUP BY key is an expression.
func (pl *plan) computedKeys() bool {
	for _, info := range pl.keyInfo {
		if info.expr != nil {
			return true
		}
	}
	return false
}

var _ = fmt.Sprintf
