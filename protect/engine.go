package protect

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/dpsql/dpsql/internal/readhook"
	"github.com/dpsql/dpsql/ledger"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// Engine runs DP statements over one database file on a read-only
// connection of its own, which no analyst ever holds.
type Engine struct {
	path string
	db   *sql.DB // reads of protected tables
	// meta plans statements (policies, schema, budgets, public keys): a
	// statement is accepted or refused without waiting behind other reads.
	meta *sql.DB
	refs int // holders (EngineFor calls not yet Released)
	// policies are replayed from the chain's policy records, memoised by
	// its head; dp_policy is never read.
	policies policyMemo
}

var (
	enginesMu sync.Mutex
	engines   = map[string]*Engine{}
)

// EngineFor returns the process-wide engine of the database file at path;
// call Release when done with it. The last Release closes its connections.
func EngineFor(path string) (*Engine, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, errors.New("protected mode needs a database file")
	}
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if e, ok := engines[path]; ok {
		e.refs++
		return e, nil
	}
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_query_only", "1")
	db, err := sql.Open(readDriver, "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	meta, err := sql.Open(readDriver, "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		db.Close()
		return nil, err
	}
	meta.SetMaxOpenConns(4)
	e := &Engine{path: path, db: db, meta: meta, refs: 1}
	engines[path] = e
	return e, nil
}

// Release undoes one EngineFor.
func (e *Engine) Release() error {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if e.refs--; e.refs > 0 {
		return nil
	}
	delete(engines, e.path)
	return errors.Join(e.db.Close(), e.meta.Close())
}

// Result is a DP statement's released rows and the receipt of its charge.
type Result struct {
	Columns []string
	Rows    [][]any
	Receipt ledger.Receipt
}

// Query checks, charges, reads and runs one DP SELECT against scope. A
// refused statement (a *Refusal, a syntax error, or over budget) reads
// nothing and charges nothing. An accepted one (parsed, checked, priced and
// within budget, decided from the statement, the policies and the ledger
// alone) is charged before anything protected is read, under a context the
// caller cannot cancel, and keeps its charge whatever happens next: a read
// stopped by a timeout, a cancel, a client gone or an error returns a
// *Stopped that names the charge, and releases nothing (see charge.go).
func (e *Engine) Query(ctx context.Context, scope, query string) (*Result, error) {
	pl, err := e.accept(ctx, scope, query)
	if err != nil {
		return nil, err
	}
	if pl.stmt.Explain { // EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY: the plan, nothing read or charged
		return &Result{Columns: ExplainColumns, Rows: pl.explain()}, nil
	}
	rc, err := e.charge(ctx, scope, query, pl)
	if err != nil {
		return nil, err
	}
	groups, err := e.readAccepted(ctx, pl)
	if err != nil {
		return nil, &Stopped{Receipt: rc, Epsilon: pl.eps, Delta: pl.delta, Err: err}
	}
	res := releaseRows(pl, groups, release.NewNoise())
	res.Receipt = rc
	return res, nil
}

