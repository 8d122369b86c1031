package protect

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// SelectionDeltaShare is the default share of the reference delta (the
// statement's delta, or the scope's when the statement gives mu) that a
// GROUP BY's private partition selection spends: delta_s =
// SelectionDeltaShare * delta, unless OPTIONS selection_delta sets it. A
// group held by one person is released with probability at most delta_s.
const SelectionDeltaShare = 0.001

// SelectionDeltaPool is the share of a scope's delta that the partition
// selections of all its statements may spend together (each spends its
// delta_s at +infinity, for good): a statement whose delta_s would take the
// scope's selections beyond it is refused before anything is read, so the
// other parts always keep the rest. A statement that does not set
// selection_delta takes its default (calibrate's share of its delta, or
// SelectionDeltaShare of the scope's for a mu statement) but at most half of
// what the pool has left, so that defaults never exhaust it.
const SelectionDeltaPool = 0.5

// MedianBuckets is the number of equal buckets between a MEDIAN's bounds:
// the median is read off a noisy histogram of the group's values, to within
// (hi - lo)/MedianBuckets plus what the noise moves.
const MedianBuckets = 128

// rowsBound is a public bound on the groups of any GROUP BY: SQLite's
// largest number of rows in a table, 2^64. A partition selection draws one
// noisy value per group present in the data, a number that is not public;
// the sampler's error it records (noise_tv) is taken at this bound.
const rowsBound = 0x1p64

// safeFunctions may appear in WHERE: none of them can fail, whatever its
// input, and none returns a value longer than its input (so "string or blob
// too big" cannot happen). abs (fails on the smallest integer), json_*
// (malformed text), replace/hex/quote/printf/|| (can outgrow the length
// limit), likelihood (fails on a non-constant) and every aggregate are not
// here. min and max need two or more arguments (one argument is the aggregate).
var safeFunctions = map[string]int{ // name -> minimum arity
	"coalesce": 2, "ifnull": 2, "nullif": 2, "iif": 3, "typeof": 1, "length": 1, "octet_length": 1,
	"lower": 1, "upper": 1, "trim": 1, "ltrim": 1, "rtrim": 1, "substr": 2, "substring": 2,
	"instr": 2, "round": 1, "sign": 1, "min": 2, "max": 2, "unicode": 1, "likely": 1, "unlikely": 1,
	"strftime": 2, // strftime('literal format', x) only: no modifiers (checker.safeTerm)
}

// ruleFunctions are the functions the rewritten SQL itself calls; the
// execution authorizer allows them and safeFunctions, nothing else. like is
// the LIKE operator's (the parser accepts LIKE 'literal' without ESCAPE; a
// call like(...) is not in safeFunctions and is refused by the checker).
var ruleFunctions = []string{"count", "sum", "max", "min", "round", "typeof", "row_number", "random", "like"}

// aggPlan is one DP aggregate of a statement.
type aggPlan struct {
	kind   string // COUNT, SUM, AVG, ... (dpselect's aggregate names)
	column string // "" for COUNT(*)
	// distinct: COUNT(DISTINCT column); persons: of the privacy unit (the
	// group's count of persons). param: PERCENTILE_CONT's p or
	// APPROX_QUANTILES's k (aggregates.go).
	distinct, persons bool
	param             float64
	// numericCompare: the column's declared type is known not to give it
	// TEXT affinity (no CHAR, CLOB or TEXT in it), so comparing it with a
	// number compares numbers as numbers and puts text and blobs after
	// them; the rewrite then tests bounds with comparisons instead of
	// typeof(). Unset (unknown), the rewrite tests typeof().
	numericCompare bool
	lo, hi         float64 // clamping bounds (SUM, AVG)
	// centred: the sum is of values centred on mid = (lo+hi)/2 (AVG,
	// VAR_POP, STDDEV_POP, and SUM when the statement draws the column's
	// count of numbers anyway, see values.go).
	centred bool
	mid     float64
	quant   float64 // fixed-point quantum of the sum's values (a power of two)
	// VAR_POP, STDDEV_POP: the sum of squared centred values, itself centred
	// on sqMid = c^2/2, in units of sqQuant.
	sqMid, sqQuant float64
	// The noisy values the aggregate reads (indices into plan.values, -1
	// for none): a count or a sum or a histogram; a count of numbers (AVG,
	// VAR_POP, STDDEV_POP, a centred SUM); a sum of squares.
	val, cnt, sq int
}

