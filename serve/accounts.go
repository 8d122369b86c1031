package serve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dpsql/dpsql/ledger"
)

// TokenPrefix starts every bearer token, so that a token pasted into the
// wrong place (a log, a chat) is recognisable and secret scanners can match it.
const TokenPrefix = "dpsql_at_"

// tokenBytes is the entropy of a token: 256 bits from crypto/rand.
const tokenBytes = 32

// Hasher names how an account's token is stored: HMAC-SHA256 keyed by a
// per-account random 16-byte salt. A token carries 256 random bits, so
// neither a dictionary nor brute force can invert the hash, salted or not;
// slow password hashes (scrypt, argon2) protect low-entropy secrets and would
// only add tens of milliseconds of CPU to every request (a lever for denial
// of service). The salt keeps two accounts' hashes unrelated and makes
// precomputation useless should a token generator ever repeat.
const Hasher = "hmac-sha256"

// Account actions recorded in the chain.
const (
	actionAdd    = "add"
	actionRevoke = "revoke"
)

// accountParams is the content of an account record (dp_ledger.params).
type accountParams struct {
	Action string `json:"action"`           // actionAdd or actionRevoke
	Name   string `json:"name"`             // the account, also the record's subject
	Hasher string `json:"hasher,omitempty"` // Hasher (add only)
	Salt   string `json:"salt,omitempty"`   // hex, 16 bytes (add only)
	Hash   string `json:"hash,omitempty"`   // hex HMAC-SHA256(salt, token) (add only)
}

// Account is an analyst account as the ledger's chain shows it.
type Account struct {
	Name    string
	Scope   string // the only scope the account's token charges and sees
	Added   string // time of the add record
	Revoked string // time of the revoke record; "" while active
	ID      int64  // ledger id of the add record

	salt, hash []byte
}

// Active reports whether the account's token is accepted.
func (a *Account) Active() bool { return a.Revoked == "" }

// matches reports whether token is this account's (in constant time).
func (a *Account) matches(token string) bool {
	return hmac.Equal(tokenHash(a.salt, token), a.hash)
}

func tokenHash(salt []byte, token string) []byte {
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(token))
	return m.Sum(nil)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// ErrNoAccount is returned for an account name the chain does not hold as active.
var ErrNoAccount = errors.New("no such active account")

// AccountTable is the derived table the account records are copied into, in
// the same transaction, for the owner's SQL (SELECT * FROM dp_account). The
// service never authenticates from it: an edit of it grants nothing.
const AccountTable = "dp_account"

const accountTableSchema = `CREATE TABLE IF NOT EXISTS dp_account (
	name TEXT PRIMARY KEY,
	scope TEXT NOT NULL,
	hasher TEXT NOT NULL,
	salt TEXT NOT NULL,
	hash TEXT NOT NULL,
	added_at TEXT NOT NULL,
	revoked_at TEXT,
	ledger_id INTEGER NOT NULL
)`

