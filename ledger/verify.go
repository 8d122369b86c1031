package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/dpsql/dpsql/accountant"
)

// ErrMismatch reports that what the file says (its protecting triggers,
// dp_budget, dp_scope_state) differs from what its chain says.
var ErrMismatch = errors.New("the ledger's tables do not match its chain")

// Report is what VerifyAt checked.
type Report struct {
	Rows    int // rows of every kind whose hash and link were checked
	Charges int // charge events
	Budgets int // budget events
	Records int // records: events that spend nothing (policy, account, outcome)
	// Checkpoints are the checkpoint rows, each compared with the state
	// the rows before it give.
	Checkpoints int
	Scopes      int  // scopes whose status was recomputed and compared
	Head        Head // the head of the chain
	// Version is the file's schema version (PRAGMA user_version): SchemaVersion,
	// or an earlier one that the next write upgrades.
	Version int
	// Notes name what verified but is worth an auditor's look: a rigorous
	// epsilon recorded by an earlier release's rule (or edited within that
	// rule's distance of today's figure).
	Notes []string
}

// Verify checks the ledger (see VerifyAt) and returns the number of rows
// checked, or the number of good rows before the first bad one.
func Verify(ctx context.Context, db Queryer) (int, error) {
	r, err := VerifyAt(ctx, db, nil)
	return r.Rows, err
}

// VerifyAt checks the file's ledger, failing at the first problem, which it
// names:
//   - every row's hash and link to the previous row, and that its mu matches
//     its content (errors wrap ErrChainBroken);
//   - if want is not nil, that the chain still contains that exact row (an
//     auditor's kept head: a deleted or rewritten tail fails);
//   - that the schema version is one this dpsql reads (0 to SchemaVersion;
//     a later one fails with ErrNewerSchema, before anything else is read)
//     and every object dpsql creates in the file (the ledger's tables,
//     indexes, triggers and view, and dp_policy, dp_account and the caches
//     where present) has the SQL dpsql gives it, with no other trigger on
//     their tables;
//   - SQLite's integrity check of those tables and their indexes (the pages
//     that hold them);
//   - that every value of the ledger's tables has the type dpsql writes;
//   - that dp_budget matches the chain's budget events (schema versions 1 and 2),
//     creation times included;
//   - that each scope's figures in dp_scope_state match those recomputed from
//     the chain: the last charge's id exactly, every figure to a few units
//     in the last place (figuresULPs); a rigorous epsilon recorded by an
//     earlier release's rule is accepted and named in Report.Notes.
//
// All but the first two (and a later version's) wrap ErrMismatch. What it cannot see: a file whose
// chain and derived tables were rewritten together and consistently (a
// tail deleted and dp_scope_state recomputed, say) is a consistent file;
// only a head kept elsewhere (want) catches that.
func VerifyAt(ctx context.Context, db Queryer, want *Head) (Report, error) {
	var rep Report
	v, has, err := schemaVersion(ctx, db)
	if err != nil {
		return rep, err
	}
	if !has {
		return rep, ErrNoLedger
	}
	rep.Version = v
	if err := knownVersion(v); err != nil {
		return rep, err
	}
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		return rep, err
	}
	if rep.Rows, err = checkChain(rows); err != nil {
		return rep, err
	}
	rep.Head = Head{Hash: GenesisHash}
	for _, r := range rows {
		rep.Head = Head{ID: r.ID, Hash: r.Hash}
		switch {
		case r.kind() == EventBudget:
			rep.Budgets++
		case IsRecordKind(r.kind()):
			rep.Records++
		case r.kind() == EventCheckpoint:
			rep.Checkpoints++
		default:
			rep.Charges++
		}
	}
	if want != nil && !containsHead(rows, *want) {
		return rep, fmt.Errorf("%w: the chain does not contain the kept head %s (its head is %s): rows were removed or rewritten since that head was taken", ErrChainBroken, want, rep.Head)
	}
	if _, err := checkObjects(ctx, db, v); err != nil {
		return rep, err
	}
	if err := checkIntegrity(ctx, db); err != nil {
		return rep, err
	}
	if err := checkTypes(ctx, db, v); err != nil {
		return rep, err
	}
	tb, err := tableBudgets(ctx, db)
	if err != nil {
		return rep, err
	}
	var legacy map[string]accountant.Budget
	if v == 0 {
		legacy = tb
	}
	fs, err := computeState(rows, legacy)
	if err != nil {
		return rep, err
	}
	if v >= 1 {
		if err := compareBudgets(fs, tb); err != nil {
			return rep, err
		}
		if err := compareCreated(ctx, db, fs); err != nil {
			return rep, err
		}
	}
	if rep.Scopes, rep.Notes, err = compareStates(ctx, db, fs, v >= 1, true); err != nil {
		return rep, err
	}
	// Every checkpoint against the rows before it, and the compositions
	// kept for the last (a process resumes from them).
	if _, err := checkCheckpoints(ctx, db, rows); err != nil {
		return rep, err
	}
	return rep, nil
}