// needsCount reports whether the aggregate releases a noisy count of values.
func (a aggPlan) needsCount() bool {
	return a.kind == dpselect.Avg || a.kind == dpselect.Var || a.kind == dpselect.Std
}

// needsSq reports whether the aggregate releases a noisy sum of squares.
func (a aggPlan) needsSq() bool { return a.kind == dpselect.Var || a.kind == dpselect.Std }

// plan is a checked statement, everything public: what to read, how to
// bound it, how much noise to add, and what to charge.
type plan struct {
	stmt   *dpselect.Statement
	table  string
	policy Policy
	cols   map[string]string // the table's columns by lower-case name
	keys   []string          // group-by columns, as the schema spells them, or computed keys' SQL
	where  string            // rendered WHERE, "" if none
	reads  map[string]bool   // lower-case columns the statement may read
	// public keys (GROUP BY columns that all have a declared key table):
	// per key, the table and column, and the values read from them.
	keySources [][2]string
	keyValues  [][]any
	aggs       []aggPlan
	items      []int // per output item: -1-k for key k, or an index into aggs
	maxGroups  int
	maxRows    int
	// The budget asked for: mu, or epsilon and delta; the noise law asked
	// for (calibrate.Auto when not given); the confidence of error bars (0:
	// none).
	mu, eps, delta float64
	noise          calibrate.Law
	conf           float64
	// partition selection (GROUP BY without public keys): its delta_s
	// (deltaSSet: given by OPTIONS selection_delta; for a mu statement the
	// scope's default share is set by the checker, otherwise calibrate
	// chooses it) and threshold tau.
	deltaS, tau float64
	deltaSSet   bool
	// room is what the scope's selections may still spend (Engine.plan;
	// +Inf when unknown).
	room float64
	// facts are what the schema says about the columns (values.go).
	facts SchemaFacts
	// values are the noisy values the statement draws per group; cal their
	// calibration (budget.go).
	values  []noisyValue
	cal     *calibrate.Plan
	mech    mechanism.Mechanism
	details StatementDetails
	// unitUnique: the privacy-unit column is declared unique (the table's
	// only PRIMARY KEY column, or a UNIQUE constraint of that column alone),
	// so each person has at most one row and bounding is a no-op: the
	// rewrite reads the table as if each row were a person, dropping rows
	// whose unit is NULL.
	unitUnique bool
	// rowWork bounds the statement's work per row read (cost.go).
	rowWork float64
	// having filters the released rows (post-processing, having.go); nil
	// without HAVING.
	having *havingClause
	// keyForms are the GROUP BY columns' affinities and collations, which
	// fix the keys' canonical form (keys.go); nil until read.
	keyForms []KeyForm
	// keyInfo is, per GROUP BY key, its expression if it is computed
	// (groupkeys.go).
	keyInfo []keyInfo
	// join is the statement's join with a public table (join.go); nil
	// without one.
	join *joinPlan
}

// Refusal is an analyst statement refused before anything was read or
// charged; its message says what is allowed.
type Refusal struct {
	Msg string
	// Clause names the part of the statement refused (dpselect.Clause*),
	// "" when the message names it; Try is a statement over the same table
	// that would be accepted, built from its columns and policy
	// (examples.go), "" when there is none.
	Clause, Try string
}

func (e *Refusal) Error() string {
	s := "refused: " + e.Msg
	if e.Clause != "" {
		s = "refused: " + e.Clause + ": " + e.Msg
	}
	if e.Try != "" {
		s += "; try " + e.Try
	}
	return s
}

func refusef(format string, args ...any) error {
	return &Refusal{Msg: fmt.Sprintf(format, args...)}
}

// checkStatement checks a parsed statement against the owner's policies and
// the scope's delta and returns its plan: a checker's steps, one per clause,
// in order; the first refusal stops it. The plan's noise is calibrated once
// the schema is known (completePlan, budget.go).
func checkStatement(st *dpselect.Statement, policies map[string]Policy, cols map[string]string,
	scopeDelta float64) (*plan, error) {
	return checkJoined(st, policies, cols, nil, scopeDelta)
}

