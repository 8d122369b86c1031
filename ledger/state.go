package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// What the chain says, computed by this process. A charge never relies on a
// composition it did not compute: dp_budget and dp_scope_state are written
// for SQL readers and compared by Verify, but never read to decide. The last
// state is kept in memory keyed by the chain's head (id and hash of its last
// row); when the head moved (another process charged, or a row was edited in
// place, which changes the hash), the state is recomputed from dp_ledger,
// after checking the whole chain.

// scopeState is one scope as the chain says: its budget and what its charges
// add up to.
type scopeState struct {
	budget  accountant.Budget
	spend   accountant.Spend
	entries int64       // charges
	lastID  int64       // id of the last charge (0: none)
	fig     *statusMemo // its status, once computed (nil: not yet)
	// What it can still charge (ownRoom), once computed: guarded by
	// roomMemoMu.
	room   float64
	roomOK bool
}

// statusMemo holds a scope state's status, computed once: what
// dp_scope_state must say of it (a charge compares them before it writes).
type statusMemo struct {
	once sync.Once
	st   Status
	err  error
}

// figures returns s's figures as dp_scope_state must hold them (MuSpent,
// EpsilonSpent, EpsilonRigorous; MuRemaining is ownRoom's): computed by
// statusBut once per state, or, for a state made by a charge (with), those
// the charge recorded.
func (s *scopeState) figures(name string) (Status, error) {
	if s.fig == nil {
		return s.statusBut(name)
	}
	s.fig.once.Do(func() { s.fig.st, s.fig.err = s.statusBut(name) })
	return s.fig.st, s.fig.err
}

// fileState is every scope of a file at one head of its chain, and the total
// over all of them (FileScope).
type fileState struct {
	head   Head
	scopes map[string]*scopeState
	total  *scopeState // budget: the file's cap, or Mu = +Inf without one
	capped bool
	// Since the last checkpoint row (checkpoint.go): rows, and charges of
	// other than Gaussian entries.
	sinceRows, sinceNonGaussian int
	legacy                      bool // computed from a version-0 file (budgets from dp_budget)
	// created is when each budget (the cap's as FileScope) was created, as
	// its event says, for the budgets whose events this state read (a state
	// resumed from a checkpoint knows those after it): dp_budget's
	// created_at must agree.
	created map[string]string
}

// roomTV is the samplers' error of one more scalar dp_gaussian call (a
// value drawn within 2^-125 of its law in total variation): what can still
// be charged is the room of that call, on every surface.
const roomTV = 0x1p-125

// roomOf returns what a scope of budget b that spent s can still charge by
// its own budget: the largest mu of one more add/remove Gaussian call (its
// sampler within tv of its law) that accountant.Decide accepts
// (accountant.Room; a replace-one scope counts the call twice, so half its
// room; +Inf for the file's total without a cap).
//
// A room that cannot be computed (accountant.Room fails other than by ctx)
// never refuses a charge the budget check accepted: the figure is then the
// mu Room returns with its error, one Decide accepts (0, or a smaller one
// than the search would have found), never more than the scope can charge.
// The failure is a function of the state, so Verify, recomputing through
// this same function, records the same figure.
func roomOf(ctx context.Context, b accountant.Budget, s accountant.Spend, tv float64) (float64, error) {
	r, err := accountantRoom(ctx, b, s, tv)
	if err != nil && ctx.Err() == nil {
		if !(r >= 0) || math.IsInf(r, 1) {
			r = 0
		}
		err = nil
	}
	if b.Relation() == mechanism.ReplaceOne {
		r /= 2 // an add/remove call of mu is 2 mu in a replace-one scope
	}
	return r, err
}

// accountantRoom is accountant.Room (tests replace it to make it fail).
var accountantRoom = accountant.Room

// roomMemoMu guards every scopeState's room memo (states share scope
// states, and readers compute figures concurrently).
var roomMemoMu sync.Mutex

