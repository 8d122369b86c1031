package protect

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
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
// Gaussian parts always keep the rest.
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
	mid            float64 // AVG: values are centred on (lo+hi)/2
	quant          float64 // fixed-point quantum of SUM/AVG values (a power of two)
	mu             float64 // this aggregate's share of the statement's mu
	// sigmas and L2 sensitivities: the value (count, or sum in units of
	// quant) and, for AVG, the count.
	sigma, sens           float64
	sigmaCount, sensCount float64
	// VAR_POP, STDDEV_POP: the sum of squared centred values, itself centred
	// on sqMid = c^2/2, in units of sqQuant.
	sqMid, sqQuant, sigmaSq, sensSq float64
	// noise = 'laplace': the rounded Laplace laws of the value, the count
	// and the sum of squares (L1 sensitivities).
	lap, lapCount, lapSq release.LaplaceGrid
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
	mu         float64 // the statement's total mu
	// partition selection (GROUP BY only)
	selMu, sigmaSel, tau, deltaS float64
	mech                         mechanism.Mechanism
	details                      StatementDetails
	// laplace: the aggregates get rounded Laplace noise (OPTIONS noise =
	// 'laplace'), calibrated by L1 sensitivity; the selection stays Gaussian.
	laplace bool
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
	pl := &plan{stmt: st, table: table, policy: policies[table], cols: cols, reads: map[string]bool{}}
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
			return nil, refusef("option noise takes 'gaussian' or 'laplace' (a quoted string), not a number")
		}
		switch o.Name {
		case "noise":
			switch strings.ToLower(o.Text) {
			case "gaussian":
			case "laplace":
				pl.laplace = true
			default:
				return nil, refusef("unknown noise '%s': OPTIONS noise takes 'gaussian' (the default) or 'laplace'", o.Text)
			}
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
			return nil, refusef("unknown option %q: OPTIONS takes mu, or epsilon and delta, max_groups_contributed, selection_delta and noise", o.Name)
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
	if pl.laplace && seen["mu"] {
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
	// Budget: mu, split equally in mu^2 across selection and aggregates.
	ref := scopeDelta
	if seen["delta"] {
		ref = delta
	}
	selection := len(pl.keys) > 0 && pl.keySources == nil
	if selection {
		pl.deltaS = SelectionDeltaShare * ref
	}
	if seen["selection_delta"] {
		d := optionValue(st, "selection_delta")
		switch {
		case !selection && len(pl.keys) > 0:
			return nil, refusef("selection_delta: every GROUP BY column has public keys, so there is no partition selection to pay for")
		case !selection:
			return nil, refusef("selection_delta applies to a GROUP BY (its partition selection); this statement has none")
		case seen["delta"] && !(d <= delta/2):
			return nil, refusef("selection_delta %v must be at most half the statement's delta %v (the rest pays the aggregates)", d, delta)
		}
		pl.deltaS = d
	}
	if !seen["mu"] {
		// (epsilon, delta): the statement's loss is a Gaussian shifted by
		// eta = -log(1-delta_s), plus delta_s at +infinity.
		eta := -math.Log1p(-pl.deltaS)
		m, err := accountant.Mu(eps-eta, delta-pl.deltaS)
		if err != nil {
			return nil, refusef("epsilon %v and delta %v: %v", eps, delta, err)
		}
		mu = m
	}
	pl.mu = mu
	parts := len(pl.aggs)
	if selection {
		parts++
	}
	part := mu / math.Sqrt(float64(parts))
	g := math.Sqrt(float64(pl.maxGroups))
	r := float64(pl.maxRows)
	var details []Part
	if pl.laplace && !selection {
		part = 0
	}
	if selection {
		pl.selMu = part
		pl.sigmaSel = g / part
		if release.Grid(pl.sigmaSel) > 1 {
			return nil, refusef("mu %v is too small for %d parts (the selection's noise would exceed 2^16)", mu, parts)
		}
		z := normalQuantileUpper(pl.deltaS / float64(pl.maxGroups))
		pl.tau = 1 + pl.sigmaSel*z
		details = append(details, Part{Part: "selection", Mu: part, Sigma: pl.sigmaSel, Sensitivity: g, Delta: pl.deltaS, Threshold: pl.tau})
	}
	if pl.laplace {
		for _, a := range pl.aggs {
			if a.kind == dpselect.Median {
				return nil, refusef("MEDIAN takes Gaussian noise only: leave out noise = 'laplace'")
			}
		}
		d, err := pl.planLaplace(eps, delta)
		if err != nil {
			return nil, err
		}
		details = append(details, d...)
	}
	for i := range pl.aggs {
		if pl.laplace {
			break
		}
		a := &pl.aggs[i]
		a.mu = part
		switch a.kind {
		case dpselect.Count:
			a.sens = r * g
			a.sigma = a.sens / part
			if release.Grid(a.sigma) > 1 {
				return nil, refusef("mu %v is too small for COUNT (its noise would exceed 2^16)", mu)
			}
		case dpselect.Median:
			// A histogram of MedianBuckets counts per group: a person's
			// max_rows rows move one group's histogram by at most max_rows
			// in L2, in at most max_groups groups.
			a.sens = r * g
			a.sigma = a.sens / part
			if release.Grid(a.sigma) > 1 {
				return nil, refusef("mu %v is too small for MEDIAN (its noise would exceed 2^16)", mu)
			}
		default: // SUM, AVG, VAR_POP, STDDEV_POP
			m := part
			c := math.Max(math.Abs(a.lo), math.Abs(a.hi))
			if a.needsCount() {
				m = part / math.Sqrt2
				if a.needsSq() {
					m = part / math.Sqrt(3)
				}
				a.mid = (a.lo + a.hi) / 2
				c = (a.hi - a.lo) / 2
				a.sensCount = r * g
				a.sigmaCount = a.sensCount / m
				if release.Grid(a.sigmaCount) > 1 {
					return nil, refusef("mu %v is too small for %s's count (its noise would exceed 2^16)", mu, a.kind)
				}
			}
			// Values are rounded to the quantum q, a power of two no finer
			// than the noise grid, so the noisy sum is exact on the grid and
			// each value moves at most q/2 beyond its bound.
			a.quant = release.Grid(r * g * c / m)
			for range 8 {
				a.sens = r * g * (c + a.quant/2)
				a.sigma = a.sens / m
				if q := release.Grid(a.sigma); q > a.quant {
					a.quant = q
					continue
				}
				break
			}
			if a.needsSq() {
				// Squares of centred values lie in [0, c^2]; centred again
				// on c^2/2 they move a sum by at most c^2/2 each.
				a.sqMid = c * c / 2
				a.sqQuant = release.Grid(r * g * a.sqMid / m)
				for range 8 {
					a.sensSq = r * g * (a.sqMid + a.sqQuant/2)
					a.sigmaSq = a.sensSq / m
					if q := release.Grid(a.sigmaSq); q > a.sqQuant {
						a.sqQuant = q
						continue
					}
					break
				}
			}
		}
		d := Part{Part: strings.ToLower(a.kind), Column: a.column, Mu: part, Sigma: a.sigma, Sensitivity: a.sens}
		switch a.kind {
		case dpselect.Count:
		case dpselect.Median:
			d.Bounds, d.Buckets = []float64{a.lo, a.hi}, MedianBuckets
		default:
			d.Bounds, d.Quantum = []float64{a.lo, a.hi}, a.quant
		}
		if a.needsCount() {
			d.SigmaCount, d.SensitivityCount = a.sigmaCount, a.sensCount
		}
		if a.needsSq() {
			d.SigmaSquares, d.SensitivitySquares, d.QuantumSquares = a.sigmaSq, a.sensSq, a.sqQuant
		}
		details = append(details, d)
	}
	switch {
	case pl.laplace: // set by planLaplace
	case selection:
		pl.mech = mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: mu, Delta: pl.deltaS}
	default:
		pl.mech = mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu}
	}
	sd := StatementDetails{Table: table, PrivacyUnit: pl.policy.PrivacyUnit, MaxGroups: pl.maxGroups, MaxRows: pl.maxRows,
		Parts: details, NoiseTV: release.NoiseTV, Noise: "gaussian"}
	if pl.laplace {
		sd.Noise = "laplace"
	}
	if pl.keySources != nil {
		sd.PublicKeys = pl.policy.PublicKeys
	}
	if seen["epsilon"] {
		sd.EpsilonRequested, sd.DeltaRequested = eps, delta
	}
	// The Gaussian sampler's error: NoiseTV per value it draws (the rounded
	// Laplace sampler is exact). Groups: one without GROUP BY, every key
	// combination with public keys (set again once they are read), else a
	// public bound.
	groups := 1.0
	if selection {
		groups = rowsBound
	}
	sd.NoiseTVValues = pl.gaussianValues(groups)
	sd.NoiseTVTotal = sd.NoiseTVValues * release.NoiseTV
	pl.details = sd
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
// for a statement over at most groups groups: per group, the selection's
// noisy count and (noise = 'gaussian') each aggregate's noisy values.
func (pl *plan) gaussianValues(groups float64) float64 {
	per := 0.0
	if pl.sigmaSel > 0 {
		per++
	}
	if !pl.laplace {
		for _, a := range pl.aggs {
			if a.kind == dpselect.Median {
				per += MedianBuckets
				continue
			}
			per++
			if a.needsCount() {
				per++
			}
			if a.needsSq() {
				per++
			}
		}
	}
	return groups * per
}

// StatementDetails is what a protected-mode charge records in its ledger
// row's params, beside the mechanism: the params record mechanism.Protected.
type StatementDetails = mechanism.Protected

// Part is one part of a statement's budget (mechanism.ProtectedPart): the
// partition selection or one aggregate, with its share of mu, its noise and
// its L2 sensitivity; or, under noise = 'laplace', an aggregate's Laplace
// scales, epsilons and L1 sensitivities (each as charged: S + g of
// release.LaplaceFor).
type Part = mechanism.ProtectedPart

func safeList() string {
	var b []string
	for n := range safeFunctions {
		b = append(b, n)
	}
	sort.Strings(b)
	return strings.Join(b, ", ")
}

// normalQuantileUpper returns z with P(N(0,1) > z) <= p, the smallest such
// up to rounding: erfcinv gives it, and z is nudged up until erfc confirms.
func normalQuantileUpper(p float64) float64 {
	z := math.Sqrt2 * math.Erfcinv(2*p)
	for 0.5*math.Erfc(z/math.Sqrt2) > p {
		z = math.Nextafter(z, math.Inf(1)) + 1e-12*math.Abs(z)
	}
	return z
}
