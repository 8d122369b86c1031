package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Joins with one public table. A DP statement may join its protected table
// (named directly) with ONE unprotected table of the main schema, public by
// the owner's choice (dpsql's own dp_* tables, sqlite_* tables, views,
// virtual tables and TEMP objects excluded; another protected table stays
// refused): FROM protected [AS p] [INNER | LEFT [OUTER]] JOIN public [AS q]
// ON p.a = q.b [AND ...] | USING (col, ...), before the one DP aggregation.
//
// The joined rows are the rows level's input: the rewrite reads them as the
// protected table's rows with the public columns added, and per-person
// bounding (max_rows rows in each of max_groups groups per person, or one
// row per person) applies after the join, so a public key repeated 100
// times adds at most max_rows rows per group for its person: the charge and
// sensitivities are exactly those of the unjoined statement with the same
// policy. A table without a privacy unit (each row a person), or whose unit
// is unique, is bounded by its rowid (or unit): one joined copy of a row in
// one group. Public columns may be read by WHERE and GROUP BY (partition
// selection, canonical keys); aggregates read the protected table's columns
// only (their bounds are its policy's).
//
// Running time: each protected row is compared with at most every public
// row (whatever plan SQLite picks: an index or a scan) and yields at most
// the public table's largest multiplicity of an ON key (read from the public
// table) joined rows, each of which costs the statement's per-row work and
// the copy of the public columns the statement reads, counted at their
// longest values (public; joincarry.go), and, when an ON key repeats, the
// protected columns it reads, each up to its max_length (guarded then); the
// product is refused above MaxRowWork. The protected ON columns are read
// only up to their max_length (rows whose value is longer are dropped).

// publicTable is what the engine read of the joined public table: its name
// as the schema spells it, its columns by lower-case name and its number of
// rows.
type publicTable struct {
	name string
	cols map[string]string
	rows int64
}

// joinPlan is a checked join.
type joinPlan struct {
	pub  *publicTable
	left bool
	// on are the equalities: the protected column and the public column,
	// as the schema spells them.
	on [][2]string
	// flat maps a public column's name in the joined rows (flat name) to
	// its schema spelling; reads are the public columns read.
	flat  map[string]string
	reads map[string]bool
	// rowUnit: the protected table has no privacy unit, or a unique one:
	// its rows are bounded one per person by unitSQL.
	mult   int64   // the largest multiplicity of an ON key in the public table
	onWork float64 // the work of one protected row's comparison with one public row
	// prot is set when the joined table is protected too (pjoin.go).
	prot *protJoin
	// index is the public table's index the join seeks, "" for the scan
	// bound (pubindex.go).
	index string
	// guardFrom: a protected row may join several public rows (mult > 1):
	// the protected columns the joined rows carry are guarded by their
	// max_length (joincarry.go).
	guardFrom bool
}

// joinUnit is the joined rows' person column when each protected row is a
// person.
const joinUnit = "_dp_person"

// joinRefusalf refuses a join, saying what is accepted.
func joinRefusalf(format string, args ...any) error {
	return refusef(format+"; a DP SELECT joins its protected table (named directly) with one public table of the main "+
		"schema: FROM protected [AS p] [INNER | LEFT [OUTER]] JOIN public [AS q] ON p.col = q.col [AND ...] | USING (col)", args...)
}