// ownRoom returns roomOf the scope's budget and spend at roomTV: the
// mu_remaining dp_scope_state records for it. Memoised once computed (a
// stopped computation is not).
func (s *scopeState) ownRoom(ctx context.Context) (float64, error) {
	roomMemoMu.Lock()
	r, ok := s.room, s.roomOK
	roomMemoMu.Unlock()
	if ok {
		return r, nil
	}
	r, err := roomOf(ctx, s.budget, s.spend, roomTV)
	if err != nil {
		return r, err
	}
	roomMemoMu.Lock()
	s.room, s.roomOK = r, true
	roomMemoMu.Unlock()
	return r, nil
}

// jointRoom returns what can be charged to a scope whose own room is r
// when the file's cap leaves t: the smaller, checked against the scope's
// budget when it is the cap's (a Gaussian no larger than the scope's room
// fits it; the check only guards against round-off).
func jointRoom(sc *scopeState, name string, r, t float64, tv float64) float64 {
	if !(t < r) {
		return r
	}
	r = t
	for i := 0; i < 8 && r > 0; i++ {
		a, err := accountant.InScope(name, sc.budget.Neighbours, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: r})
		if err == nil {
			if _, err = accountant.Decide(sc.budget, sc.spend, a, tv); err == nil {
				return r
			}
		}
		r *= 1 - 1e-4
	}
	return 0
}

// gaussianRoom returns what scope can still charge: the largest mu one more
// add/remove Gaussian call charged to it, whose sampler is within tv in total
// variation of its ideal law, can spend, passing the scope's and the file's
// checks exactly as Charge makes them (FileScope: the file's only; +Inf
// for the file without a cap). It is the one figure every surface shows
// (at roomTV): the smaller of the scope's own room and the cap's, as
// dp_scope_state records them and dp_budget_status combines them. It stops
// when ctx is done, with ctx's error.
func (f *fileState) gaussianRoom(ctx context.Context, scope string, tv float64) (float64, error) {
	sc, err := f.scope(scope)
	if err != nil {
		return 0, err
	}
	own := func(s *scopeState) (float64, error) {
		if tv == roomTV {
			return s.ownRoom(ctx)
		}
		return roomOf(ctx, s.budget, s.spend, tv)
	}
	r := math.Inf(1)
	if scope != accountant.FileScope {
		if r, err = own(sc); err != nil {
			return 0, err
		}
	}
	if !f.capped {
		return r, nil
	}
	t, err := own(f.total)
	if err != nil {
		return 0, err
	}
	if scope == accountant.FileScope {
		return t, nil
	}
	return jointRoom(sc, scope, r, t, tv), nil
}

// scope returns the state of a scope (the total for FileScope), or the
// unknown-scope error.
func (f *fileState) scope(name string) (*scopeState, error) {
	if name == accountant.FileScope {
		return f.total, nil
	}
	if s, ok := f.scopes[name]; ok {
		return s, nil
	}
	return nil, unknownScope(name)
}

func unknownScope(scope string) error {
	return fmt.Errorf("%w %q: create it with `dpsql init DB --scope %s --mu 1` or SELECT dp_init(1.0, 1e-5, '%s')", ErrUnknownScope, scope, scope, scope)
}

// after returns the state once the charge row, accepted as c in its scope and
// as total in the file's total, follows f.
func (f *fileState) after(c, total accountant.Checked, row Row) *fileState {
	n := &fileState{head: Head{ID: row.ID, Hash: row.Hash}, scopes: make(map[string]*scopeState, len(f.scopes)), capped: f.capped,
		sinceRows: f.sinceRows + 1, sinceNonGaussian: f.sinceNonGaussian, created: f.created}
	n.sinceNonGaussian += replayWeight(c.Mechanism)
	for k, v := range f.scopes {
		n.scopes[k] = v
	}
	n.scopes[row.Scope] = f.scopes[row.Scope].with(c, row.ID)
	n.total = f.total.with(total, row.ID)
	return n
}

