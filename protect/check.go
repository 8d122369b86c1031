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
}

// ruleFunctions are the functions the rewritten SQL itself calls; the
// execution authorizer allows them and safeFunctions, nothing else. like is
// the LIKE operator's (the parser accepts LIKE 'literal' without ESCAPE; a
// call like(...) is not in safeFunctions and is refused by the checker).
var ruleFunctions = []string{"count", "sum", "max", "min", "round", "typeof", "row_number", "random", "like"}

// aggPlan is one DP aggregate of a statement.
type aggPlan struct {
	kind   string // COUNT, SUM, AVG
	column string // "" for COUNT(*)
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
	keys   []string          // group-by columns, as the schema spells them
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
	// keyForms are the GROUP BY columns' affinities and collations, which
	// fix the keys' canonical form (keys.go); nil until read.
	keyForms []KeyForm
}

// Refusal is an analyst statement refused before anything was read or
// charged; its message says what is allowed.
type Refusal struct{ Msg string }

func (e *Refusal) Error() string { return "refused: " + e.Msg }

func refusef(format string, args ...any) error {
	return &Refusal{Msg: fmt.Sprintf(format, args...)}
}

// checkStatement checks a parsed statement against the owner's policies and
// the scope's delta and returns its plan.
func checkStatement(st *dpselect.Statement, policies map[string]Policy, cols map[string]string, scopeDelta float64) (*plan, error) {
	var table string
	for t := range policies {
		if strings.EqualFold(t, st.Table) {
			table = t
		}
	}
	if table == "" {
		return nil, refusef("table %q is not protected: SELECT WITH DIFFERENTIAL_PRIVACY reads protected tables only (query public tables with plain SQL)", st.Table)
	}
	pl := &plan{stmt: st, table: table, policy: policies[table], cols: cols, reads: map[string]bool{}, room: math.Inf(1), noise: calibrate.Auto}
	col := func(name, where string) (string, error) {
		c, ok := cols[strings.ToLower(name)]
		if !ok {
			return "", refusef("no column %q in %s (%s)", name, table, where)
		}
		pl.reads[strings.ToLower(c)] = true
		return c, nil
	}
	if pl.policy.PrivacyUnit != "" {
		if _, err := col(pl.policy.PrivacyUnit, "privacy unit"); err != nil {
			return nil, err
		}
	}
	// Options.
	var mu, eps, delta float64
	pl.maxGroups, pl.maxRows = pl.policy.MaxGroups, pl.policy.MaxRows
	seen := map[string]bool{}
	for _, o := range st.Options {
		if seen[o.Name] {
			return nil, refusef("option %s is given twice", o.Name)
		}
		seen[o.Name] = true
		if o.IsText != (o.Name == "noise") {
			if o.IsText {
				return nil, refusef("option %s takes a number, not the string '%s'", o.Name, o.Text)
			}
			return nil, refusef("option noise takes 'auto', 'laplace' or 'gaussian' (a quoted string), not a number")
		}
		switch o.Name {
		case "noise":
			switch n := calibrate.Law(strings.ToLower(o.Text)); n {
			case calibrate.Auto, calibrate.Laplace, calibrate.Gaussian:
				pl.noise = n
			default:
				return nil, refusef("unknown noise '%s': OPTIONS noise takes 'auto' (the default: the law of lower error), 'laplace' or 'gaussian'", o.Text)
			}
		case "confidence":
			if !(o.Value >= 0.5 && o.Value < 1) {
				return nil, refusef("confidence must lie in [0.5, 1), got %v (for example confidence = 0.95)", o.Value)
			}
			pl.conf = o.Value
		case "mu":
			mu = o.Value
		case "epsilon":
			eps = o.Value
		case "delta":
			delta = o.Value
		case "max_groups_contributed":
			if o.Value != math.Trunc(o.Value) || o.Value < 1 || o.Value > float64(pl.policy.MaxGroups) {
				return nil, refusef("max_groups_contributed must be an integer in [1, %d] (the policy's max_groups)", pl.policy.MaxGroups)
			}
			pl.maxGroups = int(o.Value)
		case "selection_delta":
			if !(o.Value > 0 && o.Value < 1) {
				return nil, refusef("selection_delta must lie in (0, 1), got %v", o.Value)
			}
		case "privacy_unit_column":
			return nil, refusef("the privacy unit is set by the owner's policy, not by OPTIONS")
		default:
			return nil, refusef("unknown option %q: OPTIONS takes mu, or epsilon and delta, max_groups_contributed, selection_delta, noise and confidence", o.Name)
		}
	}
	switch {
	case seen["mu"] && (seen["epsilon"] || seen["delta"]):
		return nil, refusef("give mu, or epsilon and delta, not both")
	case seen["mu"]:
		if !(mu > 0) || math.IsInf(mu, 0) || mu > 100 {
			return nil, refusef("mu must lie in (0, 100], got %v", mu)
		}
	case seen["epsilon"] && seen["delta"]:
		if !(eps > 0) || math.IsInf(eps, 0) || !(delta > 0 && delta < 1) {
			return nil, refusef("epsilon must be positive and finite and delta in (0, 1), got %v and %v", eps, delta)
		}
	default:
		return nil, refusef("OPTIONS must give mu, or epsilon and delta")
	}
	if pl.noise == calibrate.Laplace && seen["mu"] {
		return nil, refusef("noise = 'laplace' is calibrated from an epsilon budget: give epsilon and delta, not mu")
	}
	// Group keys.
	for _, k := range st.GroupBy {
		c, err := col(k, "GROUP BY")
		if err != nil {
			return nil, err
		}
		for _, o := range pl.keys {
			if o == c {
				return nil, refusef("GROUP BY names %s twice", c)
			}
		}
		pl.keys = append(pl.keys, c)
	}
	if len(pl.keys) == 0 {
		pl.maxGroups = 1
	}
	for _, k := range pl.keys {
		src, ok := pl.policy.PublicKeys[k]
		if !ok {
			pl.keySources = nil
			break
		}
		kt, kc, _ := strings.Cut(src, ".")
		for t := range policies {
			if strings.EqualFold(t, kt) {
				return nil, refusef("the public keys of %s come from %s, which is now protected: ask the owner to fix the policy", k, kt)
			}
		}
		pl.keySources = append(pl.keySources, [2]string{kt, kc})
	}
	// Items.
	names := map[string]bool{}
	for _, it := range st.Items {
		n := strings.ToLower(it.Name())
		if names[n] {
			return nil, refusef("two outputs are named %s: give them distinct aliases", it.Name())
		}
		names[n] = true
		if it.Agg == "" {
			idx := -1
			for i, k := range pl.keys {
				if strings.EqualFold(k, it.Column) {
					idx = i
				}
			}
			if idx < 0 {
				return nil, refusef("column %s is neither a GROUP BY key nor inside a DP aggregate: only group keys and DP aggregates (COUNT, SUM, AVG, VAR_POP, STDDEV_POP, MEDIAN) may be selected", it.Column)
			}
			pl.items = append(pl.items, -1-idx)
			continue
		}
		a := aggPlan{kind: it.Agg}
		if it.Column != "" {
			c, err := col(it.Column, it.Agg)
			if err != nil {
				return nil, err
			}
			a.column = c
		}
		if it.Agg != dpselect.Count {
			switch b, ok := pl.policy.Bounds[a.column]; {
			case it.Bounds != nil:
				a.lo, a.hi = it.Bounds[0], it.Bounds[1]
			case ok:
				a.lo, a.hi = b[0], b[1]
			default:
				return nil, refusef("%s(%s) needs bounds: write contribution_bounds_per_group => (lo, hi), or ask the owner to set bounds for %s in the policy", it.Agg, a.column, a.column)
			}
			if !(a.lo < a.hi) || math.Abs(a.lo) > 1e15 || math.Abs(a.hi) > 1e15 {
				return nil, refusef("bounds of %s(%s) must satisfy lo < hi with |lo|, |hi| <= 1e15, got (%v, %v)", it.Agg, a.column, a.lo, a.hi)
			}
		}
		pl.items = append(pl.items, len(pl.aggs))
		pl.aggs = append(pl.aggs, a)
	}
	if len(pl.aggs) == 0 {
		return nil, refusef("a DP SELECT needs at least one aggregate (COUNT, SUM, AVG, VAR_POP, STDDEV_POP or MEDIAN); group keys alone are not released")
	}
	if pl.conf > 0 {
		// Each aggregate's interval is released as alias_lo and alias_hi,
		// right after it.
		for _, it := range st.Items {
			if it.Agg == "" {
				continue
			}
			if it.Alias == "" {
				return nil, refusef("with OPTIONS confidence, every aggregate needs an alias (its interval is released as alias_lo and alias_hi): write %s AS name", it.Name())
			}
			for _, sfx := range []string{"_lo", "_hi"} {
				n := strings.ToLower(it.Alias + sfx)
				if names[n] {
					return nil, refusef("with OPTIONS confidence, %s's interval is released as %s, which another output is already named: choose other aliases", it.Alias, it.Alias+sfx)
				}
				names[n] = true
			}
		}
	}
	for _, o := range st.OrderBy {
		if o.Pos == 0 && !names[strings.ToLower(o.Name)] {
			return nil, refusef("ORDER BY %s: order by an output name or position", o.Name)
		}
	}
	// WHERE.
	if st.Where != nil {
		var err error
		dpselect.Walk(st.Where, func(e dpselect.Expr) {
			if err != nil {
				return
			}
			switch e := e.(type) {
			case *dpselect.Col:
				var c string
				if c, err = col(e.Name, "WHERE"); err == nil {
					e.Name = c
				}
			case *dpselect.Call:
				n, ok := safeFunctions[e.Name]
				if !ok {
					err = refusef("function %s() is not allowed in WHERE: only functions that cannot fail on any input are (%s)", e.Name, safeList())
				} else if len(e.Args) < n {
					err = refusef("%s() needs at least %d arguments here", e.Name, n)
				}
			}
		})
		if err != nil {
			return nil, err
		}
		pl.where = dpselect.String(st.Where)
	}
	// Budget: what the statement asks for. Its noise is planned once the
	// schema is known (completePlan, budget.go).
	selection := pl.selection()
	if seen["selection_delta"] {
		d := optionValue(st, "selection_delta")
		switch {
		case !selection && len(pl.keys) > 0:
			return nil, refusef("selection_delta: every GROUP BY column has public keys, so there is no partition selection to pay for")
		case !selection:
			return nil, refusef("selection_delta applies to a GROUP BY (its partition selection); this statement has none")
		case seen["delta"] && !(d < delta):
			return nil, refusef("selection_delta %v must be below the statement's delta %v (the rest pays the aggregates)", d, delta)
		}
		pl.deltaS, pl.deltaSSet = d, true
	} else if selection && seen["mu"] {
		// A mu statement's selection spends a share of the scope's delta.
		pl.deltaS = SelectionDeltaShare * scopeDelta
	}
	pl.mu, pl.eps, pl.delta = mu, eps, delta
	if err := pl.boundRowWork(); err != nil {
		return nil, err
	}
	return pl, nil
}

// optionValue returns the value of a numeric option of st.
func optionValue(st *dpselect.Statement, name string) float64 {
	for _, o := range st.Options {
		if o.Name == name {
			return o.Value
		}
	}
	return 0
}

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
