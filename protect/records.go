package protect

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
)

// Policy records. Every policy change is a ledger record (dp_ledger, kind
// 'policy', scope '*', mechanism = the table, mu 0) chained with the charges
// and budgets, whose params are one of
//
//	{"action": "protect", "policy": {...}}           protect or re-protect the table
//	{"action": "unprotect"}                            remove its protection
//	{"action": "upgrade", "policies": {table: {...}},  the state of a file's old
//	 "log_rows": n, "log_head": hash}                  dp_policy_log, carried over once
//
// The state of the policies is what the records lead to, replayed in id
// order; dp_policy holds it for SQL readers. Files written before policy
// records existed kept their changes in dp_policy_log, a separate hash chain:
// their state is that log's (checked) until the owner's next change, which
// first appends the upgrade record; the log is kept, and VerifyPolicies
// checks that the upgrade record carried its state over exactly.

// Policy record actions.
const (
	actionProtect   = "protect"
	actionUnprotect = "unprotect"
	actionUpgrade   = "upgrade"
)

// policyParams is a policy record's content.
type policyParams struct {
	Action   string                     `json:"action"`
	Policy   json.RawMessage            `json:"policy,omitempty"`
	Policies map[string]json.RawMessage `json:"policies,omitempty"`
	LogRows  int                        `json:"log_rows,omitempty"`
	LogHead  string                     `json:"log_head,omitempty"`
}

// policyEntry is one protected table in a replayed state.
type policyEntry struct {
	name   string // as the schema spells it
	policy Policy
	canon  string // canonical JSON
	id     int64  // the record (ledger id) or, before the upgrade, the log row that set it
}

// policyState is the state the policy records (or an old file's log) lead to.
type policyState struct {
	tables   map[string]policyEntry // by lower-case name
	records  int                    // policy records replayed
	logRows  int                    // dp_policy_log rows checked
	upgraded bool                   // an upgrade record carried the old log over
}

func (s *policyState) policies() map[string]Policy {
	out := make(map[string]Policy, len(s.tables))
	for _, e := range s.tables {
		out[e.name] = e.policy
	}
	return out
}

// LoadPolicies returns every protected table's policy, by table name as the
// schema spells it, replayed from the ledger's policy records after checking
// the whole chain (an old file's dp_policy_log, likewise checked, until it is
// upgraded). It never reads dp_policy, which an edit of the file could change
// without a record. A file without a ledger or policies protects nothing.
func LoadPolicies(ctx context.Context, q ledger.Queryer) (map[string]Policy, error) {
	st, err := replayPolicies(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.policies(), nil
}

// replayPolicies computes the policy state from the chain.
func replayPolicies(ctx context.Context, q ledger.Queryer) (*policyState, error) {
	logState, logRows, logHead, err := readLegacyLog(ctx, q)
	if err != nil {
		return nil, err
	}
	recs, err := ledger.ReadRecords(ctx, q, ledger.EventPolicy)
	if err != nil && !errors.Is(err, ledger.ErrNoLedger) {
		return nil, fmt.Errorf("reading the policy records: %w", err)
	}
	st := &policyState{tables: map[string]policyEntry{}, logRows: logRows}
	if len(recs) == 0 {
		st.tables = logState
		return st, nil
	}
	for i, r := range recs {
		if err := st.apply(r, i == 0, logState, logRows, logHead); err != nil {
			return nil, fmt.Errorf("%w: policy record %d: %v", ledger.ErrChainBroken, r.ID, err)
		}
	}
	return st, nil
}

// apply replays one policy record onto the state.
func (st *policyState) apply(r ledger.Row, first bool, logState map[string]policyEntry, logRows int, logHead string) error {
	dec := json.NewDecoder(strings.NewReader(r.Params))
	dec.DisallowUnknownFields()
	var p policyParams
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("params cannot be read: %v", err)
	}
	if r.Scope != accountant.FileScope {
		return fmt.Errorf("scope %q, want %q (a policy concerns the whole file)", r.Scope, accountant.FileScope)
	}
	if first && logRows > 0 && p.Action != actionUpgrade {
		return fmt.Errorf("the file's dp_policy_log has %d rows, but the first policy record does not carry them over", logRows)
	}
	st.records++
	key := strings.ToLower(r.Mechanism)
	switch p.Action {
	case actionProtect:
		pol, err := ParsePolicy(p.Policy)
		if err != nil {
			return err
		}
		st.tables[key] = policyEntry{name: r.Mechanism, policy: pol, canon: pol.canonical(), id: r.ID}
	case actionUnprotect:
		if _, ok := st.tables[key]; !ok {
			return fmt.Errorf("unprotects %s, which is not protected", r.Mechanism)
		}
		delete(st.tables, key)
	case actionUpgrade:
		if !first {
			return errors.New("an upgrade record may only be the first policy record")
		}
		if p.LogRows != logRows || p.LogHead != logHead {
			return fmt.Errorf("it carries over %d rows of dp_policy_log ending in %.12s, but the log has %d ending in %.12s", p.LogRows, p.LogHead, logRows, logHead)
		}
		if len(p.Policies) != len(logState) {
			return fmt.Errorf("it carries over %d policies, but dp_policy_log leads to %d", len(p.Policies), len(logState))
		}
		for t, js := range p.Policies {
			pol, err := ParsePolicy(js)
			if err != nil {
				return fmt.Errorf("policy of %s: %v", t, err)
			}
			e, ok := logState[strings.ToLower(t)]
			if !ok || e.canon != pol.canonical() || e.name != t {
				return fmt.Errorf("its policy of %s is not the one dp_policy_log leads to", t)
			}
			st.tables[strings.ToLower(t)] = policyEntry{name: t, policy: pol, canon: pol.canonical(), id: r.ID}
		}
		st.upgraded = true
	default:
		return fmt.Errorf("unknown action %q", p.Action)
	}
	return nil
}