// with returns s after the entry accepted as c, in row id.
func (s *scopeState) with(c accountant.Checked, id int64) *scopeState {
	n := scopeState{budget: s.budget, spend: s.spend.With(c), entries: s.entries}
	n.entries++
	n.lastID = id
	// The figures the charge records in dp_scope_state (writeScopeState).
	st := Status{MuSpent: c.MuAfter, MuRemaining: c.MuRemaining, EpsilonSpent: c.EpsilonGDP}
	if c.Rigorous {
		st.EpsilonRigorous.Float64, st.EpsilonRigorous.Valid = c.Epsilon, true
	}
	n.fig = &statusMemo{st: st}
	n.fig.once.Do(func() {})
	n.room, n.roomOK = c.MuRemaining, true // the charge computed it (ownRoom)
	return &n
}

// computeState accounts checked rows (see checkChain). Budgets come from the
// chain's budget events; legacy holds dp_budget's budgets for a version-0
// file, which has none.
func computeState(rows []Row, legacy map[string]accountant.Budget) (*fileState, error) {
	f := &fileState{head: Head{Hash: GenesisHash}, scopes: map[string]*scopeState{}, legacy: legacy != nil, created: map[string]string{}}
	for s, b := range legacy {
		f.scopes[s] = &scopeState{budget: b}
	}
	var cap *accountant.Budget
	type entry struct {
		scope string
		id    int64
		m     mechanism.Mechanism
		tv    float64
	}
	var all []entry
	charges := map[string][]mechanism.Mechanism{}
	tvs := map[string]float64{}
	lastRow := map[string]int64{}
	for _, r := range rows {
		f.head = Head{ID: r.ID, Hash: r.Hash}
		f.sinceRows++
		switch r.kind() {
		case EventBudget:
			b, err := parseBudgetEvent(r)
			if err != nil {
				return nil, err
			}
			f.created[r.Scope] = createdAt(r)
			if r.Scope == accountant.FileScope {
				if cap != nil {
					return nil, fmt.Errorf("%w: ledger row %d is a second budget event for the file's total: a cap is set once, so a later event could only raise or move it", ErrChainBroken, r.ID)
				}
				cap = &b
				continue
			}
			s := f.scopes[r.Scope]
			if s == nil {
				s = &scopeState{}
				f.scopes[r.Scope] = s
			}
			if s.budget.Mu != 0 {
				return nil, fmt.Errorf("%w: ledger row %d is a second budget event for scope %q: a budget is created once, so a later event could only raise it or change its neighbour relation", ErrChainBroken, r.ID, r.Scope)
			}
			s.budget = b
		case EventCharge:
			m, err := mechanism.Parse([]byte(r.Params))
			if err != nil {
				return nil, fmt.Errorf("ledger row %d cannot be accounted (%v): refusing to charge until the ledger is repaired", r.ID, err)
			}
			if r.Scope == accountant.FileScope {
				return nil, fmt.Errorf("ledger row %d charges the file's total %q directly", r.ID, accountant.FileScope)
			}
			var rec struct {
				NoiseTV *float64 `json:"noise_tv"`
			}
			_ = json.Unmarshal([]byte(r.Params), &rec) // ParseMechanism read it already
			tv := 0.0
			if rec.NoiseTV != nil && legacy == nil { // version-0 checks did not pay it
				if tv = *rec.NoiseTV; !(tv >= 0) || math.IsInf(tv, 1) {
					return nil, fmt.Errorf("ledger row %d: noise_tv %v cannot be accounted", r.ID, tv)
				}
			}
			if f.scopes[r.Scope] == nil {
				f.scopes[r.Scope] = &scopeState{}
			}
			f.sinceNonGaussian += replayWeight(m)
			charges[r.Scope] = append(charges[r.Scope], m)
			tvs[r.Scope] += tv
			lastRow[r.Scope] = r.ID
			all = append(all, entry{r.Scope, r.ID, m, tv})
		case EventCheckpoint:
			// What the rows before it say (checkpoint.go): Verify
			// compares it; a charge resumes from the last.
			f.sinceRows, f.sinceNonGaussian = 0, 0
		case EventPolicy, EventAccount, EventOutcome:
			// Records spend nothing; checkChain checked their form.
		default:
			return nil, fmt.Errorf("ledger row %d: unknown event kind %q", r.ID, r.Kind)
		}
	}
	for name, s := range f.scopes {
		if s.budget.Scope == "" {
			return nil, fmt.Errorf("ledger row %d charges scope %q, which has no budget in the chain", lastRow[name], name)
		}
		if legacy != nil {
			// As the upgrade will record it (migrate.go): a version-0
			// scope holding a replace-one entry is a replace-one scope.
			for _, m := range charges[name] {
				if m.Neighbours == mechanism.ReplaceOne {
					s.budget.Neighbours = mechanism.ReplaceOne
				}
			}
		}
		if err := s.account(name, charges[name]); err != nil {
			return nil, err
		}
		s.spend.NoiseTV = tvs[name]
		s.lastID = lastRow[name]
	}
	// The total composes every charge of the file, in the cap's relation
	// (else replace_one if any scope is, else add_remove).
	f.total = &scopeState{budget: accountant.Budget{Scope: accountant.FileScope, Mu: math.Inf(1), Delta: 1e-5, Neighbours: mechanism.AddRemove}}
	if cap != nil {
		f.total.budget, f.capped = *cap, true
	} else {
		first := true
		for _, s := range f.scopes {
			if first || s.budget.Delta < f.total.budget.Delta {
				f.total.budget.Delta, first = s.budget.Delta, false
			}
			if s.budget.Relation() == mechanism.ReplaceOne {
				f.total.budget.Neighbours = mechanism.ReplaceOne
			}
		}
	}
	ms := make([]mechanism.Mechanism, len(all))
	var tv float64
	for i, e := range all {
		ms[i] = e.m
		f.total.lastID = e.id
		tv += e.tv
	}
	if err := f.total.account(accountant.FileScope, ms); err != nil {
		return nil, err
	}
	// After account, which sets the spend (its samplers' error was lost
	// before: the total's epsilon recomputed from the chain ignored it).
	f.total.spend.NoiseTV = tv
	for _, s := range f.scopes {
		s.fig = &statusMemo{}
	}
	f.total.fig = &statusMemo{}
	return f, nil
}