// join checks the statement's join (from step, after the protected table is
// known) and resolves every column the statement names to its flat name.
func (c *checker) join() error {
	st, j := c.st, c.st.Join
	if j == nil {
		return nil
	}
	lower := strings.ToLower(j.Table)
	var prot *protJoin
	for t, p := range c.policies {
		if strings.EqualFold(t, j.Table) {
			var err error
			if prot, err = c.samePersons(t, p); err != nil {
				return err
			}
		}
	}
	if strings.HasPrefix(lower, "dp_") || strings.HasPrefix(lower, "sqlite_") {
		return joinRefusalf("%s is one of dpsql's or SQLite's own tables, which are not joined", j.Table)
	}
	if c.pub == nil || !strings.EqualFold(c.pub.name, j.Table) {
		return joinRefusalf("no table %q in the main schema to join (views, virtual tables and TEMP tables are not joined)", j.Table)
	}
	pub := c.pub
	if _, ok := c.cols[strings.ToLower(joinUnit)]; ok {
		return joinRefusalf("%s has a column named %s, the name the join gives its persons", c.pl.table, joinUnit)
	}
	jp := &joinPlan{pub: pub, left: j.Left, flat: map[string]string{}, reads: map[string]bool{}, prot: prot}
	c.pl.join = jp
	pq := []string{c.pl.table}
	if st.Alias != "" {
		pq = []string{st.Alias}
	}
	qq := []string{pub.name}
	if j.Alias != "" {
		qq = []string{j.Alias}
	}
	if containsFold(qq, pq[0]) {
		return joinRefusalf("both tables are named %s: give one an alias", pq[0])
	}
	using := map[string]bool{}
	for _, u := range j.Using {
		using[strings.ToLower(u)] = true
	}
	flatName := func(col string) string {
		if _, clash := c.cols[strings.ToLower(col)]; !clash && !strings.EqualFold(col, joinUnit) {
			return col
		}
		return pub.name + "." + col
	}
	// resolve returns a column's name in the joined rows and whether it is
	// the public table's.
	resolve := func(name, qual, clause string) (string, bool, error) {
		l := strings.ToLower(name)
		pcol, inP := c.cols[l]
		qcol, inQ := pub.cols[l]
		switch {
		case qual != "" && containsFold(pq, qual):
			if !inP {
				return "", false, refusef("no column %q in %s (%s)", name, c.pl.table, clause)
			}
			return pcol, false, nil
		case qual != "" && containsFold(qq, qual):
			if !inQ {
				return "", false, refusef("no column %q in %s (%s)", name, pub.name, clause)
			}
		case qual != "":
			return "", false, refusef("the qualifier %s (%s) names neither %s nor %s", qual, clause, pq[0], qq[0])
		case inP && inQ && !using[l]:
			return "", false, refusef("column %q (%s) is in both %s and %s: qualify it (%s.%s or %s.%s)", name, clause,
				c.pl.table, pub.name, pq[0], name, qq[0], name)
		case inP:
			return pcol, false, nil
		case !inQ:
			return "", false, refusef("no column %q in %s or %s (%s)", name, c.pl.table, pub.name, clause)
		}
		f := flatName(qcol)
		_, clash := c.cols[strings.ToLower(f)]
		if other, ok := jp.flat[strings.ToLower(f)]; clash || ok && other != qcol {
			return "", false, joinRefusalf("column %s of %s would be read as %s, which names another column: ask the "+
				"owner to rename one", qcol, pub.name, f)
		}
		jp.flat[strings.ToLower(f)] = qcol
		jp.reads[strings.ToLower(qcol)] = true
		return f, true, nil
	}
	// The ON equalities (or USING's columns): a protected column with a
	// public one.
	for _, u := range j.Using {
		pcol, inP := c.cols[strings.ToLower(u)]
		qcol, inQ := pub.cols[strings.ToLower(u)]
		if !inP || !inQ {
			return joinRefusalf("USING (%s) names a column that is not in both %s and %s", u, c.pl.table, pub.name)
		}
		jp.on = append(jp.on, [2]string{pcol, qcol})
	}
	for _, eq := range j.On {
		var pair [2]string
		var pub2 [2]bool
		for k, col := range eq {
			n, isPub, err := resolve(col.Name, col.Qual, "ON")
			if err != nil {
				return err
			}
			pair[k], pub2[k] = n, isPub
			if isPub {
				pair[k] = jp.flat[strings.ToLower(n)]
			}
		}
		switch {
		case pub2[0] == pub2[1]:
			return joinRefusalf("ON %s = %s compares two columns of one table: each equality compares a column of %s with one of %s",
				eq[0].Name, eq[1].Name, c.pl.table, pub.name)
		case pub2[0]:
			pair[0], pair[1] = pair[1], pair[0]
		}
		jp.on = append(jp.on, pair)
	}
	for _, p := range jp.on {
		c.pl.reads[strings.ToLower(p[0])] = true
		jp.reads[strings.ToLower(p[1])] = true
	}
	if prot != nil {
		if err := c.onUnits(jp); err != nil {
			return err
		}
	}
	// Every column the statement names, by its name in the joined rows.
	var err error
	rename := func(e dpselect.Expr, clause string) dpselect.Expr {
		return dpselect.Rewrite(e, func(x dpselect.Expr) dpselect.Expr {
			if col, ok := x.(*dpselect.Col); ok && err == nil {
				var n string
				if n, _, err = resolve(col.Name, col.Qual, clause); err == nil {
					return &dpselect.Col{Name: n}
				}
			}
			return x
		})
	}
	for i := range st.Items {
		it := &st.Items[i]
		name := it.Name()
		switch {
		case it.Expr != nil:
			it.Expr = rename(it.Expr, "the SELECT list")
		case it.Column != "":
			var isPub bool
			var n string
			n, isPub, err = resolve(it.Column, it.Qual, "the SELECT list")
			if err == nil && isPub && it.Agg != "" && prot == nil {
				return refusef("%s reads %s, a column of the public table %s: aggregates read the protected table's columns only (their bounds are its policy's); GROUP BY or filter on public columns instead",
					it.Name(), it.Column, pub.name)
			}
			it.Column, it.Qual = n, ""
		}
		if err != nil {
			return err
		}
		if it.Alias == "" && it.Name() != name && it.Agg == "" {
			it.Alias = name
		}
	}
	for i, g := range st.GroupBy {
		if col, ok := g.(*dpselect.Col); ok && col.Qual == "" {
			_, inP := c.cols[strings.ToLower(col.Name)]
			_, inQ := pub.cols[strings.ToLower(col.Name)]
			if !inP && !inQ && c.itemAlias(col.Name) {
				continue // an output's alias, resolved by the GROUP BY step
			}
		}
		if st.GroupBy[i] = rename(g, "GROUP BY"); err != nil {
			return err
		}
	}
	if st.Where != nil {
		if st.Where = rename(st.Where, "WHERE"); err != nil {
			return err
		}
	}
	// The later steps read public columns by their flat names, as the
	// table's own (c.column); the plan's cols stay the protected table's.
	cols := make(map[string]string, len(c.cols)+len(jp.flat))
	for k, v := range c.cols {
		cols[k] = v
	}
	for k := range jp.flat {
		cols[k] = flatName(jp.flat[k])
	}
	if prot != nil {
		// The joined table's columns are read under their flat names, with
		// its policy's bounds, lengths and key lists.
		c.pl.policy = joinedPolicy(c.pl.policy, prot.policy, flatName)
	}
	c.cols = cols
	return nil
}

