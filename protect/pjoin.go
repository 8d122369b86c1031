package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Joins of two protected tables on a shared privacy unit. A DP statement may
// join its protected table A (the FROM table) with a second protected table
// B when the owner declared, in both policies, that their privacy units
// identify the same persons (Policy.Persons: the same name in both), on an
// ON condition that contains the equality of the two units (A.unit =
// B.unit, possibly AND further column equalities), INNER or LEFT:
//
//	FROM visits AS v JOIN patients AS p ON v.pid = p.pid [AND ...]
//
// Neighbouring databases differ in all the rows of one person in both
// tables. A joined row pairs a row of A with a row of B whose unit is equal,
// under a comparison that is the one both tables group their units by (the
// two unit columns must have the same affinity and the same collation,
// BINARY or NOCASE, so that SQLite converts neither side), so both rows are
// the same person's, and the joined row carries A's unit. Per-person
// bounding (at most max_rows rows in each of at most max_groups groups) runs
// after the join, on A's unit, with the stricter of the two policies'
// max_rows and max_groups: the sensitivities and the charge are those of a
// statement over one table with those bounds. Aggregates may read the
// columns of either table, each with its own policy's bounds; GROUP BY keys
// of either table obey the usual key rules.
//
// Running time. A person may hold any number of rows in each table, and a
// plain join would pair each of their r_a rows of A with each of their r_b
// rows of B. The rewrite instead joins each row of A with at most K rows of
// its person in B, the first K in the order of an index on B's unit (or the
// one row of its INTEGER PRIMARY KEY), found by an index seek:
//
//	main.A AS _p [CROSS | LEFT] JOIN main.B AS _q INDEXED BY idx
//	  ON _q.u = _p.u AND _q.rowid IN (SELECT _i.rowid FROM main.B AS _i INDEXED BY idx WHERE _i.u = _p.u LIMIT K)
//
// so a row of A costs at most K + 1 seeks (each about log2 of B's rows
// comparisons of the unit, bounded by A's unit's max_length) and K joined
// rows, each the statement's per-row work and the copy of the columns it
// carries from both tables, each at its max_length and guarded by it inside
// the join (joincarry.go): a public bound, refused above MaxRowWork. B's rows are read only through these seeks. K is the
// statement's max_rows times max_groups (the most joined rows a person can
// keep), lowered to fit MaxRowWork. The plan is checked before the charge
// (EXPLAIN QUERY PLAN must show the seek, never a scan of B).

// protJoin is the part of a join plan specific to a protected joined table.
type protJoin struct {
	policy Policy // the joined table's policy, as the owner wrote it
	unit   string // the joined table's privacy unit, as its schema spells it
	// Set from the schema (boundProtectedJoin): the index on the unit (""
	// when the unit is the INTEGER PRIMARY KEY), the joined table's rowid
	// name, and K, the rows of B each row of A joins at most.
	index, rowid string
	k            int
	// unique: the index is UNIQUE on the unit alone (or the unit is the
	// rowid): each row of A joins at most one row of B.
	unique bool
	// numberOnly are B's columns its schema says hold numbers only
	// (joincarry.go: carried unguarded, at a number's size).
	numberOnly map[string]bool
}

// What checkJoinPlan requires of the joined table's access.
const (
	seekPublic    = iota // a public table: a seek of its INDEXED BY index
	seekRows             // a protected table: a seek of (unit, rowid) or of the rowid, at most K rows
	seekUniqueRow        // a protected table whose unit has a unique index: a seek of that index
)

// seekMode is what checkJoinPlan requires of the plan's join.
func (jp *joinPlan) seekMode() int {
	switch {
	case jp.prot == nil:
		return seekPublic
	case jp.prot.unique && jp.prot.index != "":
		return seekUniqueRow // INDEXED BY the unique index: no other index can be sought
	}
	return seekRows
}