// account sets s's spend and entries from its charges ms, in id order,
// each converted to the scope's relation.
func (s *scopeState) account(name string, ms []mechanism.Mechanism) error {
	spend, err := accountant.SpendOf(name, s.budget.Neighbours, ms)
	if err != nil {
		return err
	}
	s.spend, s.entries = spend, int64(len(ms))
	return nil
}

// status returns the scope's figures as dp_budget_status shows them.
func (s *scopeState) status(name string) (Status, error) {
	st, err := s.statusBut(name)
	if err != nil || s.entries == 0 {
		return st, err
	}
	r, err := s.ownRoom(context.Background())
	if err != nil {
		return st, fmt.Errorf("scope %q cannot be accounted: %w", name, err)
	}
	st.MuRemaining = r
	return st, nil
}

// statusBut is status but for what the scope can still charge (MuRemaining
// is left at the budget's mu): the figures a charge's cheap checks compare
// (the room, a search, is Verify's to recompute).
func (s *scopeState) statusBut(name string) (Status, error) {
	b := s.budget
	st := Status{Scope: name, MuBudget: b.Mu, Delta: b.Delta, Entries: s.entries, MuRemaining: b.Mu, Neighbours: b.Relation()}
	if b.Epsilon > 0 {
		st.EpsilonBudget.Float64, st.EpsilonBudget.Valid = b.Epsilon, true
	}
	if s.entries == 0 {
		return st, nil
	}
	st.MuSpent = b.Shown(math.Sqrt(s.spend.SumSq))
	if st.EpsilonSpent = math.Inf(1); !math.IsInf(st.MuSpent, 1) {
		st.EpsilonSpent, _ = accountant.Epsilon(st.MuSpent, b.Delta)
	}
	if s.spend.NonGaussian > 0 {
		// As the budget check computes it (see decide).
		e, err := s.spend.Certified(b.Delta)
		if err != nil {
			return st, fmt.Errorf("scope %q cannot be accounted: %w", name, err)
		}
		st.EpsilonRigorous.Float64, st.EpsilonRigorous.Valid = e, true
	}
	return st, nil
}

