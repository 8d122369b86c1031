package sqlfuncs

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

func init() {
	registrars = append(registrars, func(c *Conn) error {
		return c.sc.RegisterAggregator("dp_avgmix", func() *avgmixAgg {
			return &avgmixAgg{c: c, rows: vectorRows{fn: "dp_avgmix"}}
		}, false)
	})
}

// avgmixOptions are dp_avgmix's options (a JSON object).
type avgmixOptions struct {
	Into     string   `json:"into"`
	Mu       *float64 `json:"mu"`
	Epsilon  *float64 `json:"epsilon"`
	Delta    *float64 `json:"delta"`
	T        *int     `json:"T"`
	M        *int     `json:"m"`
	Lambda   *float64 `json:"lambda"`
	Cx       *float64 `json:"cx"`
	Cy       *float64 `json:"cy"`
	Sampling string   `json:"sampling"`
	P        *float64 `json:"p"`
	Classes  *int     `json:"classes"`
	Seed     *uint64  `json:"seed"`
}

// avgmixAgg is the dp_avgmix(features, label, options) aggregate: it buffers
// the rows, then releases T noisy mixup averages into a new table, charged in
// the same transaction.
type avgmixAgg struct {
	c    *Conn
	rows vectorRows
}

func (a *avgmixAgg) Step(features, label, opts any) (err error) {
	defer func() { a.rows.fail(err) }()
	defer guard("dp_avgmix", &err) // runs first, so a panic is remembered too
	return a.rows.add(features, label, opts)
}