// AddAccount creates the account name bound to scope in the database file at
// path and returns its bearer token, which is not stored anywhere: only its
// salted hash is, as an account record in the ledger's chain (and in
// dp_account). The scope must exist; a name already active is refused.
func AddAccount(ctx context.Context, path, name, scope string) (string, error) {
	if !nameRE.MatchString(name) {
		return "", fmt.Errorf("account name %q: use 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit", name)
	}
	if scope == "" {
		return "", errors.New("an account needs a scope (--scope): the budget its token charges")
	}
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("drawing a token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("drawing a salt: %w", err)
	}
	p := accountParams{Action: actionAdd, Name: name, Hasher: Hasher, Salt: hex.EncodeToString(salt), Hash: hex.EncodeToString(tokenHash(salt, token))}
	l, err := ledger.OpenLedger(path)
	if err != nil {
		return "", err
	}
	rec := ledger.Record{Kind: ledger.EventAccount, Scope: scope, Subject: name, Params: p, Query: "dpsql analyst add " + name + " --scope " + scope}
	_, err = l.Append(ctx, rec, func(tx *sql.Tx) error {
		before, row, err := accountsBeforeLast(ctx, tx)
		if err != nil {
			return err
		}
		if a, ok := before[name]; ok && a.Active() {
			return fmt.Errorf("account %q is already active (scope %q): revoke it first (dpsql analyst revoke)", name, a.Scope)
		}
		if _, err := tx.ExecContext(ctx, accountTableSchema); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO dp_account(name, scope, hasher, salt, hash, added_at, revoked_at, ledger_id) VALUES (?,?,?,?,?,?,NULL,?)`,
			name, scope, p.Hasher, p.Salt, p.Hash, row.At, row.ID)
		return err
	})
	if errors.Is(err, ledger.ErrUnknownScope) {
		return "", fmt.Errorf("scope %q does not exist: create it first (dpsql init DB --scope %s --mu 1): %w", scope, scope, err)
	}
	if err != nil {
		return "", err
	}
	return token, nil
}

// RevokeAccount revokes the active account name: from the record on, the
// service refuses its token.
func RevokeAccount(ctx context.Context, path, name string) error {
	l, err := ledger.OpenLedger(path)
	if err != nil {
		return err
	}
	var scope string
	err = l.View(ctx, func(q ledger.Queryer) error {
		as, err := readAccounts(ctx, q)
		if err != nil {
			return err
		}
		a, ok := as[name]
		if !ok || !a.Active() {
			return fmt.Errorf("%w %q (dpsql analyst list shows the accounts)", ErrNoAccount, name)
		}
		scope = a.Scope
		return nil
	})
	if err != nil {
		return err
	}
	rec := ledger.Record{Kind: ledger.EventAccount, Scope: scope, Subject: name, Params: accountParams{Action: actionRevoke, Name: name}, Query: "dpsql analyst revoke " + name}
	_, err = l.Append(ctx, rec, func(tx *sql.Tx) error {
		before, row, err := accountsBeforeLast(ctx, tx)
		if err != nil {
			return err
		}
		if a, ok := before[name]; !ok || !a.Active() || a.Scope != scope {
			return fmt.Errorf("%w %q (revoked or changed meanwhile)", ErrNoAccount, name)
		}
		if _, err := tx.ExecContext(ctx, accountTableSchema); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE dp_account SET revoked_at = ? WHERE name = ?`, row.At, name)
		return err
	})
	return err
}

// ListAccounts returns every account the chain holds, active or revoked, by
// name, after checking the whole chain.
func ListAccounts(ctx context.Context, q ledger.Queryer) ([]*Account, error) {
	as, err := readAccounts(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]*Account, 0, len(as))
	for _, a := range as {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Account) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// readAccounts replays the chain's account records (the chain checked whole).
func readAccounts(ctx context.Context, q ledger.Queryer) (map[string]*Account, error) {
	rows, err := ledger.ReadRecords(ctx, q, ledger.EventAccount)
	if errors.Is(err, ledger.ErrNoLedger) {
		return map[string]*Account{}, nil
	}
	if err != nil {
		return nil, err
	}
	as := map[string]*Account{}
	for _, r := range rows {
		if err := applyAccount(as, r); err != nil {
			return nil, err
		}
	}
	return as, nil
}

// accountsBeforeLast replays every account record but the last one, which
// the running Append has just written, and returns that one too.
func accountsBeforeLast(ctx context.Context, tx *sql.Tx) (map[string]*Account, ledger.Row, error) {
	rows, err := ledger.ReadRecords(ctx, tx, ledger.EventAccount)
	if err != nil {
		return nil, ledger.Row{}, err
	}
	if len(rows) == 0 {
		return nil, ledger.Row{}, errors.New("the account record just appended is missing")
	}
	as := map[string]*Account{}
	for _, r := range rows[:len(rows)-1] {
		if err := applyAccount(as, r); err != nil {
			return nil, ledger.Row{}, err
		}
	}
	return as, rows[len(rows)-1], nil
}

