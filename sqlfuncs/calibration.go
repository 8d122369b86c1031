package sqlfuncs

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// Calibrating the noise multiplier of a subsampled Gaussian release (dp_avgmix)
// takes several rigorous epsilon evaluations, about 0.45 s at Fashion-MNIST's
// shape. Its result is kept in the table
//
//	dp_calibration_cache(problem TEXT PRIMARY KEY, sigma REAL)
//
// written in the transaction of the charge that used it. Nothing read from
// that table is trusted: a cached sigma is only a starting guess, used after
// this process has recomputed the rigorous epsilon of exactly the mechanism
// that will be charged, from (q, sigma, T) and any prior part, and found it
// within [target (1 - calibrationSlack), target]. A forged sigma below the
// honest one overspends and is refused; one above it wastes utility and is
// refused too; either way the calibration runs anew and the row is replaced.
// The charge itself checks the epsilon once more before it commits.

const calibrationCacheSchema = `CREATE TABLE IF NOT EXISTS dp_calibration_cache (
  problem TEXT PRIMARY KEY,
  sigma   REAL NOT NULL
)`

// calibrationSlack is how far below its target a cached sigma's epsilon may
// lie: the calibrations themselves stop within it
// (accountant.CalibrateSubsampledSigmaAfter at 1e-3, CalibrateSubsampledSigma
// at sigma to 1e-4).
const calibrationSlack = 1e-3

// calibrationProblem is one calibration: the smallest sigma such that the
// prior mechanisms composed with steps of a Poisson-subsampled Gaussian at
// rate q meet epsilon at delta. Its JSON is the cache key.
type calibrationProblem struct {
	Prior   []mechanism.Mechanism `json:"prior,omitempty"`
	Q       float64               `json:"q"`
	Steps   int                   `json:"steps"`
	Epsilon float64               `json:"epsilon"`
	Delta   float64               `json:"delta"`
}

func (p calibrationProblem) key() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// mechanisms is what a charge at sigma records.
func (p calibrationProblem) mechanisms(sigma float64) []mechanism.Mechanism {
	return append(p.Prior[:len(p.Prior):len(p.Prior)],
		mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: p.Q, Sigma: sigma, Steps: p.Steps})
}

// accepts reports whether sigma meets the target within calibrationSlack,
// by the rigorous accountant in this process.
func (p calibrationProblem) accepts(sigma float64) bool {
	if !(sigma > 0) || sigma > 1e6 {
		return false
	}
	eps, err := accountant.RigorousEpsilon(p.mechanisms(sigma), p.Delta)
	return err == nil && eps <= p.Epsilon && eps >= p.Epsilon*(1-calibrationSlack)
}

// solve calibrates from scratch.
func (p calibrationProblem) solve() (float64, error) {
	switch len(p.Prior) {
	case 0:
		return accountant.CalibrateSubsampledSigma(p.Q, p.Steps, p.Epsilon, p.Delta)
	case 1:
		return accountant.CalibrateSubsampledSigmaAfter(p.Prior[0], p.Q, p.Steps, p.Epsilon, p.Delta)
	}
	return 0, fmt.Errorf("internal error: calibration after %d parts", len(p.Prior))
}

// calibrated holds the sigmas this process calibrated or verified.
var calibrated sync.Map // problem key -> float64

// calibrating holds the calibrations in progress in this process.
var calibrating sync.Map // problem key -> chan struct{}, closed when done

// calibrationCounts counts, per problem key, the calibrations this process
// ran from scratch and the dp_avgmix head starts (startCalibration) that
// finished; tests read them.
var calibrationCounts sync.Map // problem key -> *calibrationCount

type calibrationCount struct{ solves, heads, decided atomic.Int64 }

// countsOf returns the counts of a problem key.
func countsOf(key string) *calibrationCount {
	v, _ := calibrationCounts.LoadOrStore(key, new(calibrationCount))
	return v.(*calibrationCount)
}

// calibrateSubsampled returns the noise multiplier of the problem (prior may
// be nil): from this process's memo, else from the file's cache if this
// process accepts it, else calibrated now (and then written to the cache in
// the transaction of the connection's next charge).
func (c *Conn) calibrateSubsampled(prior []mechanism.Mechanism, q float64, steps int, eps, delta float64) (float64, error) {
	p := calibrationProblem{Prior: prior, Q: q, Steps: steps, Epsilon: eps, Delta: delta}
	key := p.key()
	for {
		if v, ok := calibrated.Load(key); ok {
			return v.(float64), nil
		}
		// One calibration of a problem at a time in the process: the others
		// (dp_avgmix's head start and its release, the groups of a GROUP BY)
		// wait for it and read its result from the memo, or, if it failed,
		// calibrate themselves.
		mine := make(chan struct{})
		other, busy := calibrating.LoadOrStore(key, mine)
		if !busy {
			defer func() {
				calibrating.Delete(key)
				close(mine)
			}()
			break
		}
		<-other.(chan struct{})
	}
	if v, ok := calibrated.Load(key); ok { // finished between the two looks
		return v.(float64), nil
	}
	if sigma, ok := c.cachedSigma(key); ok && p.accepts(sigma) {
		calibrated.Store(key, sigma)
		return sigma, nil
	}
	countsOf(key).solves.Add(1)
	sigma, err := p.solve()
	if err != nil {
		return 0, err
	}
	calibrated.Store(key, sigma)
	c.mu.Lock()
	if c.calibrations == nil {
		c.calibrations = map[string]float64{}
	}
	c.calibrations[key] = sigma
	c.mu.Unlock()
	return sigma, nil
}

// cachedSigma reads the file's cached sigma for the problem key; any error
// counts as no entry.
func (c *Conn) cachedSigma(key string) (float64, bool) {
	l, err := c.ledger()
	if err != nil {
		return 0, false
	}
	var sigma float64
	err = l.View(context.Background(), func(q ledger.Queryer) error {
		return q.QueryRowContext(context.Background(), `SELECT sigma FROM dp_calibration_cache WHERE problem = ?`, key).Scan(&sigma)
	})
	return sigma, err == nil
}

// withCalibrations makes release (nil or not) also write the calibrations
// this connection made since its last charge to dp_calibration_cache, in the
// charge's transaction. written forgets them once the charge committed.
func (c *Conn) withCalibrations(release func(tx *sql.Tx) (map[string]any, error)) (_ func(tx *sql.Tx) (map[string]any, error), written func()) {
	c.mu.Lock()
	pending := make(map[string]float64, len(c.calibrations))
	for k, v := range c.calibrations {
		pending[k] = v
	}
	c.mu.Unlock()
	if len(pending) == 0 {
		return release, func() {}
	}
	return func(tx *sql.Tx) (map[string]any, error) {
			if _, err := tx.Exec(calibrationCacheSchema); err != nil {
				return nil, fmt.Errorf("creating dp_calibration_cache: %w", err)
			}
			for k, sigma := range pending {
				if _, err := tx.Exec(`INSERT OR REPLACE INTO dp_calibration_cache VALUES (?, ?)`, k, sigma); err != nil {
					return nil, fmt.Errorf("caching a calibration: %w", err)
				}
			}
			if release == nil {
				return nil, nil
			}
			return release(tx)
		}, func() {
			c.mu.Lock()
			for k := range pending {
				delete(c.calibrations, k)
			}
			c.mu.Unlock()
		}
}