// joinedRows is the SQL of the joined rows, read by the rewrite's levels in
// place of the protected table: the protected columns the statement reads
// under their names, the public ones under their flat names, and the person
// (joinUnit) when each protected row is one.
func (pl *plan) joinedRows() string {
	jp := pl.join
	if jp.prot != nil {
		return pl.protectedJoinedRows() // pjoin.go
	}
	var l sqlList
	for _, c := range pl.cols {
		if pl.reads[strings.ToLower(c)] {
			l.add("_p." + dpselect.QuoteIdent(c))
		}
	}
	for f, q := range jp.flat {
		l.addf("_q.%s AS %s", dpselect.QuoteIdent(q), dpselect.QuoteIdent(pl.cols2flat(f)))
	}
	switch {
	case pl.policy.PrivacyUnit == "":
		l.addf("_p.%s AS %s", pl.rowidName(), joinUnit)
	case pl.unitUnique:
		l.addf("_p.%s AS %s", dpselect.QuoteIdent(pl.policy.PrivacyUnit), joinUnit)
	}
	op := "CROSS JOIN" // the protected table is the outer loop (no reordering)
	if jp.left {
		op = "LEFT JOIN"
	}
	var on, guards []string
	for _, p := range jp.on {
		on = append(on, fmt.Sprintf("_p.%s = _q.%s", dpselect.QuoteIdent(p[0]), dpselect.QuoteIdent(p[1])))
		guards = append(guards, fmt.Sprintf("(octet_length(_p.%s) > %d) IS NOT 1", dpselect.QuoteIdent(p[0]), pl.policy.maxLength(p[0])))
	}
	if jp.guardFrom { // a protected row may be copied into several joined rows (joincarry.go)
		done := map[string]bool{}
		for _, p := range jp.on {
			done[strings.ToLower(p[0])] = true
		}
		guards = append(guards, carriedGuards("_p", pl.fromCarried(), done)...)
	}
	indexed := ""
	if jp.index != "" { // a seek on the public table's index (pubindex.go)
		indexed = " INDEXED BY " + dpselect.QuoteIdent(jp.index)
	}
	return fmt.Sprintf("(SELECT %s FROM main.%s AS _p %s main.%s AS _q%s ON %s WHERE %s)", l.String(),
		dpselect.QuoteIdent(pl.table), op, dpselect.QuoteIdent(jp.pub.name), indexed, strings.Join(on, " AND "),
		strings.Join(guards, " AND "))
}