// checkJoined is checkStatement with the schema of the public table the
// statement joins (nil: none, and a join is refused).
func checkJoined(st *dpselect.Statement, policies map[string]Policy, cols map[string]string, pub *publicTable,
	scopeDelta float64) (*plan, error) {
	c := newChecker(st, policies, cols, scopeDelta)
	c.pub = pub
	if err := c.run(checkerSteps...); err != nil {
		return nil, err
	}
	return c.pl, nil
}

// checker checks one parsed statement against the owner's policies and the
// scope's delta and builds its plan, one step (a method) per clause: FROM,
// the privacy unit, OPTIONS, GROUP BY, the SELECT list and its intervals,
// ORDER BY, WHERE, then the budget the statement asks for and the bound on
// its per-row work. A step reads what earlier steps set in the plan and
// refuses with a message that names the clause and what it accepts. A clause
// the grammar gains (joins, GROUP BY expressions, HAVING, CTEs) gets a step
// of its own.
type checker struct {
	st         *dpselect.Statement
	policies   map[string]Policy
	cols       map[string]string // the table's columns by lower-case name
	scopeDelta float64
	pl         *plan

	pub     *publicTable    // the joined public table's schema, nil if none was read
	opt     stmtOptions     // set by options
	outputs map[string]bool // the outputs' lower-case names, set by items and intervals
}

// stmtOptions are a statement's OPTIONS as the options step read them (the
// budget and the noise are set in the plan).
type stmtOptions struct {
	given          map[string]bool // the names given
	selectionDelta float64
}

func newChecker(st *dpselect.Statement, policies map[string]Policy, cols map[string]string,
	scopeDelta float64) *checker {
	return &checker{st: st, policies: policies, cols: cols, scopeDelta: scopeDelta,
		pl: &plan{stmt: st, cols: cols, reads: map[string]bool{}, room: math.Inf(1), noise: calibrate.Auto}}
}

// checkerSteps are the checker's steps in the order checkStatement runs them.
var checkerSteps = []func(*checker) error{(*checker).from, (*checker).privacyUnit, (*checker).options,
	(*checker).groupBy, (*checker).items, (*checker).intervals, (*checker).orderBy, (*checker).where,
	(*checker).budget, (*checker).rowWork, (*checker).having}

// run runs steps in order and stops at the first refusal.
func (c *checker) run(steps ...func(*checker) error) error {
	for _, step := range steps {
		if err := step(c); err != nil {
			return withClause(err, step)
		}
	}
	return nil
}

// column resolves a column of the statement's table by name, without regard
// to case, to the schema's spelling, and records that the statement reads it;
// clause names where it was written, for the refusal.
func (c *checker) column(name, clause string) (string, error) {
	col, ok := c.cols[strings.ToLower(name)]
	if !ok {
		return "", refusef("no column %q in %s (%s)", name, c.pl.table, clause)
	}
	c.pl.reads[strings.ToLower(col)] = true
	return col, nil
}

// from checks the FROM clause: one protected table, its policy the owner's.
// Joins, when the grammar admits them, are checked here: which tables, on
// which condition, and that the privacy unit survives them.
func (c *checker) from() error {
	if err := c.inlineSources(); err != nil { // CTEs and subqueries in FROM (sources.go)
		return err
	}
	var table string
	for t := range c.policies {
		if strings.EqualFold(t, c.st.Table) {
			table = t
		}
	}
	if table == "" {
		return refusef("table %q is not protected: SELECT WITH DIFFERENTIAL_PRIVACY reads protected tables only "+
			"(query public tables with plain SQL)", c.st.Table)
	}
	c.pl.table, c.pl.policy = table, c.policies[table]
	return c.join() // a join with a public table (join.go)
}

// privacyUnit checks that the policy's privacy-unit column exists; every
// statement reads it (per-person bounding).
func (c *checker) privacyUnit() error {
	if u := c.pl.policy.PrivacyUnit; u != "" {
		if _, err := c.column(u, "privacy unit"); err != nil {
			return err
		}
	}
	return nil
}

