package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// Checkpoints: a process resumes from the last one instead of from row 1.
//
// A checkpoint is a row of the chain (kind "checkpoint") that records what
// the chain says up to the row before it: every scope's budget, its charges'
// count and last id, their sum of squared mu, their samplers' error, their
// count of other than Gaussian entries, and the SHA-256 of the scope's
// composition (accountant.Composition.MarshalBinary); the same for the
// file's total. The compositions themselves, up to some 256 KiB each, are
// kept beside the chain, in dp_scope_state.pld, for the last checkpoint only
// (a process that resumes reads them there and checks them against the
// row). A charge writes one when 16 charges of other than Gaussian entries
// (a subsampled one counting 16: replayWeight), or 256 rows, followed the
// last: a process that resumes replays at most that many entries, and no
// subsampled one. With more than 8 scopes holding charges, the 16 is
// multiplied by one per 8 of them (checkpointScale): a checkpoint's cost
// grows with the scopes it covers.
//
// Nothing in a checkpoint is trusted that the chain does not vouch for: the
// row's hash covers the record, the record covers the compositions, and the
// state is the deterministic function of the rows before it that a process
// charging from row 1 computes (the compositions extend entry by entry by
// one rule, see accountant.Composition): Verify recomputes it from row 1 and
// compares every checkpoint's record and the kept compositions. What a
// charge skips is re-hashing the rows before the checkpoint (Verify's job):
// rows edited there, together with the checkpoint and everything after it
// (a consistent rewrite of the tail), are only caught by Verify, or by a
// head kept elsewhere.

// EventCheckpoint is the kind of a checkpoint row.
const EventCheckpoint = "checkpoint"

// When a charge writes a checkpoint.
const (
	checkpointRows        = 256 // rows since the last checkpoint
	checkpointNonGaussian = 16  // charges of other than Gaussian entries since
)

// xfloat is a float64 written in JSON as the shortest text that reads back
// exactly ("+Inf" included), so a checkpoint holds its figures bit for bit.
type xfloat float64

func (f xfloat) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatFloat(float64(f), 'g', -1, 64))
}

func (f *xfloat) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) {
		return fmt.Errorf("not a number: %q", s)
	}
	*f = xfloat(x)
	return nil
}

// ckptScope is one scope (or the file's total, "*") in a checkpoint.
type ckptScope struct {
	Scope       string `json:"scope"`
	Mu          xfloat `json:"mu_budget"`
	Delta       xfloat `json:"delta"`
	Epsilon     xfloat `json:"epsilon_budget"`
	Neighbours  string `json:"neighbours"`
	Entries     int64  `json:"entries"`
	LastID      int64  `json:"last_id"`
	SumSq       xfloat `json:"sum_sq"`
	NoiseTV     xfloat `json:"noise_tv"`
	NonGaussian int    `json:"non_gaussian"`
	Composition string `json:"composition_sha256"`
}

// ckptRecord is a checkpoint row's params.
type ckptRecord struct {
	Through int64       `json:"through"` // the last row it covers: the row before it
	Capped  bool        `json:"capped"`
	Scopes  []ckptScope `json:"scopes"` // by name; the file's total last
}

// ckptMagic starts a composition kept in dp_scope_state.pld, followed by the
// id of the checkpoint row it belongs to (uint64) and its encoding.
const ckptMagic = "dpCK\x01"

// encodeComposition returns c's encoding and its SHA-256 in hex.
func encodeComposition(c accountant.Composition) ([]byte, string, error) {
	b, err := c.MarshalBinary()
	if err != nil {
		return nil, "", err
	}
	h := sha256.Sum256(b)
	return b, hex.EncodeToString(h[:]), nil
}

// record returns the checkpoint record of f (whose head is the row it
// covers) and each scope's composition encoding.
func (f *fileState) record() (ckptRecord, map[string][]byte, error) {
	rec := ckptRecord{Through: f.head.ID, Capped: f.capped}
	encs := map[string][]byte{}
	names := sortedScopes(f)
	for _, name := range append(names, accountant.FileScope) {
		s, _ := f.scope(name)
		enc, sum, err := encodeComposition(s.spend.Comp)
		if err != nil {
			return rec, nil, err
		}
		b := s.budget
		rec.Scopes = append(rec.Scopes, ckptScope{Scope: name, Mu: xfloat(b.Mu), Delta: xfloat(b.Delta), Epsilon: xfloat(b.Epsilon),
			Neighbours: b.Relation(), Entries: s.entries, LastID: s.lastID, SumSq: xfloat(s.spend.SumSq), NoiseTV: xfloat(s.spend.NoiseTV),
			NonGaussian: s.spend.NonGaussian, Composition: sum})
		encs[name] = enc
	}
	return rec, encs, nil
}

