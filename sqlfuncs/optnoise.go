package sqlfuncs

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/optnoise"
)

// dp_optnoise(x, sensitivity, epsilon, delta [, loss]) adds noise optimised
// for loss ('l1', the default, or 'l2') under (epsilon, delta) by
// release/optnoise, at sensitivity normalised to 1 and stretched to the
// query's. The distribution is computed once per file and kept in the table
//
//	dp_optnoise_cache(epsilon, delta, loss, per_unit, half, weights BLOB, sha256, PRIMARY KEY(...))
//
// written in the transaction of the first charge that uses it. Nothing read
// from that table is trusted: a cached distribution is used only after
// optnoise.Verify accepts it in this process (a forged row is replaced by a
// freshly optimised one), and the ledger row carries the weights it used with
// their SHA-256 (accountant's optnoise kind), from which its PLD is computed.

const optCacheSchema = `CREATE TABLE IF NOT EXISTS dp_optnoise_cache (
  epsilon  REAL NOT NULL,
  delta    REAL NOT NULL,
  loss     TEXT NOT NULL,
  per_unit INTEGER NOT NULL,
  half     INTEGER NOT NULL,
  weights  BLOB NOT NULL,
  sha256   TEXT NOT NULL,
  PRIMARY KEY (epsilon, delta, loss, per_unit, half)
)`

// optKey identifies a problem (sensitivity 1).
type optKey struct {
	eps, delta    float64
	loss          optnoise.Loss
	perUnit, half int
}

// optVerified holds the distributions this process has verified, so that a
// repeated call neither re-reads nor re-verifies.
var optVerified sync.Map // optKey -> []uint64

func (c *Conn) dpOptNoise(a *args) (any, error) {
	const fn = "dp_optnoise"
	x, sens, eps, delta := a.num("x", 0), a.num("sensitivity", 0), a.num("epsilon", 0), a.num("delta", 0)
	loss := optnoise.Loss(strings.ToLower(a.str("loss", string(optnoise.L1))))
	p, err := optnoise.Default(eps, delta, loss)
	if err != nil {
		return nil, err
	}
	key := optKey{eps, delta, loss, p.PerUnit, p.Half}
	w, fresh, err := c.optWeights(fn, p, key)
	if err != nil {
		return nil, err
	}
	g, err := release.NewGridNoise(w, p.PerUnit, sens)
	if err != nil {
		return nil, err
	}
	d, err := optnoise.Verify(w, p.PerUnit, eps, delta) // cheap; the memo holds verified weights only
	if err != nil {
		return nil, fmt.Errorf("%s: internal error: %w", fn, err)
	}
	ws, sha := mechanism.EncodeGridWeights(w)
	m := mechanism.Mechanism{Kind: mechanism.KindOptNoise, Epsilon: eps, Delta: d, Sensitivity: g.Scale,
		Weights: ws, WeightsSHA256: sha, Shifts: p.PerUnit}
	rec := mechanism.OptNoise{Grid: g.Grid, SensitivityRequested: sens, DeltaRequested: delta,
		Loss: string(loss), Intervals: len(w), IntervalWidth: float64(g.Width) * g.Grid}
	var store func(tx *sql.Tx) (map[string]any, error)
	if fresh {
		store = func(tx *sql.Tx) (map[string]any, error) {
			if _, err := tx.Exec(optCacheSchema); err != nil {
				return nil, fmt.Errorf("%s: creating dp_optnoise_cache: %w", fn, err)
			}
			if _, err := tx.Exec(`INSERT OR REPLACE INTO dp_optnoise_cache VALUES (?,?,?,?,?,?,?)`,
				eps, delta, string(loss), p.PerUnit, p.Half, weightBytes(w), sha); err != nil {
				return nil, fmt.Errorf("%s: caching the distribution: %w", fn, err)
			}
			return nil, nil
		}
	}
	if _, err := c.Charge(fn, m, rec, store); err != nil {
		return nil, err
	}
	y := c.noise.AddGridNoise(x, g)
	if math.IsInf(y, 0) {
		return nil, fmt.Errorf("%s: the noisy value overflowed", fn)
	}
	return y, nil
}

// optWeights returns verified weights for the problem: from this process's
// memo, else from the file's cache if they verify, else optimised now
// (fresh: they should be written to the cache).
func (c *Conn) optWeights(fn string, p optnoise.Problem, key optKey) (w []uint64, fresh bool, err error) {
	if v, ok := optVerified.Load(key); ok {
		return v.([]uint64), false, nil
	}
	l, err := c.ledger()
	if err != nil {
		return nil, false, err
	}
	var blob []byte
	err = l.View(context.Background(), func(q ledger.Queryer) error {
		return q.QueryRowContext(context.Background(), `SELECT weights FROM dp_optnoise_cache WHERE epsilon = ? AND delta = ? AND loss = ? AND per_unit = ? AND half = ?`,
			key.eps, key.delta, string(key.loss), key.perUnit, key.half).Scan(&blob)
	})
	switch {
	case err == nil:
		if cw, ok := weightsFromBytes(blob, p.N()); ok {
			if _, verr := optnoise.Verify(cw, p.PerUnit, p.Epsilon, p.Delta); verr == nil {
				optVerified.Store(key, cw)
				return cw, false, nil
			}
		}
		// A cached row that does not verify is never used: optimise anew
		// and replace it.
	case errors.Is(err, sql.ErrNoRows), strings.Contains(err.Error(), "no such table"):
	default:
		return nil, false, fmt.Errorf("%s: reading dp_optnoise_cache: %w", fn, err)
	}
	dist, err := optnoise.Optimise(p)
	if err != nil {
		return nil, false, fmt.Errorf("%s: optimising the noise distribution: %w", fn, err)
	}
	optVerified.Store(key, dist.Weights)
	return dist.Weights, true, nil
}

func weightBytes(w []uint64) []byte {
	b := make([]byte, 8*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

func weightsFromBytes(b []byte, n int) ([]uint64, bool) {
	if len(b) != 8*n {
		return nil, false
	}
	w := make([]uint64, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w, true
}
