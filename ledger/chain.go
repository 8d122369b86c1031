package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// The hash chain over dp_ledger. Each row's hash is SHA-256 over its canonical
// content, which includes the previous row's hash; docs/ledger.md
// specifies the canonical forms byte for byte.

// GenesisHash is the prev_hash of the first ledger row.
var GenesisHash = strings.Repeat("0", 64)

// Kinds of ledger event (dp_ledger.kind).
const (
	EventCharge = "charge" // a spend of privacy budget; params is its Mechanism
	EventBudget = "budget" // a scope's budget is created; params is its budget record
)

// Row is one dp_ledger row.
type Row struct {
	ID        int64
	At        string
	Scope     string
	Mechanism string
	Mu        float64
	Params    string
	Query     string
	PrevHash  string
	Hash      string
	Kind      string // EventCharge, EventBudget or a kind of record (events.go); "" is read as EventCharge
	Form      int    // canonical form of the hash: 0 (schema version 0 rows) or 1

	// retyped is set by ReadLedger when a value of the row has another type
	// than dpsql writes (a TEXT turned BLOB reads, and hashes, the same).
	retyped bool
}

// ComputeHash returns SHA-256, in hex, over the row's canonical content, a
// JSON array (Go's encoding/json, so <, >, & and U+2028/U+2029 in strings are
// escaped as \u003c, \u003e, \u0026, \u2028, \u2029), mu printed as a string
// with 17 significant digits (strconv 'g'):
//
//	form 0: [id, at, scope, mechanism, mu, params, query, prev_hash]
//	form 1: [1, id, at, kind, scope, mechanism, mu, params, query, prev_hash]
func (r Row) ComputeHash() string {
	mu := strconv.FormatFloat(r.Mu, 'g', 17, 64)
	var fields []any
	if r.Form == 0 {
		fields = []any{r.ID, r.At, r.Scope, r.Mechanism, mu, r.Params, r.Query, r.PrevHash}
	} else {
		fields = []any{r.Form, r.ID, r.At, r.kind(), r.Scope, r.Mechanism, mu, r.Params, r.Query, r.PrevHash}
	}
	canon, _ := json.Marshal(fields)
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

func (r Row) kind() string {
	if r.Kind == "" {
		return EventCharge
	}
	return r.Kind
}

// rowForm is the canonical form new rows are written in.
const rowForm = 1

// appendRow appends r (its ID, PrevHash, Form and Hash are set here, At if
// empty) after the last row of dp_ledger and returns it as written.
func appendRow(ctx context.Context, x ledgerConn, r Row) (Row, error) {
	r.ID, r.PrevHash, r.Form = 1, GenesisHash, rowForm
	if r.At == "" {
		r.At = now()
	}
	err := x.QueryRowContext(ctx, `SELECT id + 1, hash FROM dp_ledger ORDER BY id DESC LIMIT 1`).Scan(&r.ID, &r.PrevHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return r, err
	}
	r.Hash = r.ComputeHash()
	var query any
	if r.Query != "" {
		query = r.Query
	}
	if _, err := x.ExecContext(ctx, `INSERT INTO dp_ledger(id, at, scope, mechanism, mu, params, query, prev_hash, hash, kind, form) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		r.ID, r.At, r.Scope, r.Mechanism, r.Mu, r.Params, query, r.PrevHash, r.Hash, r.kind(), r.Form); err != nil {
		return r, fmt.Errorf("appending to dp_ledger: %w", err)
	}
	// A trigger of the file's schema may have dropped the row (a BEFORE
	// INSERT trigger's RAISE(IGNORE)) or replaced it: the row must be the
	// chain's head, as written.
	if err := checkAppended(ctx, x, r); err != nil {
		return r, err
	}
	return r, nil
}

// ReadLedger returns every ledger row, of every kind, in id order.
func ReadLedger(ctx context.Context, db Queryer) ([]Row, error) {
	_, has, err := schemaVersion(ctx, db)
	if err != nil {
		return nil, err
	}
	if !has {
		return nil, ErrNoLedger
	}
	var n int // version-0 rows have no kind and form (also during the upgrade)
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('dp_ledger') WHERE name IN ('kind', 'form')`).Scan(&n); err != nil {
		return nil, err
	}
	// Version-0 code wrote '' for no query; later code writes NULL.
	cols, typed := `'charge', 0`, ``
	if n == 2 {
		cols, typed = `kind, form`, ` AND typeof(kind) = 'text' AND typeof(form) = 'integer' AND (query IS NOT '' OR form = 0)`
	}
	rows, err := db.QueryContext(ctx, `SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash, `+cols+`,
		NOT (typeof(at) = 'text' AND typeof(scope) = 'text' AND typeof(mechanism) = 'text' AND typeof(mu) = 'real' AND typeof(params) = 'text'
		AND (query IS NULL OR typeof(query) = 'text') AND typeof(prev_hash) = 'text' AND typeof(hash) = 'text'`+typed+`)
		FROM dp_ledger ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.At, &r.Scope, &r.Mechanism, &r.Mu, &r.Params, &r.Query, &r.PrevHash, &r.Hash, &r.Kind, &r.Form, &r.retyped); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// checkChain checks that rows, in id order, link and hash correctly and that
// each row's mu matches its content. It returns the number of good rows
// before the first bad one and an error wrapping ErrChainBroken naming it.
func checkChain(rows []Row) (int, error) { return checkChainFrom(GenesisHash, rows) }

// checkChainFrom is checkChain for rows that follow the row of hash prev.
func checkChainFrom(prev string, rows []Row) (int, error) {
	for i, r := range rows {
		if r.PrevHash != prev {
			return i, fmt.Errorf("%w at row %d: prev_hash %.12s... does not match the previous row's hash %.12s... (a row was removed, inserted or reordered)", ErrChainBroken, r.ID, r.PrevHash, prev)
		}
		if r.retyped {
			return i, fmt.Errorf("%w at row %d: a value has another type than dpsql writes (the row was edited)", ErrChainBroken, r.ID)
		}
		if r.Form != 0 && r.Form != rowForm {
			return i, fmt.Errorf("%w at row %d: unknown canonical form %d", ErrChainBroken, r.ID, r.Form)
		}
		if got := r.ComputeHash(); got != r.Hash {
			return i, fmt.Errorf("%w at row %d: its content does not match its hash (the row was edited)", ErrChainBroken, r.ID)
		}
		var mu float64
		switch r.kind() {
		case EventCharge:
			m, err := mechanism.Parse([]byte(r.Params))
			if err != nil {
				return i, fmt.Errorf("row %d cannot be re-accounted: %w", r.ID, err)
			}
			if err := accountant.VerifyNoisePayload(m); err != nil {
				return i, fmt.Errorf("row %d: %w", r.ID, err)
			}
			mu = m.GDPMu()
		case EventBudget:
			b, err := parseBudgetEvent(r)
			if err != nil {
				return i, err
			}
			mu = b.Mu
		case EventPolicy, EventAccount, EventOutcome:
			if err := checkRecord(r); err != nil {
				return i, fmt.Errorf("%w at %v", ErrChainBroken, err)
			}
		case EventCheckpoint:
			if _, err := parseCheckpoint(r); err != nil {
				return i, fmt.Errorf("%w at %v", ErrChainBroken, err)
			}
		default:
			return i, fmt.Errorf("row %d: unknown event kind %q", r.ID, r.Kind)
		}
		if !(math.Abs(mu-r.Mu) <= 1e-12*math.Max(1, mu)) && !(math.IsInf(mu, 1) && math.IsInf(r.Mu, 1)) {
			return i, fmt.Errorf("row %d: recorded mu %g does not match its content (%g)", r.ID, r.Mu, mu)
		}
		prev = r.Hash
	}
	return len(rows), nil
}

// parseBudgetEvent decodes and checks a budget event's params.
func parseBudgetEvent(r Row) (accountant.Budget, error) {
	var rec budgetRecord
	dec := json.NewDecoder(strings.NewReader(r.Params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return accountant.Budget{}, fmt.Errorf("row %d: budget event params cannot be read: %w", r.ID, err)
	}
	b := rec.budget(r.Scope)
	if err := b.Validate(); err != nil {
		return accountant.Budget{}, fmt.Errorf("row %d: %w", r.ID, err)
	}
	return b, nil
}

// Head names the last row of the chain: its id and hash. An auditor who keeps
// a head can later check that the file's chain still contains that row.
type Head struct {
	ID   int64
	Hash string
}

// String returns the head as ID:HASH (decimal id, 64 lowercase hex digits).
func (h Head) String() string { return strconv.FormatInt(h.ID, 10) + ":" + h.Hash }

var headRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,18}):([0-9a-f]{64})$`)

// ParseHead parses ID:HASH as printed by Head.String.
func ParseHead(s string) (Head, error) {
	m := headRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Head{}, fmt.Errorf("head %q is not ID:HASH (a decimal id, a colon and 64 lowercase hex digits, as `dpsql audit head DB` prints)", s)
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return Head{}, fmt.Errorf("head %q: %w", s, err)
	}
	return Head{ID: id, Hash: m[2]}, nil
}

// ReadHead returns the head of the file's chain: {0, GenesisHash} when the
// ledger is empty.
func ReadHead(ctx context.Context, q Queryer) (Head, error) {
	if _, has, err := schemaVersion(ctx, q); err != nil {
		return Head{}, err
	} else if !has {
		return Head{}, ErrNoLedger
	}
	return readHead(ctx, q)
}

func readHead(ctx context.Context, q Queryer) (Head, error) {
	h := Head{Hash: GenesisHash}
	err := q.QueryRowContext(ctx, `SELECT id, hash FROM dp_ledger ORDER BY id DESC LIMIT 1`).Scan(&h.ID, &h.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return h, err
}

// checkAppended reports an error unless r, just appended, is the chain's
// head (a row changed in place no longer verifies, which every read of the
// chain checks).
func checkAppended(ctx context.Context, q Queryer, r Row) error {
	h, err := readHead(ctx, q)
	if err != nil {
		return err
	}
	if h.ID != r.ID || h.Hash != r.Hash {
		return fmt.Errorf("%w: the row appended to dp_ledger (id %d) is not the chain's head: a trigger of the file's schema dropped or replaced it (list them with SELECT name, sql FROM sqlite_master WHERE type = 'trigger'); nothing was recorded", ErrMismatch, r.ID)
	}
	return nil
}

// containsHead reports whether rows hold h (the genesis head is always held).
func containsHead(rows []Row, h Head) bool {
	if h.ID == 0 {
		return h.Hash == GenesisHash
	}
	for _, r := range rows {
		if r.ID == h.ID {
			return r.Hash == h.Hash
		}
	}
	return false
}