// cols2flat returns the flat name spelled as the checker gave it.
func (pl *plan) cols2flat(lowerFlat string) string {
	q := pl.join.flat[lowerFlat]
	if _, clash := pl.cols[strings.ToLower(q)]; !clash && !strings.EqualFold(q, joinUnit) {
		return q
	}
	return pl.join.pub.name + "." + q
}

// rowidName is a name of the protected table's rowid that no column
// shadows.
func (pl *plan) rowidName() string {
	for _, n := range []string{"rowid", "_rowid_", "oid"} {
		if _, ok := pl.cols[n]; !ok {
			return n
		}
	}
	return "rowid" // refused by joinSchema
}

// readPublicTable reads the joined table's schema for the checker: nil when
// it is not a plain table of the main schema.
//
// A protected joined table's rows are not counted (count false: its size is
// not public); rows is then -1.
func readPublicTable(ctx context.Context, conn *sql.Conn, name string, count bool) (*publicTable, error) {
	var tname, sqlText string
	err := conn.QueryRowContext(ctx, `SELECT name, coalesce(sql, '') FROM main.sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE`, name).Scan(&tname, &sqlText)
	if err == sql.ErrNoRows || strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sqlText)), "CREATE VIRTUAL") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cols, err := tableColumns(ctx, conn, tname)
	if err != nil {
		return nil, err
	}
	pt := &publicTable{name: tname, cols: cols, rows: -1}
	if !count {
		return pt, nil
	}
	if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM main.%s`, dpselect.QuoteIdent(tname))).Scan(&pt.rows); err != nil {
		return nil, err
	}
	return pt, nil
}

// boundJoinWork reads the public table's largest multiplicity of an ON key
// and its keys' lengths, and refuses the statement when a protected row's
// work exceeds MaxRowWork: its comparison with every public row (a scan, the
// costliest plan SQLite may pick) in each pass, then the per-row work of
// each of its joined rows. It also refuses a protected table whose rowid is
// shadowed when rows are persons.
func (pl *plan) boundJoinWork(ctx context.Context, conn *sql.Conn) error {
	jp := pl.join
	if jp == nil {
		return nil
	}
	if jp.prot != nil {
		return pl.boundProtectedJoin(ctx, conn) // pjoin.go
	}
	if pl.policy.PrivacyUnit == "" {
		// The authorizer names an INTEGER PRIMARY KEY column when the rowid
		// is read: the rows' persons are read through it.
		var ipk sql.NullString
		err := conn.QueryRowContext(ctx, `SELECT max(name) FROM pragma_table_info(?, 'main') WHERE pk = 1 AND upper(type) = 'INTEGER'
			AND (SELECT count(*) FROM pragma_table_info(?, 'main') WHERE pk > 0) = 1`, pl.table, pl.table).Scan(&ipk)
		if err != nil {
			return err
		}
		if ipk.Valid {
			pl.reads[strings.ToLower(ipk.String)] = true
		}
		rows, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM main.%s LIMIT 0", pl.rowidName(), dpselect.QuoteIdent(pl.table)))
		if err == nil {
			rows.Close()
		} else {
			return joinRefusalf("%s has no rowid (WITHOUT ROWID, or columns named rowid, _rowid_ and oid) and no privacy unit: its rows cannot be bounded one per person after the join", pl.table)
		}
	}
	var keys, lens []string
	for _, p := range jp.on {
		q := dpselect.QuoteIdent(p[1])
		keys = append(keys, q)
		lens = append(lens, fmt.Sprintf("coalesce(max(octet_length(%s)), 0)", q))
	}
	var mult sql.NullInt64
	t := dpselect.QuoteIdent(jp.pub.name)
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT max(c) FROM (SELECT count(*) AS c FROM main.%s GROUP BY %s)",
		t, strings.Join(keys, ", "))).Scan(&mult); err != nil {
		return fmt.Errorf("reading the multiplicity of %s's join keys: %w", jp.pub.name, err)
	}
	jp.mult = max(mult.Int64, 1)
	// The multiplicity counts the public keys as GROUP BY compares them:
	// ON compares them so only when both sides have the same affinity and
	// collation (pubindex.go); otherwise any public row may match.
	alike, err := pl.onAlike(ctx, conn)
	if err != nil {
		return err
	}
	for _, a := range alike {
		if !a {
			jp.mult = max(jp.pub.rows, 1)
		}
	}
	row, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM main.%s", strings.Join(lens, ", "), t))
	if err != nil {
		return err
	}
	defer row.Close()
	vals := make([]any, len(lens))
	ptrs := make([]any, len(lens))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if row.Next() {
		if err := row.Scan(ptrs...); err != nil {
			return err
		}
	}
	jp.onWork = 0
	for i, p := range jp.on {
		// A comparison reads the public value and the protected one (up to
		// its max_length), converting it to a number at worst.
		jp.onWork += float64(asInt(vals[i])) + float64(pl.policy.maxLength(p[0])) + numberBytes
	}
	passes := 1.0
	for _, a := range pl.aggs {
		if a.ownQuery() {
			passes++
		}
	}
	// Each joined row carries the public columns the statement reads, at
	// their longest values (public data), and, when a protected row may
	// join more than one public row, the protected columns it reads, each
	// up to its max_length (guarded in joinedRows; joincarry.go): a long
	// protected value is not copied mult times.
	pubCols, err := jp.publicCarried(ctx, conn)
	if err != nil {
		return err
	}
	var fromCols []carried
	if jp.guardFrom = jp.mult > 1; jp.guardFrom {
		fromCols = pl.fromCarried()
	}
	copyWork := carriedWork(pubCols, fromCols)
	perJoined := pl.rowWork + copyWork
	lookup := passes * float64(jp.pub.rows) * jp.onWork
	work := lookup + float64(jp.mult)*perJoined
	if work > MaxRowWork || math.IsNaN(work) {
		// A seek on an index of the public table instead of a scan
		// (pubindex.go), when one fits.
		iw, err := pl.indexedJoinWork(ctx, conn, alike, vals, passes, perJoined)
		if err != nil {
			return err
		}
		if iw < work {
			work = iw
		}
	}
	if work > MaxRowWork || math.IsNaN(work) {
		var cols []string
		for _, c := range pubCols {
			cols = append(cols, fmt.Sprintf("%s.%s (longest %.0f bytes)", jp.pub.name, c.col, c.bytes))
		}
		cols = append(cols, carriedNames(pl.table, fromCols)...)
		return refusef("the join may do about %.3g units of work per protected row (about a nanosecond each), over the limit "+
			"of %d (protect.MaxRowWork): %s has %d rows, each compared at about %.3g units, one ON key repeats %d times, "+
			"and each joined row carries the columns the statement reads, public ones at their longest values and, "+
			"when a key repeats, protected ones at their max_length (%.3g units: %s); join a smaller public table, read "+
			"fewer or shorter columns, ask the owner for an index on its ON column (CREATE INDEX ... ON %s(col), with "+
			"the protected column's type and collation), or lower the protected columns' max_length in the policy", work, MaxRowWork, jp.pub.name, jp.pub.rows, jp.onWork, jp.mult, copyWork,
			strings.Join(cols, ", "), dpselect.QuoteIdent(jp.pub.name))
	}
	pl.rowWork = work
	return nil
}