func compareBudgets(fs *fileState, table map[string]accountant.Budget) error {
	for _, name := range sortedScopes(fs) {
		want := fs.scopes[name].budget
		got, ok := table[name]
		if !ok {
			return fmt.Errorf("%w: scope %q has a budget event but no dp_budget row", ErrMismatch, name)
		}
		if got.Mu != want.Mu || got.Delta != want.Delta || got.Epsilon != want.Epsilon || got.Relation() != want.Relation() {
			return fmt.Errorf("%w: dp_budget says scope %q has mu %g, delta %g, epsilon %g, %s; its budget event says mu %g, delta %g, epsilon %g, %s",
				ErrMismatch, name, got.Mu, got.Delta, got.Epsilon, got.Relation(), want.Mu, want.Delta, want.Epsilon, want.Relation())
		}
	}
	if cap, ok := table[accountant.FileScope]; ok != fs.capped {
		return fmt.Errorf("%w: dp_budget and the chain disagree on whether the file's total is capped", ErrMismatch)
	} else if ok {
		want := fs.total.budget
		if cap.Mu != want.Mu || cap.Delta != want.Delta || cap.Epsilon != want.Epsilon || cap.Relation() != want.Relation() {
			return fmt.Errorf("%w: dp_budget says the file's cap is mu %g, delta %g, epsilon %g, %s; its budget event says mu %g, delta %g, epsilon %g, %s",
				ErrMismatch, cap.Mu, cap.Delta, cap.Epsilon, cap.Relation(), want.Mu, want.Delta, want.Epsilon, want.Relation())
		}
	}
	for name := range table {
		if _, ok := fs.scopes[name]; !ok && name != accountant.FileScope {
			return fmt.Errorf("%w: dp_budget has scope %q, which has no budget event in the chain", ErrMismatch, name)
		}
	}
	return nil
}

// How dp_scope_state's figures are compared with those recomputed from the
// chain. A charge and Verify compute them by the same deterministic rules
// from the same entries (the sum of squares in row order, the composition
// extended entry by entry, the certified epsilon's and Room's searches), so
// they agree bit for bit; figuresULPs allows for a compiler that fuses a
// multiply-add in one place and not in the other (another platform's
// build). Figures written by earlier releases' rules are recognised
// exactly where their rule can be recomputed (mu_spent without Shown,
// mu_remaining as the budget's GDP remainder, epsilon_spent from the
// recorded mu_spent). A rigorous epsilon recorded by an earlier composition
// rule (groups of identical entries composed afresh; a round-off bound that
// grew per charge) is another upper bound of the same composition, within
// earlierRule of today's (TestVerifyEarlierRuleFigures): Verify accepts it
// but names it in Report.Notes, since an edit within that distance looks the
// same. So is a mu_remaining within earlierRule of today's: accountant.Room
// searches for it to a stated precision, and another release's search
// (other grid, other steps) lands elsewhere within it. No charge reads these
// figures: they are what SQL readers see.
const (
	figuresULPs = 4
	earlierRule = 1e-3
)

// ulpsApart reports whether x and y are within n units in the last place
// (equal infinities included).
func ulpsApart(x, y float64, n uint64) bool {
	if x == y {
		return true
	}
	if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) || (x < 0) != (y < 0) {
		return false
	}
	a, b := math.Float64bits(math.Abs(x)), math.Float64bits(math.Abs(y))
	if a > b {
		a, b = b, a
	}
	return b-a <= n
}

// spentAgrees reports whether a recorded mu_spent is the recomputed one, or
// what an earlier release recorded for it (the root of the sum of squares
// without Budget.Shown).
func spentAgrees(got float64, sc *scopeState, want float64) bool {
	return ulpsApart(got, want, figuresULPs) || ulpsApart(got, math.Sqrt(sc.spend.SumSq), figuresULPs)
}

// remainingAgrees reports whether a recorded mu_remaining is the recomputed
// one (what the scope can still charge), or what earlier releases recorded:
// the budget's GDP remainder after the recorded mu_spent.
func remainingAgrees(got, spent float64, sc *scopeState, want float64) bool {
	if ulpsApart(got, want, figuresULPs) {
		return true
	}
	b := sc.budget.Mu
	legacy := math.Sqrt(math.Max(b*b-spent*spent, 0))
	if math.IsInf(b, 1) {
		legacy = b
	}
	return ulpsApart(got, legacy, figuresULPs)
}

// roomSearchAgrees reports whether a recorded mu_remaining lies within
// earlierRule of the recomputed one: what another release's search for the
// same figure (accountant.Room, to 1e-4 on a mixed scope; 1e-3 before it)
// could have recorded.
func roomSearchAgrees(got, want float64) bool {
	if math.IsInf(got, 0) || math.IsInf(want, 0) || !(want > 0) {
		return false
	}
	return math.Abs(got/want-1) <= earlierRule
}

// rigorousAgrees reports whether a recorded rigorous epsilon is the
// recomputed one (exact: true, false), or within an earlier rule's distance
// of it (false, true).
func rigorousAgrees(got, want float64) (exact, earlier bool) {
	if ulpsApart(got, want, figuresULPs) {
		return true, false
	}
	if math.IsInf(got, 1) || math.IsInf(want, 1) {
		return false, false
	}
	return false, got >= want*(1-earlierRule) && got <= want*(1+earlierRule)
}