// options reads OPTIONS: the budget (mu, or epsilon and delta), the noise
// law, the confidence of error bars, max_groups_contributed and
// selection_delta.
func (c *checker) options() error {
	c.pl.maxGroups, c.pl.maxRows = c.pl.policy.MaxGroups, c.pl.policy.MaxRows
	c.opt.given = map[string]bool{}
	for _, o := range c.st.Options {
		if err := c.option(o); err != nil {
			return err
		}
	}
	return c.budgetOptions()
}

// option reads one OPTIONS entry.
func (c *checker) option(o dpselect.Option) error {
	pl := c.pl
	if c.opt.given[o.Name] {
		return refusef("option %s is given twice", o.Name)
	}
	c.opt.given[o.Name] = true
	if o.Name == "privacy_unit_column" {
		return refusef("the privacy unit is set by the owner's policy, not by OPTIONS")
	}
	if o.IsText != (o.Name == "noise") {
		if o.IsText {
			return refusef("option %s takes a number, not the string '%s'", o.Name, o.Text)
		}
		return refusef("option noise takes 'auto', 'laplace' or 'gaussian' (a quoted string), not a number")
	}
	switch o.Name {
	case "noise":
		switch n := calibrate.Law(strings.ToLower(o.Text)); n {
		case calibrate.Auto, calibrate.Laplace, calibrate.Gaussian:
			pl.noise = n
		default:
			return refusef("unknown noise '%s': OPTIONS noise takes 'auto' (the default: the law of lower error), "+
				"'laplace' or 'gaussian'", o.Text)
		}
	case "confidence":
		if !(o.Value >= 0.5 && o.Value < 1) {
			return refusef("confidence must lie in [0.5, 1), got %v (for example confidence = 0.95)", o.Value)
		}
		pl.conf = o.Value
	case "mu":
		pl.mu = o.Value
	case "epsilon":
		pl.eps = o.Value
	case "delta":
		pl.delta = o.Value
	case "max_groups_contributed":
		if o.Value != math.Trunc(o.Value) || o.Value < 1 || o.Value > float64(pl.policy.MaxGroups) {
			return refusef("max_groups_contributed must be an integer in [1, %d] (the policy's max_groups)",
				pl.policy.MaxGroups)
		}
		pl.maxGroups = int(o.Value)
	case "selection_delta":
		if !(o.Value > 0 && o.Value < 1) {
			return refusef("selection_delta must lie in (0, 1), got %v", o.Value)
		}
		c.opt.selectionDelta = o.Value
	default:
		return refusef("unknown option %q: OPTIONS takes mu, or epsilon and delta, max_groups_contributed, "+
			"selection_delta, noise and confidence", o.Name)
	}
	return nil
}

// budgetOptions checks that OPTIONS give one budget, mu or epsilon and
// delta, in range, and epsilon for Laplace noise.
func (c *checker) budgetOptions() error {
	given, pl := c.opt.given, c.pl
	switch {
	case given["mu"] && (given["epsilon"] || given["delta"]):
		return refusef("give mu, or epsilon and delta, not both")
	case given["mu"]:
		if !(pl.mu > 0) || math.IsInf(pl.mu, 0) || pl.mu > 100 {
			return refusef("mu must lie in (0, 100], got %v", pl.mu)
		}
	case given["epsilon"] && given["delta"]:
		if !(pl.eps > 0) || math.IsInf(pl.eps, 0) || !(pl.delta > 0 && pl.delta < 1) {
			return refusef("epsilon must be positive and finite and delta in (0, 1), got %v and %v", pl.eps, pl.delta)
		}
	default:
		return refusef("OPTIONS must give mu, or epsilon and delta")
	}
	if pl.noise == calibrate.Laplace && given["mu"] {
		return refusef("noise = 'laplace' is calibrated from an epsilon budget: give epsilon and delta, not mu")
	}
	return nil
}

// publicKeys sets the plan's key sources when every GROUP BY column has a
// public key list in the policy (the groups are then those lists', with no
// partition selection); a list in a table that is now protected is refused.
func (c *checker) publicKeys() error {
	pl := c.pl
	for i, k := range pl.keys {
		src, ok := pl.policy.PublicKeys[k]
		if !ok || pl.keyInfo[i].expr != nil { // a computed key has no list (groupkeys.go)
			pl.keySources = nil
			return nil
		}
		kt, kc, _ := strings.Cut(src, ".")
		for t := range c.policies {
			if strings.EqualFold(t, kt) {
				return refusef("the public keys of %s come from %s, which is now protected: "+
					"ask the owner to fix the policy", k, kt)
			}
		}
		pl.keySources = append(pl.keySources, [2]string{kt, kc})
	}
	return nil
}