func (a *avgmixAgg) Done() (out string, err error) {
	const fn = "dp_avgmix"
	defer guard(fn, &err)
	start := time.Now()
	r := &a.rows
	if err := r.finish(a.c); err != nil {
		return "", err
	}
	if r.N == 0 {
		return "", fmt.Errorf("%s: no rows to release (empty input)", fn)
	}
	var o avgmixOptions
	if err := decodeOptions(fn, r.opts, &o); err != nil {
		return "", err
	}
	if _, err := outputTable(fn, nil, o.Into); err != nil {
		return "", err
	}
	noise, err := seededNoise(fn, o.Seed)
	if err != nil {
		return "", err
	}
	if noise == nil {
		noise = a.c.noise
	}
	// Labels: class ids become one-hot vectors over the public K classes. K is
	// never taken from the data: the largest label present would reveal its row.
	k := r.K
	switch {
	case r.Classes != nil && o.Classes == nil:
		return "", fmt.Errorf("%s: option \"classes\" (the public number of classes K; labels lie in 0..K-1) is required for INTEGER labels: taking it from the largest label present would reveal that label's row", fn)
	case r.Classes == nil && o.Classes != nil:
		return "", fmt.Errorf("%s: option \"classes\" applies to INTEGER labels; these labels are vectors of length %d", fn, r.K)
	case o.Classes != nil:
		if *o.Classes < 1 {
			return "", fmt.Errorf("%s: classes must be >= 1, got %d", fn, *o.Classes)
		}
		if err := r.checkClasses(fn, *o.Classes); err != nil {
			return "", err
		}
		k = *o.Classes
	}
	y := r.Y
	if r.Classes != nil {
		y = make([]float32, r.N*k)
		for i, c := range r.Classes {
			y[i*k+c] = 1
		}
	}
	// The budget: mu, or (epsilon, delta); calibration is rigorous (PLD) at
	// the scope's delta for mu, at the given delta otherwise.
	st, err := a.c.status(fn, a.c.Scope())
	if err != nil {
		return "", err
	}
	var mu, eps, delta float64
	switch {
	case o.Mu != nil && o.Epsilon != nil:
		return "", fmt.Errorf("%s: give either \"mu\" or \"epsilon\" (with \"delta\"), not both", fn)
	case o.Mu != nil:
		if mu, err = positive(fn, "mu", *o.Mu); err != nil {
			return "", err
		}
		if o.Delta != nil {
			return "", fmt.Errorf("%s: \"delta\" goes with \"epsilon\"; with \"mu\" the scope's delta (%g) is used", fn, st.Delta)
		}
		delta = st.Delta
		if eps, err = accountant.Epsilon(mu, delta); err != nil {
			return "", fmt.Errorf("%s: %w", fn, err)
		}
	case o.Epsilon != nil:
		if eps, err = positive(fn, "epsilon", *o.Epsilon); err != nil {
			return "", err
		}
		if o.Delta == nil {
			return "", fmt.Errorf("%s: \"epsilon\" needs \"delta\"", fn)
		}
		if delta, err = probability(fn, "delta", *o.Delta); err != nil {
			return "", err
		}
		if mu, err = accountant.Mu(eps, delta); err != nil {
			return "", fmt.Errorf("%s: %w", fn, err)
		}
	default:
		return "", fmt.Errorf("%s: option \"mu\" (or \"epsilon\" and \"delta\") is required: the privacy budget of this release", fn)
	}
	p := avgmix.Params{T: r.N, Mu: mu, Sampling: o.Sampling,
		Calibrate: func(q float64, steps int) (float64, error) {
			return interruptible(a.c, fn, func() (float64, error) { return accountant.CalibrateSubsampledSigma(q, steps, eps, delta) })
		}}
	if o.T != nil {
		if *o.T <= 0 {
			return "", fmt.Errorf("%s: T (rows to release) must be >= 1, got %d", fn, *o.T)
		}
		p.T = *o.T
	}
	if o.M != nil {
		if *o.M <= 0 {
			return "", fmt.Errorf("%s: m (mixup degree) must be >= 1, got %d", fn, *o.M)
		}
		p.M = *o.M
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"lambda", o.Lambda, &p.Lambda}, {"cx", o.Cx, &p.Cx}, {"cy", o.Cy, &p.Cy}, {"p", o.P, &p.P}} {
		if f.v != nil {
			if *f.dst, err = positive(fn, f.name, *f.v); err != nil {
				return "", err
			}
		}
	}
	plan, err := avgmix.NewPlan(noise, r.N, r.D, k, p)
	if err != nil {
		return "", mechanismError(fn, err)
	}
	// The calibration certified the charged mechanism; confirm it, cheaply
	// (its distribution is cached), as a guard against a broken invariant.
	epsPlan, err := accountant.RigorousEpsilon([]accountant.Mechanism{plan.Mechanism}, delta)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fn, err)
	}
	if epsPlan > eps {
		return "", fmt.Errorf("%s: internal error: the calibrated release costs epsilon %g, above its target %g", fn, epsPlan, eps)
	}
	details := map[string]any{
		"into": o.Into, "n": r.N, "n_public": true, "d": r.D, "K": k, "T": plan.T, "m": plan.M,
		"sampling": plan.Sampling, "lambda": plan.Lambda, "cx": plan.Cx, "cy": plan.Cy,
		"sigma_x": plan.SigmaX, "sigma_y": plan.SigmaY, "sigma_applied": plan.Sigma, "mu_clt": plan.CLTMu,
		"target_epsilon": eps, "target_delta": delta,
		"noise_tv": release.NoiseTVOf(plan.T * (r.D + k)),
	}
	if plan.Sampling == avgmix.Hierarchical {
		details["p"], details["class_steps"] = plan.P, plan.ClassSteps
	}
	data := avgmix.Data{XChunks: r.featureChunks(), ChunkRows: chunkRows, D: r.D, Y: y, K: k, N: r.N}
	rec, err := a.c.Charge(fn, plan.Mechanism, details, func(tx *sql.Tx) (map[string]any, error) {
		return nil, writeAvgmix(fn, tx, o.Into, noise, data, plan)
	})
	if err != nil {
		return "", err
	}
	epsCLT, _ := accountant.Epsilon(plan.CLTMu, st.Delta)
	epsRig := epsPlan // verified above when the release was asked for at the scope's delta
	if delta != st.Delta {
		if epsRig, err = accountant.RigorousEpsilon([]accountant.Mechanism{plan.Mechanism}, st.Delta); err != nil {
			epsRig = -1
		}
	}
	summary := map[string]any{
		"into": o.Into, "rows": plan.T, "n": r.N, "d": r.D, "K": k, "m": plan.M, "q": plan.Q, "steps": plan.Steps,
		"sampling": plan.Sampling, "sigma": plan.Sigma, "sigma_x": plan.SigmaX, "sigma_y": plan.SigmaY,
		"mu_clt": plan.CLTMu, "epsilon_clt": epsCLT, "epsilon_rigorous": epsRig, "delta": st.Delta,
		"ledger_id": rec.ID, "scope": rec.Scope, "scope_epsilon_spent": rec.Epsilon,
		"seconds": time.Since(start).Seconds(),
	}
	b, _ := json.Marshal(summary)
	return string(b), nil
}

// writeAvgmix creates the release table and streams the release into it.
func writeAvgmix(fn string, tx *sql.Tx, into string, noise *release.Noise, data avgmix.Data, plan *avgmix.Plan) error {
	q, err := outputTable(fn, tx, into)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(`CREATE TABLE ` + q + ` (id INTEGER PRIMARY KEY, x BLOB NOT NULL, y BLOB NOT NULL)`); err != nil {
		return fmt.Errorf("%s: creating %s: %w", fn, into, err)
	}
	ins := newBatchInsert(tx, q, "id", "x", "y")
	var xb, yb []byte
	err = avgmix.Release(noise, data, plan, func(i int, x, y []float32) error {
		xb, yb = AppendEncoded(xb[:0], x), AppendEncoded(yb[:0], y)
		if err := ins.add(int64(i+1), xb, yb); err != nil {
			return fmt.Errorf("%s: writing row %d of %s: %w", fn, i+1, into, err)
		}
		if i%4096 == 4095 {
			report(fn, i+1, plan.T)
		}
		return nil
	})
	if ferr := ins.flush(); err == nil && ferr != nil {
		err = fmt.Errorf("%s: writing %s: %w", fn, into, ferr)
	}
	report(fn, plan.T, plan.T)
	if err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	return nil
}