// plan parses and checks a statement. A refusal names the clause it is
// about and, over a protected table, an example built from its columns
// (examples.go).
func (e *Engine) plan(ctx context.Context, conn *sql.Conn, scope, query string) (_ *plan, err error) {
	defer func() { err = e.withExample(ctx, conn, query, err) }()
	st, err := dpselect.Parse(query)
	if err != nil {
		return nil, syntaxRefusal(query, err)
	}
	policies, err := e.policies.load(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("reading the protection policies: %w", err)
	}
	b, err := ledger.LoadBudget(ctx, conn, scope)
	if err != nil {
		return nil, err
	}
	var cols map[string]string
	base := st.BaseTable() // under the CTEs it names (sources.go)
	for t := range policies {
		if strings.EqualFold(t, base) {
			if cols, err = tableColumns(ctx, conn, t); err != nil {
				return nil, err
			}
		}
	}
	var pub *publicTable
	if st.Join != nil && cols != nil {
		count := true // a protected table's size is not public (pjoin.go)
		for t := range policies {
			count = count && !strings.EqualFold(t, st.Join.Table)
		}
		if pub, err = readPublicTable(ctx, conn, st.Join.Table, count); err != nil {
			return nil, err
		}
	}
	pl, err := checkJoined(st, policies, cols, pub, b.Delta)
	if err != nil {
		return nil, err
	}
	forms, err := pl.readKeyForms(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := pl.setKeyForms(forms); err != nil {
		return nil, err
	}
	numeric, err := columnNumeric(ctx, conn, pl.table)
	if err != nil {
		return nil, err
	}
	if jp := pl.join; jp != nil && jp.prot != nil {
		// A joined protected table's aggregated columns, by their flat names.
		nb, err := columnNumeric(ctx, conn, jp.pub.name)
		if err != nil {
			return nil, err
		}
		for f, q := range jp.flat {
			numeric[pl.cols2flat(f)] = nb[q]
		}
	}
	facts, err := schemaFactsOf(ctx, conn, pl.table)
	if err != nil {
		return nil, err
	}
	unitUnique := false
	if pl.policy.PrivacyUnit != "" {
		if unitUnique, err = uniqueColumn(ctx, conn, pl.table, pl.policy.PrivacyUnit); err != nil {
			return nil, err
		}
	}
	if pl.selection() {
		spent, err := selectionSpent(ctx, conn, scope)
		if err != nil {
			return nil, fmt.Errorf("reading the scope's partition selections: %w", err)
		}
		pool := SelectionDeltaPool * b.Delta
		pl.room = pool - spent
		switch {
		case !(pl.room > 0):
			return nil, refusef("partition selection: the statements of scope %q have spent delta %.3g, all that their selections may spend (half the scope's delta %g): GROUP BY only columns with public keys, or ask the owner for a new scope",
				scope, spent, b.Delta)
		case pl.deltaSSet && pl.deltaS > pl.room:
			return nil, refusef("partition selection: the statements of scope %q have spent delta %.3g of the %.3g their selections may spend (half the scope's delta %g), and this one's delta_s = %.3g does not fit: give OPTIONS selection_delta <= %.3g, or GROUP BY columns with public keys (no selection)",
				scope, spent, pool, b.Delta, pl.deltaS, pl.room)
		}
	}
	var keyValues [][]any
	// Public keys: read the declared key lists (public tables), in the
	// canonical form of the GROUP BY column (keys.go).
	for i, ks := range pl.keySources {
		rows, err := conn.QueryContext(ctx, fmt.Sprintf(`SELECT DISTINCT %s FROM main.%s WHERE %s IS NOT NULL`,
			pl.publicKeyExpr(i), dpselect.QuoteIdent(ks[0]), dpselect.QuoteIdent(ks[1])))
		if err != nil {
			return nil, fmt.Errorf("reading the public keys in %s.%s: %w", ks[0], ks[1], err)
		}
		var vals []any
		for rows.Next() {
			var v any
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return nil, err
			}
			vals = append(vals, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		keyValues = append(keyValues, vals)
	}
	if err := completePlan(pl, numeric, unitUnique, facts, keyValues); err != nil {
		return nil, err
	}
	if err := pl.boundJoinWork(ctx, conn); err != nil { // join.go
		return nil, err
	}
	return pl, nil
}

// completePlan adds to a checked plan what the file's schema and public
// tables say: which aggregated columns compare numerically (numeric, by
// column name), whether the privacy unit is declared unique, which columns
// are NOT NULL or hold numbers only (facts), and the public keys' values
// (with the sampler's noise_tv at their number of groups); it then plans the
// noise (budget.go). Engine.plan and NewStatement both end with it, so a
// statement planned outside SQLite is the statement the engine runs.
func completePlan(pl *plan, numeric map[string]bool, unitUnique bool, facts SchemaFacts, keyValues [][]any) error {
	pl.applySchema(numeric, unitUnique, facts)
	if err := pl.calibrateNoise(facts); err != nil {
		return err
	}
	if pl.keySources == nil {
		return nil
	}
	if len(keyValues) != len(pl.keySources) {
		return fmt.Errorf("protect: the statement groups by %d public keys, its inputs list %d", len(pl.keySources), len(keyValues))
	}
	combos := 1
	for _, vals := range keyValues {
		combos *= max(len(vals), 1)
		if combos > maxKeyCombinations {
			return refusef("the public keys of the GROUP BY columns make more than %d groups", maxKeyCombinations)
		}
	}
	pl.keyValues = keyValues
	pl.details.NoiseTVValues = pl.gaussianValues(float64(combos))
	pl.details.NoiseTVTotal = pl.details.NoiseTVValues * release.NoiseTV
	return nil
}

// applySchema records what the schema says in the plan.
func (pl *plan) applySchema(numeric map[string]bool, unitUnique bool, facts SchemaFacts) {
	for i := range pl.aggs {
		pl.aggs[i].numericCompare = numeric[pl.aggs[i].column]
	}
	// Under a join of two protected tables a person's rows of A may join
	// many rows of B: bounded after the join whatever A's unit.
	pl.unitUnique = unitUnique && pl.policy.PrivacyUnit != "" && (pl.join == nil || pl.join.prot == nil)
	if pl.unitUnique {
		// One row per person: one row in one group.
		pl.maxGroups, pl.maxRows = 1, 1
	}
	pl.facts = facts
}

// columnNumeric reports, by column name, which columns of table have a
// declared type that does not give them TEXT affinity (see
// aggPlan.numericCompare).
func columnNumeric(ctx context.Context, conn *sql.Conn, table string) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name, upper(type) FROM pragma_table_info(?, 'main')`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	numeric := map[string]bool{}
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			return nil, err
		}
		numeric[n] = !strings.Contains(typ, "CHAR") && !strings.Contains(typ, "CLOB") && !strings.Contains(typ, "TEXT")
	}
	return numeric, rows.Err()
}

// uniqueColumn reports whether the schema makes column col of table unique
// among its non-NULL values under the column's own collation (as GROUP BY
// compares it): col is the table's only PRIMARY KEY column, or a UNIQUE
// constraint of the table's declaration (whose index takes the column's
// collation) covers col alone. A separate CREATE UNIQUE INDEX may declare
// another collation and does not count; nor does a partial index.
func uniqueColumn(ctx context.Context, conn *sql.Conn, table, col string) (bool, error) {
	var pks, isPK int
	if err := conn.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(name = ? COLLATE NOCASE), 0) FROM pragma_table_info(?, 'main') WHERE pk > 0`, col, table).Scan(&pks, &isPK); err != nil {
		return false, err
	}
	if pks == 1 && isPK == 1 {
		return true, nil
	}
	var n int
	err := conn.QueryRowContext(ctx, `SELECT count(*) FROM pragma_index_list(?, 'main') AS il
		WHERE il."unique" = 1 AND il.partial = 0 AND il.origin IN ('u', 'pk')
		AND (SELECT count(*) FROM pragma_index_info(il.name, 'main')) = 1
		AND (SELECT name FROM pragma_index_info(il.name, 'main')) = ? COLLATE NOCASE`, table, col).Scan(&n)
	return n > 0, err
}