// items checks the SELECT list: distinct output names, group keys that are
// GROUP BY columns, DP aggregates with their bounds, and at least one
// aggregate.
func (c *checker) items() error {
	c.outputs = map[string]bool{}
	for _, it := range c.st.Items {
		n := strings.ToLower(it.Name())
		if c.outputs[n] {
			return refusef("two outputs are named %s: give them distinct aliases", it.Name())
		}
		c.outputs[n] = true
		var err error
		if it.Agg == "" {
			err = c.keyItem(it)
		} else {
			err = c.aggregate(it)
		}
		if err != nil {
			return err
		}
	}
	if len(c.pl.aggs) == 0 {
		return refusef("a DP SELECT needs at least one aggregate (COUNT, SUM, AVG, VAR_POP, STDDEV_POP, MEDIAN, " +
			"PERCENTILE_CONT or APPROX_QUANTILES); " +
			"group keys alone are not released")
	}
	return nil
}

// keyItem checks an output that is a group key: a GROUP BY column, or a
// computed GROUP BY key written the same way.
func (c *checker) keyItem(it dpselect.Item) error {
	if it.Expr != nil {
		idx, err := c.computedKeyItem(it)
		if err != nil {
			return err
		}
		c.pl.items = append(c.pl.items, -1-idx)
		return nil
	}
	idx := -1
	for i, k := range c.pl.keys {
		if c.pl.keyInfo[i].expr == nil && strings.EqualFold(k, it.Column) {
			idx = i
		}
	}
	if idx < 0 {
		return refusef("column %s is neither a GROUP BY key nor inside a DP aggregate: only group keys and DP "+
			"aggregates (COUNT, SUM, AVG, VAR_POP, STDDEV_POP, MEDIAN) may be selected", it.Column)
	}
	c.pl.items = append(c.pl.items, -1-idx)
	return nil
}

// aggregate checks an output that is a DP aggregate and adds it to the plan.
func (c *checker) aggregate(it dpselect.Item) error {
	a := aggPlan{kind: it.Agg}
	if it.Column != "" {
		col, err := c.column(it.Column, it.Agg)
		if err != nil {
			return err
		}
		a.column = col
	}
	if it.Agg != dpselect.Count {
		if err := c.bounds(it, &a); err != nil {
			return err
		}
	}
	if err := c.aggregateForm(it, &a); err != nil {
		return err
	}
	c.pl.items = append(c.pl.items, len(c.pl.aggs))
	c.pl.aggs = append(c.pl.aggs, a)
	return nil
}

// bounds sets the clamping bounds of a, the statement's
// contribution_bounds_per_group or else the policy's.
func (c *checker) bounds(it dpselect.Item, a *aggPlan) error {
	switch b, ok := c.pl.policy.Bounds[a.column]; {
	case it.Bounds != nil:
		a.lo, a.hi = it.Bounds[0], it.Bounds[1]
	case ok:
		a.lo, a.hi = b[0], b[1]
	default:
		return refusef("%s(%s) needs bounds: write %s => (lo, hi), or ask the owner to "+
			"set bounds for %s in the policy", it.Agg, a.column, boundsArgName(it.Agg), a.column)
	}
	if !(a.lo < a.hi) || math.Abs(a.lo) > 1e15 || math.Abs(a.hi) > 1e15 {
		return refusef("bounds of %s(%s) must satisfy lo < hi with |lo|, |hi| <= 1e15, "+
			"got (%v, %v)", it.Agg, a.column, a.lo, a.hi)
	}
	return nil
}

// intervals checks, under OPTIONS confidence, the outputs that carry each
// aggregate's interval, alias_lo and alias_hi, right after it: every
// aggregate needs an alias, and the names must be free.
func (c *checker) intervals() error {
	if c.pl.conf == 0 {
		return nil
	}
	for _, it := range c.st.Items {
		if it.Agg == "" {
			continue
		}
		if it.Alias == "" {
			return refusef("with OPTIONS confidence, every aggregate needs an alias (its interval is released as "+
				"alias_lo and alias_hi): write %s AS name", it.Name())
		}
		for _, sfx := range []string{"_lo", "_hi"} {
			n := strings.ToLower(it.Alias + sfx)
			if c.outputs[n] {
				return refusef("with OPTIONS confidence, %s's interval is released as %s, which another output is "+
					"already named: choose other aliases", it.Alias, it.Alias+sfx)
			}
			c.outputs[n] = true
		}
	}
	return nil
}