func compareStates(ctx context.Context, db Queryer, fs *fileState, withTotal, withRoom bool) (int, []string, error) {
	type recorded struct {
		through                  int64
		spent, remaining, epsGDP float64
		rig                      sql.NullFloat64
	}
	rows, err := db.QueryContext(ctx, `SELECT scope, through_id, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous FROM dp_scope_state`)
	if err != nil {
		return 0, nil, err
	}
	file := map[string]recorded{}
	for rows.Next() {
		var s string
		var r recorded
		if err := rows.Scan(&s, &r.through, &r.spent, &r.remaining, &r.epsGDP, &r.rig); err != nil {
			rows.Close()
			return 0, nil, err
		}
		file[s] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	for s := range file {
		if sc, err := fs.scope(s); err != nil || sc.entries == 0 {
			return 0, nil, fmt.Errorf("%w: dp_scope_state has figures for scope %q, which has no charges in the chain", ErrMismatch, s)
		}
	}
	n := 0
	var notes []string
	names := sortedScopes(fs)
	if withTotal { // a version-0 file has no total
		names = append(names, accountant.FileScope)
	}
	for _, name := range names {
		sc, _ := fs.scope(name)
		if sc.entries == 0 {
			continue
		}
		n++
		got, ok := file[name]
		if !ok {
			return n, nil, fmt.Errorf("%w: scope %q has %d charges in the chain but no dp_scope_state row", ErrMismatch, name, sc.entries)
		}
		want, err := sc.figures(name)
		if err != nil {
			return n, nil, err
		}
		if withRoom {
			if want.MuRemaining, err = sc.ownRoom(ctx); err != nil {
				return n, nil, fmt.Errorf("scope %q cannot be accounted: %w", name, err)
			}
		} else {
			got.remaining = want.MuRemaining // a search: left to Verify
		}
		epsGDP := math.Inf(1) // epsilon_spent is the epsilon of the recorded mu_spent (checked first)
		if !math.IsInf(got.spent, 1) {
			epsGDP, _ = accountant.Epsilon(got.spent, sc.budget.Delta)
		}
		var exact, earlier bool
		if got.rig.Valid && want.EpsilonRigorous.Valid {
			exact, earlier = rigorousAgrees(got.rig.Float64, want.EpsilonRigorous.Float64)
		}
		bad := ""
		switch {
		case got.through != sc.lastID:
			bad = fmt.Sprintf("through_id %d, but its last charge is row %d", got.through, sc.lastID)
		case !spentAgrees(got.spent, sc, want.MuSpent):
			bad = fmt.Sprintf("mu_spent %.17g, recomputed %.17g", got.spent, want.MuSpent)
		case !remainingAgrees(got.remaining, got.spent, sc, want.MuRemaining) && !roomSearchAgrees(got.remaining, want.MuRemaining):
			bad = fmt.Sprintf("mu_remaining %.17g, recomputed %.17g", got.remaining, want.MuRemaining)
		case !ulpsApart(got.epsGDP, epsGDP, figuresULPs):
			bad = fmt.Sprintf("epsilon_spent %.17g, recomputed %.17g", got.epsGDP, epsGDP)
		case got.rig.Valid != want.EpsilonRigorous.Valid:
			bad = fmt.Sprintf("epsilon_rigorous %v, recomputed %v", nullable(got.rig), nullable(want.EpsilonRigorous))
		case got.rig.Valid && !exact && !earlier:
			bad = fmt.Sprintf("epsilon_rigorous %.17g, recomputed %.17g", got.rig.Float64, want.EpsilonRigorous.Float64)
		case !remainingAgrees(got.remaining, got.spent, sc, want.MuRemaining):
			notes = append(notes, fmt.Sprintf("dp_scope_state of scope %q says mu_remaining %.17g, which this version recomputes as %.17g "+
				"(relative difference %.2g): recorded by another release's search for it, or edited; the next charge to the scope rewrites it",
				name, got.remaining, want.MuRemaining, got.remaining/want.MuRemaining-1))
		case earlier:
			notes = append(notes, fmt.Sprintf("dp_scope_state of scope %q says epsilon_rigorous %.17g, which this version recomputes as %.17g "+
				"(relative difference %.2g): recorded by an earlier release's accounting rule, or edited; the next charge to the scope rewrites it",
				name, got.rig.Float64, want.EpsilonRigorous.Float64, got.rig.Float64/want.EpsilonRigorous.Float64-1))
		}
		if bad != "" {
			return n, nil, fmt.Errorf("%w: dp_scope_state of scope %q says %s", ErrMismatch, name, bad)
		}
	}
	return n, notes, nil
}

func nullable(x sql.NullFloat64) any {
	if !x.Valid {
		return "NULL"
	}
	return x.Float64
}

func sortedScopes(fs *fileState) []string {
	out := make([]string, 0, len(fs.scopes))
	for s := range fs.scopes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