// appendPolicy chains one policy change (p nil: unprotect) and updates
// dp_policy in the same transaction. An old file's dp_policy_log is carried
// over first.
func appendPolicy(ctx context.Context, conn *sql.Conn, table string, p *Policy) error {
	path, err := mainPath(ctx, conn)
	if err != nil {
		return err
	}
	l, err := ledger.OpenLedger(path)
	if err != nil {
		return err
	}
	st, err := replayPolicies(ctx, conn)
	if err != nil {
		return fmt.Errorf("the policies on file do not verify, refusing to change them (run dpsql audit verify): %w", err)
	}
	if st.logRows > 0 && !st.upgraded {
		if err := upgradeLog(ctx, l, conn, st); err != nil {
			return err
		}
	}
	rec := ledger.Record{Kind: ledger.EventPolicy, Scope: accountant.FileScope, Subject: table}
	var canon string
	if p != nil {
		canon = p.canonical()
		rec.Params = policyParams{Action: actionProtect, Policy: json.RawMessage(canon)}
		rec.Query = "protect " + table
	} else {
		rec.Params = policyParams{Action: actionUnprotect}
		rec.Query = "unprotect " + table
	}
	_, err = l.Append(ctx, rec, func(tx *sql.Tx) error {
		id, err := lastPolicyRecord(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, PolicySchema); err != nil {
			return fmt.Errorf("creating dp_policy: %w", err)
		}
		if p == nil {
			res, err := tx.ExecContext(ctx, `DELETE FROM dp_policy WHERE tbl = ?`, table)
			if err != nil {
				return fmt.Errorf("updating dp_policy: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("unprotect: table %q is not protected", table)
			}
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO dp_policy(tbl, policy, ledger_id) VALUES (?,?,?)
			ON CONFLICT(tbl) DO UPDATE SET tbl = excluded.tbl, policy = excluded.policy, ledger_id = excluded.ledger_id`, table, canon, id); err != nil {
			return fmt.Errorf("updating dp_policy: %w", err)
		}
		return nil
	})
	if errors.Is(err, ledger.ErrNoLedger) {
		return fmt.Errorf("the file has no ledger yet, which records policies: create a budget first (dpsql init, or SELECT dp_init(...)): %w", err)
	}
	return err
}

// UpgradePolicies carries a file's dp_policy_log (written before policy
// records existed) over into one upgrade record of the ledger, if it has
// not been yet; it reports whether it did. Until then the file's policies
// rest on that log, outside the ledger's chain; every policy change
// upgrades first, and `dpsql query --analyst` and `dpsql shell --analyst`
// call this when they open a file. db is the owner's connection.
func UpgradePolicies(ctx context.Context, db *sql.DB) (bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	st, err := replayPolicies(ctx, conn)
	if err != nil {
		return false, fmt.Errorf("the policies on file do not verify (run dpsql audit verify): %w", err)
	}
	if st.logRows == 0 || st.upgraded {
		return false, nil
	}
	path, err := mainPath(ctx, conn)
	if err != nil {
		return false, err
	}
	l, err := ledger.OpenLedger(path)
	if err != nil {
		return false, err
	}
	if err := upgradeLog(ctx, l, conn, st); err != nil {
		return false, err
	}
	return true, nil
}

// upgradeLog carries an old file's dp_policy_log over into one upgrade
// record and rebuilds dp_policy in its new form, in one transaction.
func upgradeLog(ctx context.Context, l *ledger.Ledger, q ledger.Queryer, st *policyState) error {
	_, rows, head, err := readLegacyLog(ctx, q)
	if err != nil {
		return err
	}
	pols := map[string]json.RawMessage{}
	for _, e := range st.tables {
		pols[e.name] = json.RawMessage(e.canon)
	}
	rec := ledger.Record{Kind: ledger.EventPolicy, Scope: accountant.FileScope, Subject: "dp_policy_log",
		Params: policyParams{Action: actionUpgrade, Policies: pols, LogRows: rows, LogHead: head},
		Query:  "carry dp_policy_log over into the ledger"}
	_, err = l.Append(ctx, rec, func(tx *sql.Tx) error {
		id, err := lastPolicyRecord(ctx, tx)
		if err != nil {
			return err
		}
		var earlier int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM dp_ledger WHERE kind = ? AND id < ?`, ledger.EventPolicy, id).Scan(&earlier); err != nil {
			return err
		}
		if earlier > 0 {
			return errors.New("another process carried dp_policy_log over meanwhile: try again")
		}
		if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS dp_policy`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, PolicySchema); err != nil {
			return err
		}
		for t, js := range pols {
			if _, err := tx.ExecContext(ctx, `INSERT INTO dp_policy(tbl, policy, ledger_id) VALUES (?,?,?)`, t, string(js), id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("carrying dp_policy_log over into the ledger: %w", err)
	}
	return nil
}

// lastPolicyRecord returns the id of the record just appended in tx.
func lastPolicyRecord(ctx context.Context, tx *sql.Tx) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM dp_ledger WHERE kind = ? ORDER BY id DESC LIMIT 1`, ledger.EventPolicy).Scan(&id)
	return id, err
}

// mainPath returns the file of q's main database.
func mainPath(ctx context.Context, q ledger.Queryer) (string, error) {
	var path string
	if err := q.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		return "", err
	}
	if path == "" {
		return "", errors.New("protected mode needs a database file")
	}
	return path, nil
}

// legacyEvent is one row of dp_policy_log, the policy chain of files written
// before policy records (kept, never written again).
type legacyEvent struct {
	ID       int64
	At       string
	Table    string
	Action   string // protect or unprotect
	Policy   string // canonical JSON; "" for unprotect
	PrevHash string
	Hash     string
}

// hash returns SHA-256, in hex, of the JSON array
// ["dp_policy_log", id, at, table, action, policy, prev_hash].
func (e legacyEvent) hash() string {
	canon, _ := json.Marshal([]any{"dp_policy_log", e.ID, e.At, e.Table, e.Action, e.Policy, e.PrevHash})
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

// readLegacyLog checks dp_policy_log's chain (if the file has one) and
// returns the state it leads to, its number of rows and its last hash.
func readLegacyLog(ctx context.Context, q ledger.Queryer) (map[string]policyEntry, int, string, error) {
	state := map[string]policyEntry{}
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM main.sqlite_schema WHERE type = 'table' AND name = 'dp_policy_log'`).Scan(&n); err != nil {
		return nil, 0, "", err
	}
	if n == 0 {
		return state, 0, ledger.GenesisHash, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT id, at, tbl, action, coalesce(policy, ''), prev_hash, hash FROM main.dp_policy_log ORDER BY id`)
	if err != nil {
		return nil, 0, "", err
	}
	var evs []legacyEvent
	for rows.Next() {
		var e legacyEvent
		if err := rows.Scan(&e.ID, &e.At, &e.Table, &e.Action, &e.Policy, &e.PrevHash, &e.Hash); err != nil {
			rows.Close()
			return nil, 0, "", err
		}
		evs = append(evs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, "", err
	}
	prev := ledger.GenesisHash
	for _, e := range evs {
		if e.PrevHash != prev {
			return nil, 0, "", fmt.Errorf("%w: dp_policy_log row %d does not chain to the previous row (a row was removed, inserted or reordered)", ledger.ErrChainBroken, e.ID)
		}
		if e.hash() != e.Hash {
			return nil, 0, "", fmt.Errorf("%w: dp_policy_log row %d does not match its hash (the row was edited)", ledger.ErrChainBroken, e.ID)
		}
		prev = e.Hash
		switch e.Action {
		case actionProtect:
			pol, err := ParsePolicy([]byte(e.Policy))
			if err != nil {
				return nil, 0, "", fmt.Errorf("dp_policy_log row %d: %w", e.ID, err)
			}
			state[strings.ToLower(e.Table)] = policyEntry{name: e.Table, policy: pol, canon: pol.canonical(), id: e.ID}
		case actionUnprotect:
			delete(state, strings.ToLower(e.Table))
		default:
			return nil, 0, "", fmt.Errorf("dp_policy_log row %d: unknown action %q", e.ID, e.Action)
		}
	}
	return state, len(evs), prev, nil
}

// VerifyPolicies replays the policy records of the ledger (after checking
// the whole chain; an old file's dp_policy_log too, and that the upgrade
// record carried it over exactly) and checks that dp_policy is exactly the
// state they lead to. It returns the number of policy changes checked: the
// log's rows and the records.
func VerifyPolicies(ctx context.Context, q ledger.Queryer) (int, error) {
	st, err := replayPolicies(ctx, q)
	if err != nil {
		return 0, err
	}
	n := st.logRows + st.records
	// SQL readers see whatever main.dp_policy names, in any case: a view or
	// a rebuilt table must not pass unread.
	var has, other int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE type = 'table'), count(*) FILTER (WHERE type NOT IN ('table', 'trigger')) FROM main.sqlite_schema WHERE name = 'dp_policy' COLLATE NOCASE`).Scan(&has, &other); err != nil {
		return n, err
	}
	if other > 0 {
		return n, fmt.Errorf("%w: dp_policy is not a table (a view or other object took its name)", ledger.ErrChainBroken)
	}
	got := map[string][2]string{}
	var dup []string
	if has > 0 {
		idCol := "ledger_id"
		if st.records == 0 {
			idCol = "log_id" // an old file, not upgraded yet
		}
		rows, err := q.QueryContext(ctx, `SELECT tbl, policy, `+idCol+` FROM main.dp_policy`)
		if err != nil {
			return n, fmt.Errorf("%w: reading dp_policy: %v", ledger.ErrChainBroken, err)
		}
		defer rows.Close()
		for rows.Next() {
			var t, p string
			var id int64
			if err := rows.Scan(&t, &p, &id); err != nil {
				return n, err
			}
			if _, seen := got[strings.ToLower(t)]; seen {
				dup = append(dup, strings.ToLower(t)) // one row per table, whatever the case
			}
			got[strings.ToLower(t)] = [2]string{t + "\x00" + p, fmt.Sprint(id)}
		}
		if err := rows.Err(); err != nil {
			return n, err
		}
	}
	bad := dup
	for t, e := range st.tables {
		if got[t] != [2]string{e.name + "\x00" + e.canon, fmt.Sprint(e.id)} {
			bad = append(bad, t)
		}
	}
	for t := range got {
		if _, ok := st.tables[t]; !ok {
			bad = append(bad, t)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return n, fmt.Errorf("%w: dp_policy does not match the policy records for %s (a policy was changed outside dpsql protect)", ledger.ErrChainBroken, strings.Join(bad, ", "))
	}
	return n, nil
}

// policyMemo holds the policies replayed at one head of the chains; an
// Engine keeps one and replays only the rows appended since.
type policyMemo struct {
	mu      sync.Mutex
	head    ledger.Head
	logHead string
	state   *policyState
}

// load returns the policies at q's heads, from the memo when they have not
// moved. When only new ledger rows were appended (the memo's head row still
// holds its hash and the new rows chain to it), only they are checked and
// replayed; otherwise the whole chain is.
func (m *policyMemo) load(ctx context.Context, q ledger.Queryer) (map[string]Policy, error) {
	head, err := ledger.ReadHead(ctx, q)
	if err != nil && !errors.Is(err, ledger.ErrNoLedger) {
		return nil, err
	}
	logHead := ""
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM main.sqlite_schema WHERE type = 'table' AND name = 'dp_policy_log'`).Scan(&n); err != nil {
		return nil, err
	}
	if n > 0 {
		if err := q.QueryRowContext(ctx, `SELECT coalesce((SELECT id || ':' || hash FROM main.dp_policy_log ORDER BY id DESC LIMIT 1), '')`).Scan(&logHead); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != nil && m.logHead == logHead {
		if m.head == head {
			return m.state.policies(), nil
		}
		if st, ok := m.extend(ctx, q, head); ok {
			m.head, m.state = head, st
			return st.policies(), nil
		}
	}
	st, err := replayPolicies(ctx, q)
	if err != nil {
		m.state = nil
		return nil, err
	}
	m.head, m.logHead, m.state = head, logHead, st
	return st.policies(), nil
}

// extend replays the rows after the memo's head up to head, if they chain
// to it; ok is false when the whole chain must be read again.
func (m *policyMemo) extend(ctx context.Context, q ledger.Queryer, head ledger.Head) (*policyState, bool) {
	if m.head.ID == 0 || head.ID <= m.head.ID {
		return nil, false
	}
	rows, err := q.QueryContext(ctx, `SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash, kind, form FROM dp_ledger WHERE id >= ? AND id <= ? ORDER BY id`, m.head.ID, head.ID)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	var rs []ledger.Row
	for rows.Next() {
		var r ledger.Row
		if err := rows.Scan(&r.ID, &r.At, &r.Scope, &r.Mechanism, &r.Mu, &r.Params, &r.Query, &r.PrevHash, &r.Hash, &r.Kind, &r.Form); err != nil {
			return nil, false
		}
		rs = append(rs, r)
	}
	if rows.Err() != nil || len(rs) < 2 || rs[0].ID != m.head.ID || rs[0].Hash != m.head.Hash || rs[0].ComputeHash() != rs[0].Hash {
		return nil, false
	}
	st := &policyState{tables: make(map[string]policyEntry, len(m.state.tables)), records: m.state.records, logRows: m.state.logRows, upgraded: m.state.upgraded}
	for k, v := range m.state.tables {
		st.tables[k] = v
	}
	for i, r := range rs[1:] {
		if r.ID != rs[i].ID+1 || r.PrevHash != rs[i].Hash || r.ComputeHash() != r.Hash {
			return nil, false
		}
		if r.Kind != ledger.EventPolicy {
			continue
		}
		if st.records == 0 && st.logRows > 0 {
			return nil, false // the upgrade: replay it against the log
		}
		if r.Mu != 0 || st.apply(r, st.records == 0, nil, 0, "") != nil {
			return nil, false // let the whole replay say what is wrong
		}
	}
	if rs[len(rs)-1].Hash != head.Hash {
		return nil, false
	}
	return st, true
}