// state returns the file's state at the head of q's chain: the memo if the
// head has not moved, else recomputed from the whole (checked) chain. q is the
// charge's transaction, or any reader.
func (l *Ledger) state(ctx context.Context, q Queryer) (*fileState, error) {
	v, has, err := schemaVersion(ctx, q)
	if err != nil {
		return nil, err
	}
	if !has {
		return nil, ErrNoLedger
	}
	if err := knownVersion(v); err != nil { // a newer dpsql's file: not ours to account
		return nil, err
	}
	head, err := readHead(ctx, q)
	if err != nil {
		return nil, err
	}
	l.memoMu.Lock()
	memo := l.memo
	l.memoMu.Unlock()
	if memo != nil && memo.head == head {
		return memo, nil
	}
	if v >= 1 {
		// From the state this process last saw, or from the last
		// checkpoint, reading only the rows since (checkpoint.go).
		st, err := resumeState(ctx, q, memo)
		switch {
		case err == nil && st.head == head:
			l.remember(st)
			return st, nil
		case err != nil && !errors.Is(err, errReplay):
			return nil, err
		}
	}
	fullStates.Add(1)
	rows, err := ReadLedger(ctx, q)
	if err != nil {
		return nil, err
	}
	if _, err := checkChain(rows); err != nil {
		return nil, fmt.Errorf("refusing to account a ledger whose chain does not verify (run `dpsql audit verify`): %w", err)
	}
	if memo != nil && !containsHead(rows, memo.head) {
		return nil, fmt.Errorf("%w: row %s, which this process saw, is no longer in the chain (rows were removed or rewritten); refusing to account", ErrChainBroken, memo.head)
	}
	var legacy map[string]accountant.Budget
	if v == 0 {
		if legacy, err = tableBudgets(ctx, q); err != nil {
			return nil, err
		}
	}
	st, err := computeState(rows, legacy)
	if err != nil {
		return nil, err
	}
	l.remember(st)
	return st, nil
}

// fullStates counts the states computed from the whole chain (tests).
var fullStates atomic.Int64

func (l *Ledger) remember(st *fileState) {
	l.memoMu.Lock()
	l.memo = st
	l.memoMu.Unlock()
}

// tableBudgets reads dp_budget (derived from the chain since schema version
// 1; the only record of budgets in a version-0 file).
func tableBudgets(ctx context.Context, q Queryer) (map[string]accountant.Budget, error) {
	v, _, err := schemaVersion(ctx, q)
	if err != nil {
		return nil, err
	}
	return tableBudgetsAt(ctx, q, v)
}

// tableBudgetsAt is tableBudgets in a file of schema version v.
func tableBudgetsAt(ctx context.Context, q Queryer, v int) (map[string]accountant.Budget, error) {
	nb := `'add_remove'`
	if v >= 1 {
		nb = `neighbours`
	}
	rows, err := q.QueryContext(ctx, `SELECT scope, mu_budget, delta, coalesce(epsilon_budget, 0), `+nb+` FROM dp_budget`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]accountant.Budget{}
	for rows.Next() {
		var b accountant.Budget
		if err := rows.Scan(&b.Scope, &b.Mu, &b.Delta, &b.Epsilon, &b.Neighbours); err != nil {
			return nil, err
		}
		out[b.Scope] = b
	}
	return out, rows.Err()
}