// samePersons checks that the joined protected table t may be joined with
// the statement's table: another table, whose policy names the same persons.
func (c *checker) samePersons(t string, p Policy) (*protJoin, error) {
	a, pa := c.pl.table, c.pl.policy
	switch {
	case strings.EqualFold(t, a):
		return nil, pjoinRefusalf("%s is joined with itself: a protected table is not joined with itself", t)
	case pa.Persons == "" || p.Persons == "" || pa.Persons != p.Persons:
		return nil, pjoinRefusalf("%s and %s are both protected, and the owner has not declared that their privacy units "+
			"identify the same persons (policies %s and %s): two protected tables are joined only on privacy units the "+
			"owner declared shared, with the same persons name in both policies (dpsql protect DB TABLE --privacy-unit "+
			"COL --persons NAME, or \"persons\": NAME in dp_protect's policy)", a, t, personsOf(pa), personsOf(p))
	}
	return &protJoin{policy: p, unit: p.PrivacyUnit}, nil
}

// pjoinRefusalf refuses a join of two protected tables, saying what is
// accepted.
func pjoinRefusalf(format string, args ...any) error {
	return refusef(format+"; a DP SELECT joins two protected tables on their shared privacy unit: FROM a [AS x] "+
		"[INNER | LEFT [OUTER]] JOIN b [AS y] ON a.unit = b.unit [AND a.col = b.col ...] | USING (unit), both policies "+
		"naming the same persons and b with an index on its unit", args...)
}

func personsOf(p Policy) string {
	if p.Persons == "" {
		return "without persons"
	}
	return fmt.Sprintf("with persons %q", p.Persons)
}

// onUnits checks that the ON condition of a join of two protected tables
// contains the equality of their privacy units.
func (c *checker) onUnits(jp *joinPlan) error {
	for _, p := range jp.on {
		if strings.EqualFold(p[0], c.pl.policy.PrivacyUnit) && strings.EqualFold(p[1], jp.prot.unit) {
			return nil
		}
	}
	return pjoinRefusalf("a join of the protected tables %s and %s must compare their privacy units: ON %s.%s = %s.%s "+
		"[AND further equalities]; a join on other columns could pair rows of different persons",
		c.pl.table, jp.pub.name, c.pl.table, c.pl.policy.PrivacyUnit, jp.pub.name, jp.prot.unit)
}

// joinedPolicy is the policy of the joined rows: A's privacy unit, the
// stricter of the two policies' max_rows and max_groups, and both tables'
// bounds, lengths and key lists (B's under the flat names of its columns).
func joinedPolicy(a, b Policy, flat func(string) string) Policy {
	j := a
	j.MaxGroups, j.MaxRows = min(a.MaxGroups, b.MaxGroups), min(a.MaxRows, b.MaxRows)
	j.Bounds, j.MaxLength, j.PublicKeys = map[string][2]float64{}, map[string]int{}, map[string]string{}
	for k, v := range a.Bounds {
		j.Bounds[k] = v
	}
	for k, v := range b.Bounds {
		j.Bounds[flat(k)] = v
	}
	for k, v := range a.MaxLength {
		j.MaxLength[k] = v
	}
	for k, v := range b.MaxLength {
		j.MaxLength[flat(k)] = v
	}
	for k, v := range a.PublicKeys {
		j.PublicKeys[k] = v
	}
	for k, v := range b.PublicKeys {
		j.PublicKeys[flat(k)] = v
	}
	return j
}

// seekCompares bounds the comparisons of one index seek: log2 of SQLite's
// largest table, 2^64 rows, plus one per level of the b-tree.
const seekCompares = 80

