package protect

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// The columns a joined row carries. A joined row copies the values of the
// columns the statement reads from both tables (GROUP BY keys, aggregates'
// inputs, WHERE's columns, the units), and every later level sorts, groups
// and canonicalises those copies. A row of the FROM table is copied into up
// to K joined rows (a protected joined table) or the public table's largest
// multiplicity of an ON key, and a row of the joined protected table into
// one joined row per row of its person in the FROM table: a long value
// would be read once per copy, a product of two data values. So inside the
// join every carried column that may hold more than a number is guarded by
// its max_length, as the ON columns are (a row whose value is longer is
// dropped before anything reads it, the rule WHERE's columns follow), and
// each joined row's work counts the carried columns at their max_length (a
// number's size for a column the schema says holds numbers only; a public
// column at its longest value, read from the public table).

// carried is one column a joined row carries: its name in its table, the
// bytes it may hold and whether the join must guard it.
type carried struct {
	col   string
	bytes float64
	guard bool
}

// fromCarried returns the FROM table's columns the joined rows carry, in a
// fixed order, with their bounds.
func (pl *plan) fromCarried() []carried {
	var out []carried
	for _, c := range pl.cols {
		if !pl.reads[strings.ToLower(c)] {
			continue
		}
		if pl.facts.NumberOnly[c] {
			out = append(out, carried{col: c, bytes: numberBytes})
		} else {
			out = append(out, carried{col: c, bytes: float64(pl.policy.maxLength(c)), guard: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].col < out[j].col })
	return out
}

// joinedCarried returns the joined protected table's columns the joined
// rows carry (jp.flat), in a fixed order, with their bounds.
func (pj *protJoin) joinedCarried(jp *joinPlan) []carried {
	var out []carried
	for _, f := range jp.flat {
		if pj.numberOnly[f] {
			out = append(out, carried{col: f, bytes: numberBytes})
		} else {
			out = append(out, carried{col: f, bytes: float64(pj.policy.maxLength(f)), guard: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].col < out[j].col })
	return out
}

// carriedWork is the work of copying the carried columns into one joined
// row: each column's bytes and a number's size of overhead.
func carriedWork(cs ...[]carried) float64 {
	w := float64(numberBytes)
	for _, l := range cs {
		for _, c := range l {
			w += c.bytes + numberBytes
		}
	}
	return w
}

// carriedNames lists the guarded columns, as table.col, for a refusal.
func carriedNames(table string, cs []carried) []string {
	var out []string
	for _, c := range cs {
		if c.guard {
			out = append(out, fmt.Sprintf("%s.%s (%.0f bytes)", table, c.col, c.bytes))
		}
	}
	return out
}

// carriedGuards returns the guards of the columns, on the alias t, leaving
// out those in done (lower-case names), which it updates.
func carriedGuards(t string, cs []carried, done map[string]bool) []string {
	var out []string
	for _, c := range cs {
		if !c.guard || done[strings.ToLower(c.col)] {
			continue
		}
		done[strings.ToLower(c.col)] = true
		out = append(out, fmt.Sprintf("(octet_length(%s.%s) > %.0f) IS NOT 1", t, dpselect.QuoteIdent(c.col), c.bytes))
	}
	return out
}

// publicCarried reads the longest value of each public column the joined
// rows carry (public data: the public table's own lengths), in a fixed
// order.
func (jp *joinPlan) publicCarried(ctx context.Context, conn *sql.Conn) ([]carried, error) {
	var names []string
	for _, f := range jp.flat {
		names = append(names, f)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, nil
	}
	var lens []string
	for _, n := range names {
		lens = append(lens, fmt.Sprintf("coalesce(max(octet_length(%s)), 0)", dpselect.QuoteIdent(n)))
	}
	vals := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM main.%s", strings.Join(lens, ", "),
		dpselect.QuoteIdent(jp.pub.name))).Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("reading the lengths of %s's columns: %w", jp.pub.name, err)
	}
	out := make([]carried, len(names))
	for i, n := range names {
		out[i] = carried{col: n, bytes: float64(asInt(vals[i]))}
	}
	return out, nil
}