// applyAccount applies one account record to as. A record that contradicts
// the accounts before it (a second add of an active name, a revoke of an
// inactive one) is an error: the chain was written by something other than
// AddAccount and RevokeAccount.
func applyAccount(as map[string]*Account, r ledger.Row) error {
	var p accountParams
	dec := json.NewDecoder(strings.NewReader(r.Params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("ledger row %d: account record: %w", r.ID, err)
	}
	if p.Name != r.Mechanism || !nameRE.MatchString(p.Name) {
		return fmt.Errorf("ledger row %d: account record names %q but its subject is %q", r.ID, p.Name, r.Mechanism)
	}
	switch p.Action {
	case actionAdd:
		if a, ok := as[p.Name]; ok && a.Active() {
			return fmt.Errorf("ledger row %d: adds account %q, which is already active", r.ID, p.Name)
		}
		salt, err1 := hex.DecodeString(p.Salt)
		hash, err2 := hex.DecodeString(p.Hash)
		if p.Hasher != Hasher || err1 != nil || err2 != nil || len(salt) != 16 || len(hash) != sha256.Size {
			return fmt.Errorf("ledger row %d: account %q: hasher %q with a %d-character salt and a %d-character hash (want %s, 32 and 64 hex digits)", r.ID, p.Name, p.Hasher, len(p.Salt), len(p.Hash), Hasher)
		}
		as[p.Name] = &Account{Name: p.Name, Scope: r.Scope, Added: r.At, ID: r.ID, salt: salt, hash: hash}
	case actionRevoke:
		a, ok := as[p.Name]
		if !ok || !a.Active() {
			return fmt.Errorf("ledger row %d: revokes account %q, which is not active", r.ID, p.Name)
		}
		if a.Scope != r.Scope {
			return fmt.Errorf("ledger row %d: revokes account %q in scope %q, but it was added in %q", r.ID, p.Name, r.Scope, a.Scope)
		}
		a.Revoked = r.At
	default:
		return fmt.Errorf("ledger row %d: unknown account action %q", r.ID, p.Action)
	}
	return nil
}

// ErrAccountTable reports a dp_account that does not match the chain.
var ErrAccountTable = errors.New("dp_account does not match the account records of the ledger's chain")

// VerifyAccounts checks that the derived table dp_account holds exactly the
// accounts the chain's records give (the service never reads the table, so
// a mismatch grants nothing, but it shows that someone edited the file). It
// returns the number of accounts.
func VerifyAccounts(ctx context.Context, q ledger.Queryer) (int, error) {
	as, err := readAccounts(ctx, q)
	if err != nil {
		return 0, err
	}
	// SQL readers see whatever main.dp_account names, in any case.
	var has, other int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE type = 'table'), count(*) FILTER (WHERE type NOT IN ('table', 'trigger')) FROM main.sqlite_schema WHERE name = 'dp_account' COLLATE NOCASE`).Scan(&has, &other); err != nil {
		return 0, err
	}
	if other > 0 {
		return 0, fmt.Errorf("%w: dp_account is not a table (a view or other object took its name)", ErrAccountTable)
	}
	if has == 0 {
		if len(as) > 0 {
			return 0, fmt.Errorf("%w: the table is missing", ErrAccountTable)
		}
		return 0, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT name, scope, hasher, salt, hash, added_at, coalesce(revoked_at, ''), ledger_id FROM main.dp_account`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var name, scope, hasher, salt, hash, added, revoked string
		var id int64
		if err := rows.Scan(&name, &scope, &hasher, &salt, &hash, &added, &revoked, &id); err != nil {
			return 0, err
		}
		a, ok := as[name]
		switch {
		case !ok:
			return 0, fmt.Errorf("%w: account %q is not in the chain", ErrAccountTable, name)
		case scope != a.Scope || hasher != Hasher || salt != hex.EncodeToString(a.salt) || hash != hex.EncodeToString(a.hash) || added != a.Added || revoked != a.Revoked || id != a.ID:
			return 0, fmt.Errorf("%w: account %q differs from its records (ledger row %d)", ErrAccountTable, name, a.ID)
		}
		seen[name] = true
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for name := range as {
		if !seen[name] {
			return 0, fmt.Errorf("%w: account %q is missing from the table", ErrAccountTable, name)
		}
	}
	return len(as), nil
}