// orderBy checks that ORDER BY names outputs (positions were checked by the
// parser).
func (c *checker) orderBy() error {
	for _, o := range c.st.OrderBy {
		if o.Pos == 0 && !c.outputs[strings.ToLower(o.Name)] {
			return refusef("ORDER BY %s: order by an output name or position", o.Name)
		}
	}
	return nil
}

// where checks WHERE: columns of the table (respelled as the schema spells
// them) and calls of functions that cannot fail (safeExpr, groupkeys.go);
// the plan keeps it rendered.
func (c *checker) where() error {
	if c.st.Where == nil {
		return nil
	}
	w, err := c.safeExpr(c.st.Where, "WHERE")
	if err != nil {
		return err
	}
	c.st.Where = w
	c.pl.where = dpselect.String(w)
	return nil
}

// budget checks what the statement asks its partition selection to spend:
// OPTIONS selection_delta applies to a GROUP BY without public keys and stays
// below the statement's delta; without it, a mu statement's selection spends
// SelectionDeltaShare of the scope's delta (an epsilon statement's share is
// calibrate's to choose). The noise is planned once the schema is known
// (completePlan, budget.go).
func (c *checker) budget() error {
	pl, given := c.pl, c.opt.given
	selection := pl.selection()
	if !given["selection_delta"] {
		if selection && given["mu"] {
			pl.deltaS = SelectionDeltaShare * c.scopeDelta
		}
		return nil
	}
	switch d := c.opt.selectionDelta; {
	case !selection && len(pl.keys) > 0:
		return refusef("selection_delta: every GROUP BY column has public keys, " +
			"so there is no partition selection to pay for")
	case !selection:
		return refusef("selection_delta applies to a GROUP BY (its partition selection); this statement has none")
	case given["delta"] && !(d < pl.delta):
		return refusef("selection_delta %v must be below the statement's delta %v (the rest pays the aggregates)",
			d, pl.delta)
	}
	pl.deltaS, pl.deltaSSet = c.opt.selectionDelta, true
	return nil
}

// rowWork bounds the statement's work per row read, and guards WHERE's
// columns by their max_length (cost.go).
func (c *checker) rowWork() error { return c.pl.boundRowWork() }

// gaussianValues returns a bound on the values the Gaussian sampler draws
// for a statement over at most groups groups: per group, each value's
// coordinates under the Gaussian (none under Laplace: its sampler is exact).
func (pl *plan) gaussianValues(groups float64) float64 {
	if pl.cal == nil {
		return 0
	}
	return groups * float64(pl.cal.GaussianDraws())
}

// selection reports whether the statement selects its groups privately (a
// GROUP BY without public keys).
func (pl *plan) selection() bool { return len(pl.keys) > 0 && pl.keySources == nil }

// itemNames returns the output name of each aggregate, by index.
func (pl *plan) itemNames() []string {
	names := make([]string, len(pl.aggs))
	for j, it := range pl.stmt.Items {
		if k := pl.items[j]; k >= 0 {
			names[k] = it.Name()
		}
	}
	return names
}

// StatementDetails is what a protected-mode charge records in its ledger
// row's params, beside the mechanism: the params record mechanism.Protected.
type StatementDetails = mechanism.Protected

// Part is one part of a statement's budget (mechanism.ProtectedPart): one
// noisy value it draws per group (the partition selection's count of
// persons, a count, a sum, a sum of squares, a histogram), with its noise
// law and scale, its share of the budget and its sensitivity as charged.
type Part = mechanism.ProtectedPart

func safeList() string {
	var b []string
	for n := range safeFunctions {
		b = append(b, n)
	}
	sort.Strings(b)
	return strings.Join(b, ", ")
}

// normalQuantileUpper is calibrate.NormalQuantileUpper.
func normalQuantileUpper(p float64) float64 { return calibrate.NormalQuantileUpper(p) }