// boundProtectedJoin checks, from the schema alone, that the two units
// compare as each table groups them, finds the index the join seeks, and
// sets K and the statement's per-row work (per row of A), refusing it when
// even K = 1 does not fit MaxRowWork.
func (pl *plan) boundProtectedJoin(ctx context.Context, conn *sql.Conn) error {
	jp, pj := pl.join, pl.join.prot
	au, bu := pl.policy.PrivacyUnit, pj.unit
	ka, _, err := unitForm(ctx, conn, pl.table, au)
	if err != nil {
		return err
	}
	kb, bIPK, err := unitForm(ctx, conn, jp.pub.name, bu)
	if err != nil {
		return err
	}
	if ka != kb {
		return pjoinRefusalf("the privacy units %s.%s (%s affinity, %s) and %s.%s (%s affinity, %s) do not compare alike: "+
			"SQLite would convert one to match the other, and rows of different persons could join; ask the owner to "+
			"declare both columns with the same type and collation", pl.table, au, ka.Affinity, ka.Collation,
			jp.pub.name, bu, kb.Affinity, kb.Collation)
	}
	if ka.Collation != "BINARY" && ka.Collation != "NOCASE" {
		return pjoinRefusalf("the privacy units %s.%s and %s.%s compare under %s, whose comparisons read a value's "+
			"trailing spaces whatever its length: units joined on must be BINARY or NOCASE", pl.table, au, jp.pub.name, bu,
			ka.Collation)
	}
	cols, err := tableColumns(ctx, conn, jp.pub.name)
	if err != nil {
		return err
	}
	for _, n := range []string{"rowid", "_rowid_", "oid"} {
		if _, shadowed := cols[n]; shadowed {
			continue
		}
		rows, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM main.%s LIMIT 0", n,
			dpselect.QuoteIdent(jp.pub.name)))
		if err == nil {
			rows.Close()
			pj.rowid = n
		}
		break
	}
	if pj.rowid == "" {
		return pjoinRefusalf("%s has no rowid (WITHOUT ROWID, or columns named rowid, _rowid_ and oid): its rows cannot be "+
			"looked up one person at a time", jp.pub.name)
	}
	if !bIPK {
		if pj.index, err = unitIndex(ctx, conn, jp.pub.name, bu, kb.Collation); err != nil {
			return err
		}
		if pj.index != "" {
			err := conn.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pragma_index_list(?1, 'main')
				WHERE name = ?2 AND "unique" = 1
				AND (SELECT count(*) FROM pragma_index_info(?2, 'main')) = 1`, jp.pub.name, pj.index).Scan(&pj.unique)
			if err != nil {
				return err
			}
		}
		if pj.index == "" {
			return pjoinRefusalf("%s has no index on its privacy unit %s: the join looks up each person's rows of %s by "+
				"such an index, so that its work per row stays bounded; ask the owner to create one (CREATE INDEX %s ON "+
				"%s(%s))", jp.pub.name, bu, jp.pub.name, dpselect.QuoteIdent(jp.pub.name+"_"+bu),
				dpselect.QuoteIdent(jp.pub.name), dpselect.QuoteIdent(bu))
		}
	}
	jp.reads[strings.ToLower(bu)] = true
	jp.reads["rowid"] = true // the authorizer's name of a rowid read, or the INTEGER PRIMARY KEY's
	ipk, err := integerPrimaryKey(ctx, conn, jp.pub.name)
	if err != nil {
		return err
	}
	if ipk != "" {
		jp.reads[strings.ToLower(ipk)] = true
	}
	// The work of one row of A: K + 1 seeks comparing its unit (a number
	// when the schema says the column holds numbers only, else up to its
	// max_length, longer rows dropped), then per joined row the further ON
	// equalities (each side up to its max_length), the guards and the
	// statement's per-row work.
	probe := float64(pl.policy.maxLength(au))
	if pl.facts.NumberOnly[au] {
		probe = numberBytes
	}
	seek := seekCompares * (probe + numberBytes)
	onWork := 0.0
	for _, p := range jp.on {
		if !strings.EqualFold(p[1], bu) || !strings.EqualFold(p[0], au) {
			onWork += float64(pl.policy.maxLength(p[0])+pj.policy.maxLength(p[1])) + 2*numberBytes
		}
	}
	passes := 1.0
	for _, a := range pl.aggs {
		if a.ownQuery() {
			passes++
		}
	}
	// Each joined row carries the columns the statement reads from both
	// tables, each up to its max_length (joincarry.go): A's copied into
	// each of its K joined rows, B's into one joined row per row of its
	// person in A.
	bFacts, err := schemaFactsOf(ctx, conn, jp.pub.name)
	if err != nil {
		return err
	}
	pj.numberOnly = bFacts.NumberOnly
	fromCols, joinedCols := pl.fromCarried(), pj.joinedCarried(jp)
	copyWork := carriedWork(fromCols, joinedCols)
	perJoined := passes*(seek+onWork) + pl.rowWork + copyWork
	work := func(k int) float64 { return passes*seek + float64(k)*perJoined }
	k := pl.maxRows * pl.maxGroups
	if pj.index == "" {
		pj.unique = true // the unit is B's rowid
	}
	if pj.unique {
		k = 1 // one row of B per person
	}
	if w := work(k); w > MaxRowWork || math.IsNaN(w) {
		k = int((MaxRowWork - passes*seek) / perJoined)
	}
	if k < 1 {
		cols := append(carriedNames(pl.table, fromCols), carriedNames(jp.pub.name, joinedCols)...)
		return refusef("the join may do about %.3g units of work per row of %s (about a nanosecond each), over the limit of "+
			"%d (protect.MaxRowWork): each row looks up its person's rows of %s by an index seek comparing %s (up to %.0f "+
			"bytes) about %d times, and each joined row carries the columns the statement reads, counted at their "+
			"max_length (%.3g units: %s); read fewer columns, or ask the owner to lower the max_length of those columns "+
			"or of %s.%s, or use fewer aggregates read by queries of their own", work(1), pl.table, MaxRowWork,
			jp.pub.name, au, probe, seekCompares, copyWork, strings.Join(cols, ", "), pl.table, au)
	}
	pj.k = k
	pl.rowWork = work(k)
	return nil
}

// unitForm returns the affinity and collation a table's unit column
// compares with, and whether it is the table's INTEGER PRIMARY KEY (an alias
// of the rowid: INTEGER, BINARY).
func unitForm(ctx context.Context, conn *sql.Conn, table, col string) (KeyForm, bool, error) {
	ipk, err := integerPrimaryKey(ctx, conn, table)
	if err != nil {
		return KeyForm{}, false, err
	}
	if ipk != "" && strings.EqualFold(ipk, col) {
		return KeyForm{Affinity: "INTEGER", Collation: "BINARY"}, true, nil
	}
	forms, err := readKeyForms(ctx, conn, table, []string{col})
	if err != nil {
		return KeyForm{}, false, err
	}
	return forms[col], false, nil
}

// integerPrimaryKey returns the name of table's INTEGER PRIMARY KEY column
// when it is the rowid ("" if none), which SQLite's authorizer names when
// the rowid is read. "INTEGER PRIMARY KEY DESC" is not the rowid but an
// ordinary column under an index of its own (origin 'pk'), as is a WITHOUT
// ROWID table's key.
func integerPrimaryKey(ctx context.Context, conn *sql.Conn, table string) (string, error) {
	var ipk sql.NullString
	err := conn.QueryRowContext(ctx, `SELECT max(name) FROM pragma_table_info(?1, 'main')
		WHERE pk = 1 AND upper(trim(type)) = 'INTEGER'
		AND (SELECT count(*) FROM pragma_table_info(?1, 'main') WHERE pk > 0) = 1
		AND NOT EXISTS (SELECT 1 FROM pragma_index_list(?1, 'main') WHERE origin = 'pk')`, table).Scan(&ipk)
	return ipk.String, err
}

// unitIndex returns the name of an index of table whose first key column is
// col under collation coll (not partial), "" if none: one on col alone if
// there is one (SQLite seeks it by (col, rowid), which a join of two
// protected tables needs: an index (col, x) is sought by col only), the
// first by name among the fewest key columns.
func unitIndex(ctx context.Context, conn *sql.Conn, table, col, coll string) (string, error) {
	rows, err := conn.QueryContext(ctx, `SELECT il.name FROM pragma_index_list(?1, 'main') AS il
		WHERE il.partial = 0 AND EXISTS (SELECT 1 FROM pragma_index_xinfo(il.name, 'main') AS x
		WHERE x.seqno = 0 AND x.key = 1 AND x.name = ?2 COLLATE NOCASE AND x.coll = ?3 COLLATE NOCASE)
		ORDER BY (SELECT count(*) FROM pragma_index_info(il.name, 'main')), il.name`, table, col, coll)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return "", err
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", nil
	}
	return names[0], nil
}

// protectedJoinedRows is joinedRows for a join of two protected tables: each
// row of A with at most K rows of its person in B, found by seeks on B's
// unit index (or its INTEGER PRIMARY KEY).
func (pl *plan) protectedJoinedRows() string {
	jp, pj := pl.join, pl.join.prot
	q := dpselect.QuoteIdent
	var l sqlList
	var pc, qf []string // in a fixed order: the SQL is a function of the statement
	for _, c := range pl.cols {
		if pl.reads[strings.ToLower(c)] {
			pc = append(pc, c)
		}
	}
	for f := range jp.flat {
		qf = append(qf, f)
	}
	sort.Strings(pc)
	sort.Strings(qf)
	for _, c := range pc {
		l.add("_p." + q(c))
	}
	for _, f := range qf {
		l.addf("_q.%s AS %s", q(jp.flat[f]), q(pl.cols2flat(f)))
	}
	op := "CROSS JOIN" // A is the outer loop
	if jp.left {
		op = "LEFT JOIN"
	}
	au, bu, b := q(pl.policy.PrivacyUnit), q(pj.unit), q(jp.pub.name)
	var on []string
	from := fmt.Sprintf("main.%s AS _q", b)
	if pj.index == "" {
		on = append(on, fmt.Sprintf("_q.%s = _p.%s", bu, au))
	} else {
		from += " INDEXED BY " + q(pj.index)
		on = append(on, fmt.Sprintf("_q.%s = _p.%s AND _q.%s IN "+
			"(SELECT _i.%s FROM main.%s AS _i INDEXED BY %s WHERE _i.%s = _p.%s LIMIT %d)",
			bu, au, pj.rowid, pj.rowid, b, q(pj.index), bu, au, pj.k))
	}
	var guards []string
	pDone, qDone := map[string]bool{}, map[string]bool{}
	for _, p := range jp.on {
		if !pDone[strings.ToLower(p[0])] {
			pDone[strings.ToLower(p[0])] = true
			guards = append(guards, fmt.Sprintf("(octet_length(_p.%s) > %d) IS NOT 1", q(p[0]), pl.policy.maxLength(p[0])))
		}
		if strings.EqualFold(p[0], pl.policy.PrivacyUnit) && strings.EqualFold(p[1], pj.unit) {
			continue
		}
		on = append(on, fmt.Sprintf("(octet_length(_q.%s) > %d) IS NOT 1 AND _p.%s = _q.%s", q(p[1]),
			pj.policy.maxLength(p[1]),
			q(p[0]), q(p[1])))
		qDone[strings.ToLower(p[1])] = true
	}
	// The carried columns, guarded by their max_length (joincarry.go): B's
	// in ON (under LEFT JOIN the row of A stays, without that row of B), A's
	// in WHERE.
	on = append(on, carriedGuards("_q", pj.joinedCarried(jp), qDone)...)
	guards = append(guards, carriedGuards("_p", pl.fromCarried(), pDone)...)
	return fmt.Sprintf("(SELECT %s FROM main.%s AS _p %s %s ON %s WHERE %s)", l.String(), q(pl.table), op, from,
		strings.Join(on, " AND "), strings.Join(guards, " AND "))
}

// checkJoinPlan refuses a statement whose SQL SQLite would run with a scan
// of the joined table instead of the seeks the work bound assumes (EXPLAIN
// QUERY PLAN, reading nothing): for a protected table (seekRows), a seek of
// (unit, rowid), or (seekUniqueRow) any seek of its unique index or rowid;
// for a public one (seekPublic), a seek of its index.
func checkJoinPlan(ctx context.Context, conn *sql.Conn, text string, mode int) error {
	rows, err := conn.QueryContext(ctx, "EXPLAIN QUERY PLAN "+text)
	if err != nil {
		return fmt.Errorf("protect: the rewritten statement cannot be prepared; nothing was charged: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		d := fmt.Sprint(vals[len(vals)-1])
		if b, ok := vals[len(vals)-1].([]byte); ok {
			d = string(b)
		}
		switch {
		case mode != seekPublic && strings.HasPrefix(d, "SEARCH _q ") && strings.Contains(d, "rowid=?"):
			// a protected table's seek
		case mode != seekRows && strings.HasPrefix(d, "SEARCH _q USING ") && strings.Contains(d, "INDEX ") &&
			strings.Contains(d, "=?") && !strings.Contains(d, "AUTOMATIC"): // an INDEXED BY seek: unique, or public
		case strings.HasPrefix(d, "SEARCH _i ") && strings.Contains(d, "=?)"):
		case strings.Contains(d, " _q ") || strings.HasSuffix(d, " _q") || strings.Contains(d, " _i ") ||
			strings.HasSuffix(d, " _i"):
			which := "protected"
			if mode == seekPublic {
				which = "public"
			}
			return refusef("SQLite would read the joined %s table by %q, not by the index seeks that bound the "+
				"join's work per row; nothing was charged", which, d)
		}
	}
	// No line for _q at all: SQLite left out a LEFT JOIN of a unique key
	// whose columns nothing reads (it reads nothing of B).
	return rows.Err()
}
