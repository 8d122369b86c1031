package protect

import (
	"sort"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// CTEs and subqueries in FROM. A DP statement may read its protected table
// through CTEs (WITH adults AS (SELECT pid, age, bmi FROM patients WHERE age
// >= 18) SELECT WITH DIFFERENTIAL_PRIVACY ... FROM adults) and subqueries in
// FROM that filter its rows (WHERE) and select its columns, renamed or not
// (col AS name, *), each over the table or an earlier CTE. Such a source is
// a filter and a renaming of the protected table's rows: every row it gives
// is one row of the table, of the same person. So the checker inlines it:
// the statement's names are replaced by the table's columns, and the
// sources' conditions are ANDed to WHERE; what remains is a statement over
// the protected table alone, checked, bounded per person, costed and
// rewritten exactly as one written that way (its sensitivity is that
// statement's). The privacy unit must pass through under its own name: a
// source that drops it or renames it (or names another column after it) is
// refused, since the bounding reads persons by it. Computed columns in a
// source, joins, grouping, ordering and limits inside it are refused with
// what to write instead.

// source is what a name in FROM stands for: the protected table's rows
// under a filter, with visible names for some of its columns.
type source struct {
	cols  map[string]string // lower-case visible name -> the table's column (as the schema spells it)
	where dpselect.Expr     // over the table's columns; nil for none
}

// inlineSources replaces the statement's CTEs and subquery in FROM by the
// table under them (run first by the from step).
func (c *checker) inlineSources() error {
	st := c.st
	if len(st.With) == 0 {
		return nil
	}
	outer, base := st.Table, st.BaseTable()
	if strings.EqualFold(outer, base) && !namesCTE(st.With, outer) {
		return nil // the CTEs are not read: the statement reads the table itself
	}
	protected := false
	for t := range c.policies {
		protected = protected || strings.EqualFold(t, base)
	}
	if !protected {
		st.Table = base // the FROM step refuses it, naming the table
		return nil
	}
	src, err := c.resolveSource(outer, len(st.With))
	if err != nil {
		return err
	}
	if err := c.unitPassesThrough(outer, base, src); err != nil {
		return err
	}
	rename := func(name, clause string) (string, error) {
		col, ok := src.cols[strings.ToLower(name)]
		if !ok {
			return "", refusef("no column %q in %s (%s); its columns are %s", name, outer, clause, visibleNames(src))
		}
		return col, nil
	}
	renameExpr := func(e dpselect.Expr, clause string) (dpselect.Expr, error) {
		var err error
		e = dpselect.Rewrite(e, func(x dpselect.Expr) dpselect.Expr {
			if col, ok := x.(*dpselect.Col); ok && err == nil {
				var n string
				if n, err = rename(col.Name, clause); err == nil {
					return &dpselect.Col{Name: n}
				}
			}
			return x
		})
		return e, err
	}
	for i := range st.Items {
		it := &st.Items[i]
		name := it.Name()
		switch {
		case it.Expr != nil:
			if it.Expr, err = renameExpr(it.Expr, "the SELECT list"); err != nil {
				return err
			}
		case it.Column != "":
			if it.Column, err = rename(it.Column, "the SELECT list"); err != nil {
				return err
			}
		}
		if it.Alias == "" && it.Name() != name {
			it.Alias = name // the output keeps the name the statement gives it
		}
	}
	for i, g := range st.GroupBy {
		if col, ok := g.(*dpselect.Col); ok {
			if _, visible := src.cols[strings.ToLower(col.Name)]; !visible && c.itemAlias(col.Name) {
				continue // an output's alias, resolved by the GROUP BY step
			}
		}
		if st.GroupBy[i], err = renameExpr(g, "GROUP BY"); err != nil {
			return err
		}
	}
	if st.Where != nil {
		if st.Where, err = renameExpr(st.Where, "WHERE"); err != nil {
			return err
		}
	}
	if st.Having != nil { // an aggregate in HAVING names its output by the source's column names
		st.Having = dpselect.Rewrite(st.Having, func(x dpselect.Expr) dpselect.Expr {
			if a, ok := x.(*dpselect.AggRef); ok && a.Column != "" {
				if col, ok := src.cols[strings.ToLower(a.Column)]; ok {
					return &dpselect.AggRef{Agg: a.Agg, Column: col, Distinct: a.Distinct}
				}
			}
			return x
		})
	}
	st.Where = and(src.where, st.Where)
	st.Table = base
	st.With = nil
	return nil
}

// namesCTE reports whether name is one of the CTEs (or the subquery in
// FROM): a source named like its table (FROM (SELECT ... FROM patients WHERE
// ...) AS patients, or a chain of CTEs ending in one named patients) is that
// source, filter included, not the table.
func namesCTE(with []dpselect.CTE, name string) bool {
	for _, cte := range with {
		if strings.EqualFold(cte.Name, name) {
			return true
		}
	}
	return false
}

// itemAlias reports whether name is the alias of a SELECT-list item.
func (c *checker) itemAlias(name string) bool {
	for _, it := range c.st.Items {
		if strings.EqualFold(it.Alias, name) {
			return true
		}
	}
	return false
}

// resolveSource returns what name stands for in FROM, seeing the CTEs
// defined before index upto: a CTE, or the table itself.
func (c *checker) resolveSource(name string, upto int) (*source, error) {
	for i := upto - 1; i >= 0; i-- {
		cte := c.st.With[i]
		if strings.EqualFold(cte.Name, name) {
			return c.resolveCTE(cte, i)
		}
	}
	cols := make(map[string]string, len(c.cols))
	for k, v := range c.cols {
		cols[k] = v
	}
	return &source{cols: cols}, nil
}

// resolveCTE resolves CTE i: its columns over its own source, and its filter
// ANDed to that source's.
func (c *checker) resolveCTE(cte dpselect.CTE, i int) (*source, error) {
	in, err := c.resolveSource(cte.Body.Table, i)
	if err != nil {
		return nil, err
	}
	out := &source{cols: map[string]string{}}
	add := func(name, col string) error {
		k := strings.ToLower(name)
		if prev, dup := out.cols[k]; dup && prev != col {
			return refusef("CTE %s names two columns %s: give them distinct names", cte.Name, name)
		}
		out.cols[k] = col
		return nil
	}
	for _, it := range cte.Body.Items {
		switch {
		case it.Star:
			for k, v := range in.cols {
				if err := add(k, v); err != nil {
					return nil, err
				}
			}
		case it.Expr != nil:
			return nil, refusef("CTE %s computes %s: a CTE or subquery selects and renames columns (col AS name) and "+
				"filters rows; compute in the DP SELECT, whose GROUP BY and WHERE take expressions of the columns",
				cte.Name, dpselect.String(it.Expr))
		default:
			col, ok := in.cols[strings.ToLower(it.Column)]
			if !ok {
				return nil, refusef("no column %q in %s (CTE %s); its columns are %s", it.Column, cte.Body.Table,
					cte.Name, visibleNames(in))
			}
			name := it.Column
			if it.Alias != "" {
				name = it.Alias
			}
			if err := add(name, col); err != nil {
				return nil, err
			}
		}
	}
	out.where = in.where
	if w := cte.Body.Where; w != nil {
		var err error
		w = dpselect.Rewrite(w, func(x dpselect.Expr) dpselect.Expr {
			col, ok := x.(*dpselect.Col)
			if !ok || err != nil {
				return x
			}
			base, visible := in.cols[strings.ToLower(col.Name)]
			if !visible {
				err = refusef("no column %q in %s (WHERE of CTE %s); its columns are %s", col.Name, cte.Body.Table,
					cte.Name, visibleNames(in))
				return x
			}
			return &dpselect.Col{Name: base}
		})
		if err != nil {
			return nil, err
		}
		out.where = and(out.where, w)
	}
	return out, nil
}

// unitPassesThrough checks that the source keeps the policy's privacy unit
// under its own name.
func (c *checker) unitPassesThrough(outer, base string, src *source) error {
	var unit string
	for t, p := range c.policies {
		if strings.EqualFold(t, base) {
			unit = p.PrivacyUnit
		}
	}
	if unit == "" {
		return nil // each row is a person: nothing to carry
	}
	visible, ok := src.cols[strings.ToLower(unit)]
	switch {
	case ok && strings.EqualFold(visible, unit):
		return nil
	case ok:
		return refusef("%s names column %s after %s's privacy unit %s: keep the privacy unit as it is "+
			"(SELECT %s, ...), since each person's rows are bounded by it", outer, visible, base, unit, unit)
	}
	for name, col := range src.cols {
		if strings.EqualFold(col, unit) {
			return refusef("%s renames %s's privacy unit %s to %s: keep it under its own name (SELECT %s, ...), "+
				"since each person's rows are bounded by it", outer, base, unit, name, unit)
		}
	}
	return refusef("%s drops %s's privacy unit %s: select it (SELECT %s, ...), since each person's rows are bounded by it",
		outer, base, unit, unit)
}

// and returns a AND b, either possibly nil.
func and(a, b dpselect.Expr) dpselect.Expr {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return &dpselect.Binary{Op: "AND", L: a, R: b}
}

// visibleNames lists a source's names for a refusal.
func visibleNames(s *source) string {
	names := make([]string, 0, len(s.cols))
	for k := range s.cols {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
