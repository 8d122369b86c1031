package accountant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// GenesisHash is the prev_hash of the first ledger row.
var GenesisHash = strings.Repeat("0", 64)

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
}

// ComputeHash returns SHA-256, in hex, over the row's canonical content: the
// JSON array [id, at, scope, mechanism, mu, params, query, prev_hash], mu
// printed with 17 significant digits.
func (r Row) ComputeHash() string {
	canon, _ := json.Marshal([]any{r.ID, r.At, r.Scope, r.Mechanism, strconv.FormatFloat(r.Mu, 'g', 17, 64), r.Params, r.Query, r.PrevHash})
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

// ReadLedger returns every ledger row in id order.
func ReadLedger(ctx context.Context, db Queryer) ([]Row, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash FROM dp_ledger ORDER BY id`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, ErrNoLedger
		}
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.At, &r.Scope, &r.Mechanism, &r.Mu, &r.Params, &r.Query, &r.PrevHash, &r.Hash); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Verify checks the hash chain of every ledger row and that each row's mu
// matches its mechanism description. It returns the number of rows checked and
// an error wrapping ErrChainBroken naming the first bad row.
func Verify(ctx context.Context, db Queryer) (int, error) {
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		return 0, err
	}
	prev := GenesisHash
	for i, r := range rows {
		if r.PrevHash != prev {
			return i, fmt.Errorf("%w at row %d: prev_hash %.12s... does not match the previous row's hash %.12s... (a row was removed, inserted or reordered)", ErrChainBroken, r.ID, r.PrevHash, prev)
		}
		if got := r.ComputeHash(); got != r.Hash {
			return i, fmt.Errorf("%w at row %d: its content does not match its hash (the row was edited)", ErrChainBroken, r.ID)
		}
		m, err := ParseMechanism([]byte(r.Params))
		if err != nil {
			return i, fmt.Errorf("row %d cannot be re-accounted: %w", r.ID, err)
		}
		if mu := m.GDPMu(); !(math.Abs(mu-r.Mu) <= 1e-12*math.Max(1, mu)) && !(math.IsInf(mu, 1) && math.IsInf(r.Mu, 1)) {
			return i, fmt.Errorf("row %d: recorded mu %g does not match its mechanism (%g)", r.ID, r.Mu, mu)
		}
		prev = r.Hash
	}
	return len(rows), nil
}