// parseCheckpoint decodes a checkpoint row's params.
func parseCheckpoint(r Row) (ckptRecord, error) {
	var rec ckptRecord
	dec := json.NewDecoder(strings.NewReader(r.Params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, fmt.Errorf("row %d: checkpoint params cannot be read: %w", r.ID, err)
	}
	if rec.Through != r.ID-1 || len(rec.Scopes) == 0 || rec.Scopes[len(rec.Scopes)-1].Scope != accountant.FileScope {
		return rec, fmt.Errorf("row %d: the checkpoint does not cover the rows before it", r.ID)
	}
	for i, s := range rec.Scopes {
		if i > 0 && i < len(rec.Scopes)-1 && !(rec.Scopes[i-1].Scope < s.Scope) {
			return rec, fmt.Errorf("row %d: the checkpoint's scopes are out of order", r.ID)
		}
		if len(s.Composition) != 64 {
			return rec, fmt.Errorf("row %d: checkpoint of scope %q: bad composition digest", r.ID, s.Scope)
		}
	}
	return rec, nil
}

// checkpointDue reports whether a charge that leaves f should write a
// checkpoint after its row.
func (f *fileState) checkpointDue() bool {
	return f.sinceNonGaussian >= checkpointNonGaussian*f.checkpointScale() || f.sinceRows >= checkpointRows
}

// checkpointScopes is how many scopes holding charges a checkpoint may
// cover before checkpointNonGaussian is raised (checkpointScale).
const checkpointScopes = 8

// checkpointScale returns how many times checkpointNonGaussian a checkpoint
// waits for: 1 per checkpointScopes scopes holding charges (at least 1). A
// checkpoint records every scope (some 270 bytes each in the chain) and
// rewrites every scope's kept composition (up to 256 KiB each), so with
// many scopes one after every subsampled charge cost what all of them hold
// per charge (review23: 8.3 KB of chain and 416 KB rewritten per charge at
// 31 scopes). With S scopes a checkpoint follows every ceil(S/8)-th
// subsampled charge instead, and a new process replays at most that many
// less one. Where checkpoints fall is not what Verify checks (it recomputes
// each one's contents from the rows before it), so files written under
// either rule verify under both.
func (f *fileState) checkpointScale() int {
	n := 0
	for _, s := range f.scopes {
		if s.entries > 0 {
			n++
		}
	}
	return max(1, (n+checkpointScopes-1)/checkpointScopes)
}

// writeCheckpoint appends the checkpoint of f (whose head is the last row
// written, in x) and keeps the compositions in dp_scope_state.pld, and
// returns f as it stands after the checkpoint row. The row's scope is that of
// the charge it follows (dp_ledger.scope must name a budget, and the file's
// total has none without a cap); it covers every scope.
func writeCheckpoint(ctx context.Context, x ledgerConn, f *fileState, scope string) (*fileState, error) {
	rec, encs, err := f.record()
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	row, err := appendRow(ctx, x, Row{Kind: EventCheckpoint, Scope: scope, Params: string(params)})
	if err != nil {
		return nil, err
	}
	for _, s := range rec.Scopes {
		if s.Entries == 0 {
			continue // no dp_scope_state row: its composition is empty
		}
		blob := binary.LittleEndian.AppendUint64([]byte(ckptMagic), uint64(row.ID))
		blob = append(blob, encs[s.Scope]...)
		if _, err := x.ExecContext(ctx, `UPDATE dp_scope_state SET pld = ? WHERE scope = ?`, blob, s.Scope); err != nil {
			return nil, fmt.Errorf("keeping the checkpoint's composition of scope %q: %w", s.Scope, err)
		}
	}
	n := f.clone()
	n.head = Head{ID: row.ID, Hash: row.Hash}
	n.sinceRows, n.sinceNonGaussian = 0, 0
	return n, nil
}

// errReplay says a state cannot be extended row by row (a budget event
// changed the file's total's neighbour relation, a row names a scope without
// a budget): the caller recomputes it from row 1.
var errReplay = errors.New("the state must be recomputed from the first row")

// clone returns a copy of f whose maps and scope states can be changed.
// It copies what accounting needs and nothing else: whatever else a state
// keeps about itself (memos of its figures) is made afresh for the copy.
func (f *fileState) clone() *fileState {
	n := &fileState{head: f.head, scopes: make(map[string]*scopeState, len(f.scopes)), capped: f.capped,
		sinceRows: f.sinceRows, sinceNonGaussian: f.sinceNonGaussian, created: maps.Clone(f.created)}
	cp := func(s *scopeState) *scopeState {
		return &scopeState{budget: s.budget, spend: s.spend, entries: s.entries, lastID: s.lastID}
	}
	for k, v := range f.scopes {
		n.scopes[k] = cp(v)
	}
	n.total = cp(f.total)
	return n
}

// extend returns the state after rows, which follow f's head (checked by
// the caller), computed as computeState computes it from row 1: each charge
// composed into its scope and the file's total, in the scopes' relations
// (accountant.Spend.Add accounts exactly as a charge's decision does).
func (f *fileState) extend(rows []Row) (*fileState, error) {
	n := f.clone()
	for _, r := range rows {
		n.head = Head{ID: r.ID, Hash: r.Hash}
		n.sinceRows++
		switch r.kind() {
		case EventBudget:
			b, err := parseBudgetEvent(r)
			if err != nil {
				return nil, err
			}
			if err := n.addBudget(r, b); err != nil {
				return nil, err
			}
			if n.created == nil {
				n.created = map[string]string{}
			}
			n.created[r.Scope] = createdAt(r)
		case EventCharge:
			if err := n.addCharge(r); err != nil {
				return nil, err
			}
		case EventCheckpoint:
			n.sinceRows, n.sinceNonGaussian = 0, 0
		case EventPolicy, EventAccount, EventOutcome:
		default:
			return nil, fmt.Errorf("ledger row %d: unknown event kind %q", r.ID, r.Kind)
		}
	}
	return n, nil
}

// addBudget adds a budget event to n, as computeState does.
func (n *fileState) addBudget(r Row, b accountant.Budget) error {
	if r.Scope == accountant.FileScope {
		if n.capped {
			return fmt.Errorf("%w: ledger row %d is a second budget event for the file's total: a cap is set once, so a later event could only raise or move it", ErrChainBroken, r.ID)
		}
		if n.total.entries > 0 && b.Relation() != n.total.budget.Relation() {
			return errReplay
		}
		n.total.budget, n.capped = b, true
		return nil
	}
	if s, ok := n.scopes[r.Scope]; ok && s.budget.Mu != 0 {
		return fmt.Errorf("%w: ledger row %d is a second budget event for scope %q: a budget is created once, so a later event could only raise it or change its neighbour relation", ErrChainBroken, r.ID, r.Scope)
	}
	n.scopes[r.Scope] = &scopeState{budget: b}
	if !n.capped {
		// The total without a cap: the smallest delta, replace-one if any
		// scope is.
		t := n.total.budget
		if len(n.scopes) == 1 || b.Delta < t.Delta {
			t.Delta = b.Delta
		}
		if b.Relation() == mechanism.ReplaceOne && t.Relation() != mechanism.ReplaceOne {
			if n.total.entries > 0 {
				return errReplay
			}
			t.Neighbours = mechanism.ReplaceOne
		}
		n.total.budget = t
	}
	return nil
}

// addCharge composes a charge row into its scope and the file's total.
func (n *fileState) addCharge(r Row) error {
	m, err := mechanism.Parse([]byte(r.Params))
	if err != nil {
		return fmt.Errorf("ledger row %d cannot be accounted (%v): refusing to charge until the ledger is repaired", r.ID, err)
	}
	if r.Scope == accountant.FileScope {
		return fmt.Errorf("ledger row %d charges the file's total %q directly", r.ID, accountant.FileScope)
	}
	tv, err := rowNoiseTV(r)
	if err != nil {
		return err
	}
	s, ok := n.scopes[r.Scope]
	if !ok || s.budget.Mu == 0 {
		return errReplay
	}
	for _, x := range []struct {
		name string
		s    *scopeState
	}{{r.Scope, s}, {accountant.FileScope, n.total}} {
		a, err := accountant.InScope(x.name, x.s.budget.Neighbours, m)
		if err != nil {
			return fmt.Errorf("scope %q cannot be accounted: %w", x.name, err)
		}
		if x.s.spend, err = x.s.spend.Add(a, tv); err != nil {
			return fmt.Errorf("scope %q cannot be accounted: %w", x.name, err)
		}
		x.s.entries++
		x.s.lastID = r.ID
	}
	n.sinceNonGaussian += replayWeight(m)
	return nil
}

// replayWeight is what a charge of m counts toward the next checkpoint's
// checkpointNonGaussian: 0 for an exactly Gaussian one (replayed by a sum),
// checkpointNonGaussian for one with subsampled parts (dp_avgmix,
// dp_select_topm: hundreds of steps composed on the fine grid, some 25 to
// 200 ms each in a new process, so a checkpoint follows every one), else 1.
// A new process then replays no subsampled charge, and at most fifteen
// others (times checkpointScale with more than 8 scopes holding charges).
func replayWeight(m mechanism.Mechanism) int {
	if m.IsGaussian() {
		return 0
	}
	for _, p := range m.Components() {
		if p.Kind == mechanism.KindSubsampledGaussian {
			return checkpointNonGaussian
		}
	}
	return 1
}

// rowNoiseTV returns the samplers' error a charge row records (0: none).
func rowNoiseTV(r Row) (float64, error) {
	var rec struct {
		NoiseTV *float64 `json:"noise_tv"`
	}
	_ = json.Unmarshal([]byte(r.Params), &rec) // mechanism.Parse read it already
	if rec.NoiseTV == nil {
		return 0, nil
	}
	if tv := *rec.NoiseTV; tv >= 0 && !math.IsInf(tv, 1) {
		return tv, nil
	}
	return 0, fmt.Errorf("ledger row %d: noise_tv %v cannot be accounted", r.ID, *rec.NoiseTV)
}

// fromCheckpoint returns the state a checkpoint row records, its
// compositions read from dp_scope_state.pld and checked against the
// record (errReplay when one is missing or does not match: the caller
// recomputes the state from row 1).
func fromCheckpoint(ctx context.Context, q Queryer, r Row) (*fileState, error) {
	rec, err := parseCheckpoint(r)
	if err != nil {
		return nil, err
	}
	blobs := map[string][]byte{}
	rows, err := q.QueryContext(ctx, `SELECT scope, pld FROM dp_scope_state WHERE pld IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var s string
		var b []byte
		if err := rows.Scan(&s, &b); err != nil {
			rows.Close()
			return nil, err
		}
		blobs[s] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	f := &fileState{head: Head{ID: r.ID, Hash: r.Hash}, scopes: map[string]*scopeState{}, capped: rec.Capped}
	for _, cs := range rec.Scopes {
		b := accountant.Budget{Scope: cs.Scope, Mu: float64(cs.Mu), Delta: float64(cs.Delta), Epsilon: float64(cs.Epsilon), Neighbours: cs.Neighbours}
		s := &scopeState{budget: b, entries: cs.Entries, lastID: cs.LastID}
		s.spend.SumSq, s.spend.NoiseTV, s.spend.NonGaussian = float64(cs.SumSq), float64(cs.NoiseTV), cs.NonGaussian
		if cs.Entries > 0 {
			blob := blobs[cs.Scope]
			if len(blob) < len(ckptMagic)+8 || string(blob[:len(ckptMagic)]) != ckptMagic ||
				binary.LittleEndian.Uint64(blob[len(ckptMagic):]) != uint64(r.ID) {
				return nil, errReplay
			}
			enc := blob[len(ckptMagic)+8:]
			if h := sha256.Sum256(enc); hex.EncodeToString(h[:]) != cs.Composition {
				return nil, errReplay
			}
			if err := s.spend.Comp.UnmarshalBinary(enc); err != nil {
				return nil, errReplay
			}
		}
		if cs.Scope == accountant.FileScope {
			f.total = s
		} else {
			f.scopes[cs.Scope] = s
		}
	}
	return f, nil
}

// lastCheckpoint returns the chain's last checkpoint row (ok false: none).
func lastCheckpoint(ctx context.Context, q Queryer) (Row, bool, error) {
	rows, err := readRows(ctx, q, `WHERE id = (SELECT max(id) FROM dp_ledger WHERE kind = ?)`, EventCheckpoint)
	if err != nil || len(rows) == 0 {
		return Row{}, false, err
	}
	return rows[0], true, nil
}

// readRows returns the rows of dp_ledger that where (a WHERE clause) selects,
// in id order (a file of schema version 1 or later).
func readRows(ctx context.Context, q Queryer, where string, args ...any) ([]Row, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash, kind, form FROM dp_ledger `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.At, &r.Scope, &r.Mechanism, &r.Mu, &r.Params, &r.Query, &r.PrevHash, &r.Hash, &r.Kind, &r.Form); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// checkCheckpoints compares, for every checkpoint row among rows (all of
// them, from row 1), its record with the state computed from the rows
// before it, and the compositions kept in dp_scope_state with the last
// checkpoint's: what Verify vouches for before a process resumes from them.
func checkCheckpoints(ctx context.Context, q Queryer, rows []Row) (int, error) {
	var f *fileState
	n := 0
	start := 0
	for i, r := range rows {
		if r.kind() != EventCheckpoint {
			continue
		}
		var err error
		if f == nil {
			f, err = computeState(rows[:i], nil)
		} else {
			f, err = f.extend(rows[start:i])
			if errors.Is(err, errReplay) {
				f, err = computeState(rows[:i], nil)
			}
		}
		if err != nil {
			return n, err
		}
		start = i + 1
		want, _, err := f.record()
		if err != nil {
			return n, err
		}
		got, err := parseCheckpoint(r)
		if err != nil {
			return n, fmt.Errorf("%w: %v", ErrMismatch, err)
		}
		if err := sameRecord(got, want); err != nil {
			return n, fmt.Errorf("%w: the checkpoint at row %d disagrees with the chain before it: %v", ErrMismatch, r.ID, err)
		}
		f.head = Head{ID: r.ID, Hash: r.Hash}
		n++
		if i == lastIndexOfKind(rows, EventCheckpoint) {
			if _, err := fromCheckpoint(ctx, q, r); errors.Is(err, errReplay) {
				return n, fmt.Errorf("%w: the compositions dp_scope_state keeps for the checkpoint at row %d are missing or do not match it", ErrMismatch, r.ID)
			} else if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func lastIndexOfKind(rows []Row, kind string) int {
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].kind() == kind {
			return i
		}
	}
	return -1
}

// sameRecord names the first difference between two checkpoint records.
func sameRecord(got, want ckptRecord) error {
	if got.Capped != want.Capped || len(got.Scopes) != len(want.Scopes) {
		return fmt.Errorf("it records %d scopes (capped %v), the chain %d (capped %v)", len(got.Scopes), got.Capped, len(want.Scopes), want.Capped)
	}
	for i := range want.Scopes {
		if got.Scopes[i] != want.Scopes[i] {
			return fmt.Errorf("scope %q: it records %+v, the chain gives %+v", want.Scopes[i].Scope, got.Scopes[i], want.Scopes[i])
		}
	}
	return nil
}

// resumeState returns the state at the chain's head computed from the rows
// after memo's head (memo nil: after the last checkpoint, whose state is
// read back), those rows checked link by link from that head; errReplay
// when neither applies (no checkpoint, a composition missing, the memo's
// head no longer in the chain, a row the state cannot be extended by): the
// caller then reads and checks the whole chain.
func resumeState(ctx context.Context, q Queryer, memo *fileState) (*fileState, error) {
	base := memo
	if base != nil && base.legacy {
		return nil, errReplay // a version-0 file's state, before its upgrade
	}
	if base != nil {
		var h string
		err := q.QueryRowContext(ctx, `SELECT hash FROM dp_ledger WHERE id = ?`, base.head.ID).Scan(&h)
		if err != nil || h != base.head.Hash {
			return nil, errReplay // the whole chain's check names it
		}
	} else {
		r, ok, err := lastCheckpoint(ctx, q)
		if err != nil || !ok {
			return nil, errReplay
		}
		if r.ComputeHash() != r.Hash {
			return nil, errReplay
		}
		if base, err = fromCheckpoint(ctx, q, r); err != nil {
			return nil, err
		}
	}
	rows, err := readRows(ctx, q, `WHERE id > ?`, base.head.ID)
	if err != nil {
		return nil, err
	}
	if _, err := checkChainFrom(base.head.Hash, rows); err != nil {
		return nil, fmt.Errorf("refusing to account a ledger whose chain does not verify (run `dpsql audit verify`): %w", err)
	}
	return base.extend(rows)
}