// selectionSpent returns the delta the scope's charges have spent at
// +infinity (their gaussian_inf and laplace_inf entries and parts: partition
// selections).
func selectionSpent(ctx context.Context, conn *sql.Conn, scope string) (float64, error) {
	var spent float64
	err := conn.QueryRowContext(ctx, `SELECT coalesce((SELECT sum(json_extract(params, '$.delta')) FROM main.dp_ledger
		WHERE kind = 'charge' AND scope = ?1 AND json_extract(params, '$.mechanism') IN ('gaussian_inf', 'laplace_inf')), 0)
		+ coalesce((SELECT sum(json_extract(p.value, '$.delta')) FROM main.dp_ledger, json_each(dp_ledger.params, '$.parts') AS p
		WHERE kind = 'charge' AND scope = ?1 AND json_extract(params, '$.mechanism') = 'composite'
		AND json_extract(p.value, '$.mechanism') IN ('gaussian_inf', 'laplace_inf')), 0)`, scope).Scan(&spent)
	return spent, err
}

// maxKeyCombinations caps the groups a GROUP BY over public keys releases.
const maxKeyCombinations = 1000000

// group is one group's exact, bounded figures as the rewritten SQL returns them.
type group struct {
	keys    []any
	persons int64
	vals    []int64   // per aggregate: count or fixed-point sum
	counts  []int64   // per aggregate: the count of values (AVG, VAR_POP, STDDEV_POP)
	sqs     []int64   // per aggregate: fixed-point sum of centred squares (VAR_POP, STDDEV_POP)
	hists   [][]int64 // per aggregate: MEDIAN's histogram, nil when empty
}

func newGroup(keys []any, aggs int) group {
	return group{keys: keys, vals: make([]int64, aggs), counts: make([]int64, aggs), sqs: make([]int64, aggs), hists: make([][]int64, aggs)}
}

// authorized runs f with conn under an authorizer that allows exactly the
// reads the checker approved: the statement's columns of its table, the
// public key tables, the WHERE functions and the rewrite's own.
func authorized(conn *sql.Conn, pl *plan, f func(denied *string) error) error {
	var denied string
	auth := func(op int, a1, a2, a3 string) int {
		switch op {
		case sqlite3.SQLITE_SELECT:
			return sqlite3.SQLITE_OK
		case sqlite3.SQLITE_READ:
			if strings.EqualFold(a1, pl.table) && a3 == "main" && (a2 == "" || pl.reads[strings.ToLower(a2)]) {
				return sqlite3.SQLITE_OK
			}
			if j := pl.join; j != nil && strings.EqualFold(a1, j.pub.name) && a3 == "main" && (a2 == "" || j.reads[strings.ToLower(a2)]) {
				return sqlite3.SQLITE_OK
			}
			if pl.join != nil && strings.EqualFold(a1, pl.table) && a3 == "main" && strings.EqualFold(a2, "rowid") && pl.policy.PrivacyUnit == "" {
				return sqlite3.SQLITE_OK
			}
			for _, ks := range pl.keySources {
				if strings.EqualFold(a1, ks[0]) && a3 == "main" && strings.EqualFold(a2, ks[1]) {
					return sqlite3.SQLITE_OK
				}
			}
		case sqlite3.SQLITE_FUNCTION:
			if _, ok := safeFunctions[a2]; ok || containsFold(ruleFunctions, a2) {
				return sqlite3.SQLITE_OK
			}
		}
		denied = fmt.Sprintf("action %d on %q %q %q", op, a1, a2, a3)
		return sqlite3.SQLITE_DENY
	}
	setAuth := func(f func(int, string, string, string) int) error {
		return conn.Raw(func(dc any) error {
			sc, ok := dc.(*sqlite3.SQLiteConn)
			if !ok {
				return fmt.Errorf("protect: unexpected driver connection %T", dc)
			}
			sc.RegisterAuthorizer(f)
			return nil
		})
	}
	if err := setAuth(auth); err != nil {
		return err
	}
	defer setAuth(nil)
	return f(&denied)
}

// readAll reads the main statement's groups and, for each aggregate read by
// a query of its own, its histograms (MEDIAN, PERCENTILE_CONT,
// APPROX_QUANTILES) or distinct counts, attached to the groups of the data.
func (e *Engine) readAll(ctx context.Context, conn *sql.Conn, pl *plan) ([]group, error) {
	groups, err := e.read(ctx, conn, pl)
	if err != nil {
		return nil, err
	}
	for ai, a := range pl.aggs {
		// A value two aggregates read (MEDIAN and PERCENTILE_CONT of one
		// column and bounds) is read once, by the aggregate that made it.
		if !a.ownQuery() || pl.values[a.val].agg != ai {
			continue
		}
		if a.distinct {
			d, err := e.readDistinct(ctx, conn, pl, a)
			if err != nil {
				return nil, err
			}
			for i := range groups {
				groups[i].vals[ai] = d[canonKey(groups[i].keys)]
			}
			continue
		}
		h, err := e.readHistogram(ctx, conn, pl, a)
		if err != nil {
			return nil, err
		}
		for i := range groups {
			groups[i].hists[ai] = h[canonKey(groups[i].keys)]
		}
	}
	return groups, nil
}

// readHistogram runs a MEDIAN's histogram query; it returns the histograms
// by canonKey of the group keys.
func (e *Engine) readHistogram(ctx context.Context, conn *sql.Conn, pl *plan, a aggPlan) (map[string][]int64, error) {
	out := map[string][]int64{}
	err := authorized(conn, pl, func(denied *string) error {
		rows, err := conn.QueryContext(ctx, rewriteHistogram(pl, a))
		if err != nil {
			if *denied != "" {
				return fmt.Errorf("protect: internal error, the histogram query asked for a read the checker did not approve (%s): %w", *denied, err)
			}
			return fmt.Errorf("protect: running the histogram query: %w", err)
		}
		defer rows.Close()
		nk := len(pl.keys)
		dest := make([]any, nk+2)
		ptrs := make([]any, len(dest))
		for i := range dest {
			ptrs[i] = &dest[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			b, n := asInt(dest[nk]), asInt(dest[nk+1])
			if b < 0 || b >= MedianBuckets {
				return fmt.Errorf("protect: internal error, histogram bucket %d out of range", b)
			}
			k := canonKey(dest[:nk])
			h := out[k]
			if h == nil {
				h = make([]int64, MedianBuckets)
				out[k] = h
			}
			h[b] += n
		}
		return rows.Err()
	})
	return out, err
}

// read runs the rewritten SQL under an authorizer that allows exactly the
// reads the checker approved.
func (e *Engine) read(ctx context.Context, conn *sql.Conn, pl *plan) ([]group, error) {
	text := rewrite(pl)
	var out []group
	err := authorized(conn, pl, func(denied *string) error {
		var err error
		out, err = e.readRows(ctx, conn, pl, text, denied)
		return err
	})
	return out, err
}

func (e *Engine) readRows(ctx context.Context, conn *sql.Conn, pl *plan, text string, denied *string) ([]group, error) {
	rows, err := conn.QueryContext(ctx, text)
	if err != nil {
		if *denied != "" {
			return nil, fmt.Errorf("protect: internal error, the rewritten statement asked for a read the checker did not approve (%s): %w", *denied, err)
		}
		return nil, fmt.Errorf("protect: running the rewritten statement: %w", err)
	}
	defer rows.Close()
	nk := len(pl.keys)
	var out []group
	dest := make([]any, nk+1+3*len(pl.aggs))
	ptrs := make([]any, len(dest))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	n := nk + 1
	for _, a := range pl.aggs {
		n++
		if a.needsCount() {
			n++
		}
		if a.needsSq() {
			n++
		}
	}
	for rows.Next() {
		if err := rows.Scan(ptrs[:n]...); err != nil {
			return nil, err
		}
		g := newGroup(make([]any, nk), len(pl.aggs))
		for i := range nk {
			g.keys[i] = dest[i]
		}
		g.persons = asInt(dest[nk])
		j := nk + 1
		for i, a := range pl.aggs {
			g.vals[i] = asInt(dest[j])
			j++
			if a.needsCount() {
				g.counts[i] = asInt(dest[j])
				j++
			}
			if a.needsSq() {
				g.sqs[i] = asInt(dest[j])
				j++
			}
		}
		out = append(out, g)
		readhook.AfterRow(ctx) // tests: a read stopped mid-way without a clock
		// A stopped read ends at the next row, even one SQLite already had.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// publicGroups returns one group per combination of the public keys, with
// the exact figures of the data's group of those keys, or zeros.
func publicGroups(pl *plan, groups []group) []group {
	byKey := make(map[string]group, len(groups))
	for _, g := range groups {
		byKey[canonKey(g.keys)] = g
	}
	var out []group
	cur := make([]any, len(pl.keyValues))
	var walk func(i int)
	walk = func(i int) {
		if i == len(pl.keyValues) {
			k := append([]any(nil), cur...)
			g, ok := byKey[canonKey(k)]
			if !ok {
				g = newGroup(nil, len(pl.aggs))
			}
			g.keys = k
			out = append(out, g)
			return
		}
		for _, v := range pl.keyValues[i] {
			cur[i] = v
			walk(i + 1)
		}
	}
	walk(0)
	return out
}

// canonKey identifies a combination of key values as SQLite's GROUP BY and
// IN compare them: an integral REAL equals the INTEGER.
func canonKey(vs []any) string {
	var b strings.Builder
	for _, v := range vs {
		switch v := v.(type) {
		case int64:
			fmt.Fprintf(&b, "n%d", v)
		case float64:
			if v == math.Trunc(v) && math.Abs(v) < 1<<62 {
				fmt.Fprintf(&b, "n%d", int64(v))
			} else {
				fmt.Fprintf(&b, "f%v", v)
			}
		case string:
			fmt.Fprintf(&b, "s%q", v)
		case []byte:
			fmt.Fprintf(&b, "b%x", v)
		default:
			fmt.Fprintf(&b, "?%v", v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

func asInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0 // NULL: an empty sum
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// orderRows sorts the released rows by ORDER BY (post-processing), in
// SQLite's order of types: NULL, numbers, text, blobs.
func orderRows(pl *plan, cols []string, rows [][]any) {
	if len(pl.stmt.OrderBy) == 0 {
		return
	}
	type term struct {
		col  int
		desc bool
	}
	var terms []term
	for _, o := range pl.stmt.OrderBy {
		c := -1
		if o.Pos > 0 {
			c = pl.itemColumn(o.Pos - 1)
		} else {
			for j, n := range cols {
				if strings.EqualFold(n, o.Name) {
					c = j
				}
			}
		}
		terms = append(terms, term{c, o.Desc})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		for _, t := range terms {
			c := compareValues(rows[i][t.col], rows[j][t.col])
			if c == 0 {
				continue
			}
			return (c < 0) != t.desc
		}
		return false
	})
}

func typeRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case int64, float64:
		return 1
	case string:
		return 2
	}
	return 3
}

func compareValues(a, b any) int {
	a, b = sqlValue(a), sqlValue(b)
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return ra - rb
	}
	switch ra {
	case 1:
		return compareNumbers(a, b) // exactly, as SQLite does (having.go)
	case 2:
		return strings.Compare(a.(string), b.(string))
	case 3:
		x, _ := a.([]byte)
		y, _ := b.([]byte)
		return bytes.Compare(x, y)
	}
	return 0
}

func toFloat(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}
