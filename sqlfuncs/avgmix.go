package sqlfuncs

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

// avgmixOptions are dp_avgmix's options (a JSON object).
type avgmixOptions struct {
	Into     string   `json:"into"`
	Mu       *float64 `json:"mu"`
	Epsilon  *float64 `json:"epsilon"`
	Delta    *float64 `json:"delta"`
	N        *int     `json:"n"`
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

// countShare is the share of mu that dp_avgmix spends on its noisy row count
// when the caller asserts no n: mu_n = countShare * mu (sensitivity 1).
const countShare = 0.05

// avgmixAgg is the dp_avgmix(features, label, options) aggregate: it buffers
// the rows, then releases T noisy mixup averages into a new table, charged in
// the same transaction.
//
// Sizes are public, never read from the data: the inclusion rate is q = m/n
// with n the caller's asserted figure (option "n"), T defaults to n and m to
// m*(n, T, mu). Poisson sampling at a fixed public q with the fixed divisor m
// is add/remove-DP whatever the true number of rows, so the true count is
// never compared with n, reported, or used for the number of released rows.
// Without "n", mu_n = 0.05 mu buys a noisy count c (Gaussian, sensitivity 1),
// n = max(m, round(c)), and the release is calibrated so that the count and
// the release together, charged as one composite entry, meet the requested
// budget at the scope's delta (or the given delta). Once the count is drawn,
// something is always charged: the composite, or, if it is refused or fails,
// the count alone, so that no refusal reveals anything about the count for
// free.
//
// One caveat of the noisy-count path: the release's parameters (q, T, sigma)
// are chosen after the count is drawn, and the rigorous accountant composes
// the two parts as if they had been fixed in advance. That is the assumption
// every scope with non-Gaussian entries already makes across charges an
// analyst chooses after seeing earlier answers; it is a theorem for GDP
// (Smith and Thakurta, "Fully Adaptive Composition for Gaussian Differential
// Privacy", arXiv 2210.17520), not for privacy loss distributions in general.
// Here the choice moves with a 0.05 mu count, so q and T move by about
// 1/(mu_n n) relative. Asserting n avoids the question.
type avgmixAgg struct {
	c    *Conn
	rows vectorRows
	// calibrating is closed when the calibration started at the first row
	// (startCalibration) has finished; nil if none was started.
	calibrating chan struct{}
}

// step and done make avgmixAgg a rowAggregate (aggregate.go).
func (a *avgmixAgg) step(args []any) error { return a.Step(args[0], args[1], args[2]) }
func (a *avgmixAgg) done() (string, error) { return a.Done() }

func (a *avgmixAgg) Step(features, label, opts any) (err error) {
	defer func() { a.rows.fail(err) }()
	defer guard("dp_avgmix", &err) // runs first, so a panic is remembered too
	if err := a.rows.add(features, label, opts); err != nil {
		return err
	}
	if a.rows.N == 1 {
		a.startCalibration()
	}
	return nil
}

// startCalibration starts, at the first row, the calibration that
// releaseAsserted will ask for, on its own goroutine, so that it runs on
// another core while SQLite reads the rest of the rows (about 0.45 s each at
// Fashion-MNIST's shape). It applies when n is asserted and sampling is
// Poisson: the calibration's problem (q = m/n, T steps, the target epsilon
// at its delta) then comes from the options and the scope's budget alone,
// never from a row, so computing it early reveals nothing and changes
// nothing. Its result reaches the release through the process's memo of
// calibrations (calibrateSubsampled), which the release's own, identical
// request then finds; a request that differs (the budget changed meanwhile)
// calibrates anew. It then quotes the release and makes the charge's budget
// decision (Ledger.Decide, which writes nothing), whose certified epsilon the
// charge then finds in the accountant's memo. Everything the release decides
// is still decided, checked and priced in Done: any error here only loses
// the head start.
func (a *avgmixAgg) startCalibration() {
	const fn = "dp_avgmix"
	var o avgmixOptions
	if decodeOptions(fn, a.rows.opts, &o) != nil || o.N == nil {
		return
	}
	a.rows.expect = *o.N
	if o.Sampling != "" && o.Sampling != avgmix.Poisson {
		return
	}
	// The shape as the release will take it, read here: Step goes on adding
	// rows (and, for INTEGER labels, raising K to the largest label seen)
	// while the goroutine runs. K is the label vectors' length, or the
	// public "classes" for INTEGER labels (without it the release is
	// refused; the largest label seen is never used).
	d, k := a.rows.D, a.rows.K
	if a.rows.Classes != nil {
		if o.Classes == nil {
			return
		}
		k = *o.Classes
	}
	c, scope := a.c, a.c.Scope()
	// The ledger stays open until the goroutine is done, even if the
	// connection closes first (a failed or interrupted statement does not
	// wait for it).
	if c.path == "" || ledger.RetainLedger(c.path) != nil {
		return
	}
	done := make(chan struct{})
	a.calibrating = done
	go func() {
		defer close(done)
		defer ledger.ReleaseLedger(c.path)
		var err error
		defer guard(fn, &err) // a panic, too, only loses the head start
		st, err := c.budget(scope)
		if err != nil {
			return
		}
		mu, eps, delta, err := o.budget(fn, st)
		if err != nil {
			return
		}
		p, err := o.params(fn)
		if err != nil {
			return
		}
		p = assertedParams(p, mu, *o.N)
		p.Calibrate = func(q float64, steps int) (float64, error) {
			sigma, err := c.calibrateSubsampled(nil, q, steps, eps, delta)
			if err == nil {
				countsOf(calibrationProblem{Q: q, Steps: steps, Epsilon: eps, Delta: delta}.key()).heads.Add(1)
			}
			return sigma, err
		}
		plan, err := avgmix.NewPlan(nil, *o.N, d, k, p)
		if err != nil {
			return
		}
		// The budget decision of the charge the release will make, priced
		// now: its certified epsilon (the composition with the scope's
		// spend, some tens of milliseconds) is remembered by content, so
		// the charge's own decision, made again inside its transaction at
		// whatever head the chain has then, finds it when nothing changed.
		q, err := plan.Quote(nil, avgmixRecord(o, *o.N, eps, delta), st.Delta, accountant.Price)
		if err != nil {
			return
		}
		if l, err := c.ledger(); err == nil {
			dec, _ := l.Decide(context.Background(), ledger.Charge{Scope: scope, Quote: &q})
			if dec.Ready() {
				countsOf(calibrationProblem{Q: plan.Q, Steps: plan.Steps, Epsilon: eps, Delta: delta}.key()).decided.Add(1)
			}
		}
	}()
}

// avgmixRecord is the ledger record of a release of n asserted rows at the
// target (eps, delta), before the quote completes it.
func avgmixRecord(o avgmixOptions, n int, eps, delta float64) mechanism.Avgmix {
	return mechanism.Avgmix{Into: o.Into, N: n, NSource: mechanism.NAsserted, TargetEpsilon: eps, TargetDelta: delta}
}

// waitCalibration waits for the calibration startCalibration started, if any.
func (a *avgmixAgg) waitCalibration() {
	if a.calibrating != nil {
		<-a.calibrating
	}
}

// avgmixRequest is everything dp_avgmix decides from public inputs before it
// looks at the number of rows.
type avgmixRequest struct {
	o          avgmixOptions
	noise      *release.Noise
	k          int
	y          []float32
	mu, eps    float64 // the budget of the whole call
	delta      float64 // where it is calibrated
	scopeDelta float64
	p          avgmix.Params
}

func (a *avgmixAgg) Done() (string, error) {
	return a.c.runRelease(releaseSteps{
		fn:    "dp_avgmix",
		rows:  &a.rows,
		empty: "no rows to release (empty input)", // options come with the first row: nothing to plan with
		plan: func() (func() (string, error), error) {
			req, err := a.request()
			if err != nil {
				return nil, err
			}
			if req.o.N != nil {
				return func() (string, error) { return a.releaseAsserted(req) }, nil
			}
			return func() (string, error) { return a.releaseNoisyCount(req) }, nil
		},
	})
}

// request checks the options and the budget; nothing here depends on the
// number of rows.
func (a *avgmixAgg) request() (*avgmixRequest, error) {
	const fn = "dp_avgmix"
	r := &a.rows
	req := &avgmixRequest{}
	o := &req.o
	if err := decodeOptions(fn, r.opts, o); err != nil {
		return nil, err
	}
	if _, err := outputTable(fn, nil, o.Into); err != nil {
		return nil, err
	}
	var err error
	if req.noise, err = seededNoise(fn, o.Seed); err != nil {
		return nil, err
	}
	if req.noise == nil {
		req.noise = a.c.noise
	}
	// Labels: class ids become one-hot vectors over the public K classes. K is
	// never taken from the data: the largest label present would reveal its row.
	req.k = r.K
	switch {
	case r.Classes != nil && o.Classes == nil:
		return nil, fmt.Errorf("%s: option \"classes\" (the public number of classes K; labels lie in 0..K-1) is required for INTEGER labels: taking it from the largest label present would reveal that label's row", fn)
	case r.Classes == nil && o.Classes != nil:
		return nil, fmt.Errorf("%s: option \"classes\" applies to INTEGER labels; these labels are vectors of length %d", fn, r.K)
	case o.Classes != nil:
		if *o.Classes < 1 {
			return nil, fmt.Errorf("%s: classes must be >= 1, got %d", fn, *o.Classes)
		}
		if err := r.checkClasses(fn, *o.Classes); err != nil {
			return nil, err
		}
		req.k = *o.Classes
	}
	req.y = r.Y
	if r.Classes != nil {
		req.y = make([]float32, r.N*req.k)
		for i, c := range r.Classes {
			req.y[i*req.k+c] = 1
		}
	}
	// The budget: mu, or (epsilon, delta); calibration is rigorous (PLD) at
	// the scope's delta for mu, at the given delta otherwise.
	st, err := a.c.budget(a.c.Scope())
	if err != nil {
		return nil, err
	}
	req.scopeDelta = st.Delta
	if req.mu, req.eps, req.delta, err = o.budget(fn, st); err != nil {
		return nil, err
	}
	if req.p, err = o.params(fn); err != nil {
		return nil, err
	}
	// A taken name is public: refuse it before any noise is drawn (the
	// release's transaction checks again).
	if taken, err := a.c.tableExists(o.Into); err != nil {
		return nil, err
	} else if taken {
		return nil, fmt.Errorf("%s: table %q already exists; releases never overwrite, choose another \"into\"", fn, o.Into)
	}
	return req, nil
}

// budget returns the call's budget from its options: mu and its epsilon at
// the scope's delta, or (epsilon, delta) and their mu. It reads no row.
func (o *avgmixOptions) budget(fn string, st accountant.Budget) (mu, eps, delta float64, err error) {
	switch {
	case o.Mu != nil && o.Epsilon != nil:
		return 0, 0, 0, fmt.Errorf("%s: give either \"mu\" or \"epsilon\" (with \"delta\"), not both", fn)
	case o.Mu != nil:
		if mu, err = checkNumber(fn, positive("mu"), *o.Mu); err != nil {
			return 0, 0, 0, err
		}
		if o.Delta != nil {
			return 0, 0, 0, fmt.Errorf("%s: \"delta\" goes with \"epsilon\"; with \"mu\" the scope's delta (%g) is used", fn, st.Delta)
		}
		delta = st.Delta
		if eps, err = accountant.Epsilon(mu, delta); err != nil {
			return 0, 0, 0, err
		}
	case o.Epsilon != nil:
		if eps, err = checkNumber(fn, positive("epsilon"), *o.Epsilon); err != nil {
			return 0, 0, 0, err
		}
		if o.Delta == nil {
			return 0, 0, 0, fmt.Errorf("%s: \"epsilon\" needs \"delta\"", fn)
		}
		if delta, err = checkNumber(fn, probability("delta"), *o.Delta); err != nil {
			return 0, 0, 0, err
		}
		if mu, err = accountant.Mu(eps, delta); err != nil {
			return 0, 0, 0, err
		}
	default:
		return 0, 0, 0, fmt.Errorf("%s: option \"mu\" (or \"epsilon\" and \"delta\") is required: the privacy budget of this release", fn)
	}
	return mu, eps, delta, nil
}

// params returns the mechanism's parameters from the options (without mu,
// which depends on the path). It reads no row.
func (o *avgmixOptions) params(fn string) (avgmix.Params, error) {
	p := avgmix.Params{Sampling: o.Sampling}
	if o.N != nil && (*o.N < 1 || *o.N > avgmix.MaxRows) {
		return p, fmt.Errorf("%s: n (the public number of rows you assert) must lie in [1, %d], got %d", fn, avgmix.MaxRows, *o.N)
	}
	if o.T != nil {
		if *o.T <= 0 {
			return p, fmt.Errorf("%s: T (rows to release) must be >= 1, got %d", fn, *o.T)
		}
		p.T = *o.T
	}
	if o.M != nil {
		if *o.M <= 0 {
			return p, fmt.Errorf("%s: m (mixup degree) must be >= 1, got %d", fn, *o.M)
		}
		if *o.M > avgmix.MaxRows {
			return p, fmt.Errorf("%s: m (mixup degree) must be <= %d, got %d", fn, avgmix.MaxRows, *o.M)
		}
		p.M = *o.M
	}
	var err error
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"lambda", o.Lambda, &p.Lambda}, {"cx", o.Cx, &p.Cx}, {"cy", o.Cy, &p.Cy}, {"p", o.P, &p.P}} {
		if f.v != nil {
			if *f.dst, err = checkNumber(fn, positive(f.name), *f.v); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// releaseAsserted releases with the caller's public n.
func (a *avgmixAgg) releaseAsserted(req *avgmixRequest) (string, error) {
	const fn = "dp_avgmix"
	n := *req.o.N
	p := assertedParams(req.p, req.mu, n)
	eps, delta := req.eps, req.delta
	p.Calibrate = func(q float64, steps int) (float64, error) {
		return interruptible(a.c, fn, func() (float64, error) {
			a.waitCalibration() // the same problem, started at the first row
			return a.c.calibrateSubsampled(nil, q, steps, eps, delta)
		})
	}
	plan, err := avgmix.NewPlan(req.noise, n, a.rows.D, req.k, p)
	if err != nil {
		return "", named(fn, err)
	}
	return a.charge(req, plan, n, nil)
}

// assertedParams completes the options' parameters p for a release with
// the asserted n and budget mu: T defaults to n.
func assertedParams(p avgmix.Params, mu float64, n int) avgmix.Params {
	p.Mu = mu
	if p.T == 0 {
		p.T = n
	}
	return p
}

// noisyCount is the charged count of the noisy-count path.
type noisyCount struct {
	value float64             // the noisy count
	mu    float64             // mu_n
	mech  mechanism.Mechanism // its part of the composite charge
}

// releaseNoisyCount buys n with a noisy count, then releases; the count and
// the release are charged as one composite entry.
func (a *avgmixAgg) releaseNoisyCount(req *avgmixRequest) (string, error) {
	const fn = "dp_avgmix"
	muN := countShare * req.mu
	sigmaN, err := release.GaussianSigma(1, muN, 1)
	if err != nil {
		return "", fmt.Errorf("%s: noisy count: %w", fn, err)
	}
	nc := &noisyCount{mu: muN, mech: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: muN, Sensitivity: 1, Sigma: sigmaN}}
	// From the draw on, something is always charged (see avgmixAgg).
	v := []float64{float64(a.rows.N)}
	req.noise.AddGaussian(v, sigmaN)
	nc.value = v[0]
	out, err := func() (out string, err error) {
		defer guard(fn, &err) // a panic, too, must leave the count charged
		return a.releaseWithCount(req, nc)
	}()
	if err == nil {
		return out, nil
	}
	rec, cerr := a.chargeCount(req, nc, err)
	if cerr != nil {
		// The release's own error may depend on the noisy count, which was
		// not paid for: leave it out.
		return "", fmt.Errorf("%s: the release failed after its noisy row count was drawn, and that count could not be charged either (%v); nothing was released", fn, cerr)
	}
	return "", fmt.Errorf("%w; the noisy row count it had drawn was charged on its own (mu_n = %.4g, ledger row %d), so that this refusal reveals nothing uncharged", err, muN, rec.ID)
}

// chargeCount charges the noisy count alone, after the release that was to
// follow it failed with refused.
func (a *avgmixAgg) chargeCount(req *avgmixRequest, nc *noisyCount, refused error) (ledger.Receipt, error) {
	const fn = "dp_avgmix"
	q, err := mechanism.NewQuote(nc.mech, req.scopeDelta, accountant.Price, release.NoiseTVOf(1), mechanism.AvgmixCount{
		Into: req.o.Into, NSource: mechanism.NNoisyCount, NNoisy: nc.value, MuN: nc.mu, ReleaseRefused: named(fn, refused).Error(),
	})
	if err != nil {
		return ledger.Receipt{}, err
	}
	return a.c.ChargeQuote(fn, q, nil)
}

func (a *avgmixAgg) releaseWithCount(req *avgmixRequest, nc *noisyCount) (string, error) {
	const fn = "dp_avgmix"
	lo := 1
	if req.p.M > 0 {
		lo = req.p.M
	}
	n := int(math.Max(float64(lo), math.Min(math.Round(nc.value), avgmix.MaxRows)))
	p := req.p
	// The default m uses what the count leaves of the budget.
	p.Mu = math.Sqrt(req.mu*req.mu - nc.mu*nc.mu)
	if p.T == 0 {
		p.T = n
	}
	eps, delta := req.eps, req.delta
	p.Calibrate = func(q float64, steps int) (float64, error) {
		return interruptible(a.c, fn, func() (float64, error) {
			return a.c.calibrateSubsampled([]mechanism.Mechanism{nc.mech}, q, steps, eps, delta)
		})
	}
	plan, err := avgmix.NewPlan(req.noise, n, a.rows.D, req.k, p)
	if err != nil {
		return "", named(fn, err)
	}
	return a.charge(req, plan, n, nc)
}

// charge quotes the plan (its one pricing, at the scope's delta), confirms
// the calibration against the quote, charges exactly the quote and writes
// the release in the charge's transaction, and returns the summary built
// from the same quote. Every figure it records is public or paid for: none
// is the number of rows read.
func (a *avgmixAgg) charge(req *avgmixRequest, plan *avgmix.Plan, n int, nc *noisyCount) (string, error) {
	const fn = "dp_avgmix"
	r := &a.rows
	o, k, delta := req.o, req.k, req.delta
	rec := avgmixRecord(o, n, req.eps, delta)
	var prior *mechanism.Mechanism
	if nc != nil {
		rec.NSource, rec.NNoisy, rec.MuN = mechanism.NNoisyCount, &nc.value, nc.mu
		prior = &nc.mech
	}
	quote, err := plan.Quote(prior, rec, req.scopeDelta, accountant.Price)
	if err != nil {
		return "", err
	}
	// The calibration certified the charged mechanism at the target delta;
	// confirm it on the quote, as a guard against a broken invariant (at
	// another delta than the scope's, a second reading of the same,
	// memoised distribution).
	epsTarget := quote.Epsilon
	if delta != quote.Delta {
		if epsTarget, err = accountant.Price(quote.Mechanism, delta); err != nil {
			return "", err
		}
	}
	if epsTarget > req.eps {
		return "", fmt.Errorf("%s: internal error: the calibrated release costs epsilon %g, above its target %g", fn, epsTarget, req.eps)
	}
	data := avgmix.Data{XChunks: r.featureChunks(), ChunkRows: chunkRows, D: r.D, Y: req.y, K: k, N: r.N}
	// The WAL's writeback runs until the charge has committed (see
	// writeAvgmix), and stops however the charge ends: a panic inside it
	// (recovered at the SQL boundary) must not leave its goroutine and its
	// descriptor of the -wal behind.
	receipt, err := func() (ledger.Receipt, error) {
		wb := sqlite.StartWriteback(a.c.path + "-wal")
		defer wb.Stop()
		// Progress shows T, public when n is asserted; a T that follows a
		// noisy count stays hidden until the charge commits.
		return a.c.ChargeQuote(fn, quote, func(tx *sql.Tx) (map[string]any, error) {
			return nil, writeAvgmix(fn, tx, o.Into, req.noise, data, plan, nc == nil, wb)
		})
	}()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(avgmixSummaryOf(quote, receipt))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// avgmixSummary is what dp_avgmix returns: the params record its ledger row
// holds, the quoted figures and the receipt's.
type avgmixSummary struct {
	mechanism.Avgmix
	Rows              int     `json:"rows"`  // = T
	Q                 float64 `json:"q"`     // inclusion rate of the subsampled Gaussian
	Steps             int     `json:"steps"` // its steps
	Sigma             float64 `json:"sigma"` // its charged noise multiplier (sigma_applied is at least it)
	EpsilonCLT        float64 `json:"epsilon_clt"`
	EpsilonRigorous   float64 `json:"epsilon_rigorous"` // the quote's epsilon, at delta
	Delta             float64 `json:"delta"`            // the scope's
	NoiseTV           float64 `json:"noise_tv"`
	LedgerID          int64   `json:"ledger_id"`
	Scope             string  `json:"scope"`
	ScopeEpsilonSpent float64 `json:"scope_epsilon_spent"`
}

// avgmixSummaryOf builds the summary from the quote that was charged and
// its receipt.
func avgmixSummaryOf(q mechanism.Quote, receipt ledger.Receipt) avgmixSummary {
	rec, _ := q.Params.(mechanism.Avgmix)
	s := avgmixSummary{Avgmix: rec, Rows: rec.T, EpsilonRigorous: q.Epsilon, Delta: q.Delta, NoiseTV: q.NoiseTV,
		LedgerID: receipt.ID, Scope: receipt.Scope, ScopeEpsilonSpent: receipt.Epsilon}
	for _, part := range q.Mechanism.Components() {
		if part.Kind == mechanism.KindSubsampledGaussian {
			s.Q, s.Steps, s.Sigma = part.Q, part.Steps, part.Sigma
		}
	}
	if math.IsInf(s.EpsilonRigorous, 0) {
		s.EpsilonRigorous = -1
	}
	// The central-limit figure is shown, never decides: a GDP conversion.
	if e, err := accountant.Epsilon(rec.MuCLT, q.Delta); err == nil {
		s.EpsilonCLT = e
	}
	return s
}

// writebackRows is how many release rows (about 3 KB each at
// Fashion-MNIST's shape) are written between two writeback requests.
const writebackRows = 2048

// commitSyncEvery is how often the WAL is made durable while the commit
// writes into it (a request made while one is under way waits for it, so the
// fdatasyncs run back to back).
const commitSyncEvery = 2 * time.Millisecond

// writeAvgmix creates the release table and streams the release into it,
// reporting progress if showProgress. The release reaches the WAL as it is
// written and is made durable as it grows by wb, the WAL's writeback, which
// keeps making it durable through the commit once the release is written.
func writeAvgmix(fn string, tx *sql.Tx, into string, noise *release.Noise, data avgmix.Data, plan *avgmix.Plan, showProgress bool, wb *sqlite.Writeback) error {
	q, err := outputTable(fn, tx, into)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(`CREATE TABLE ` + q + ` (id INTEGER PRIMARY KEY, x BLOB NOT NULL, y BLOB NOT NULL)`); err != nil {
		return fmt.Errorf("%s: creating %s: %w", fn, into, err)
	}
	ins := newBatchInsert(tx, q, "id", "x", "y")
	var xb, yb []byte
	emit := func(i int, x, y []float32) error {
		// SQLite copies bound blobs, so the views of x and y are only read
		// during add.
		xb, yb = vector.View(xb, x), vector.View(yb, y)
		if err := ins.add(int64(i+1), xb, yb); err != nil {
			return fmt.Errorf("%s: writing row %d of %s: %w", fn, i+1, into, err)
		}
		if i%writebackRows == writebackRows-1 {
			wb.Start()
		}
		if showProgress && i%4096 == 4095 {
			report(fn, i+1, plan.T)
		}
		return nil
	}
	// The workers of Release call emit, off the statement's goroutine.
	err = writeOffStatement(tx, func() error {
		return avgmix.Release(noise, data, plan, emit)
	})
	if ferr := ins.flush(); err == nil && ferr != nil {
		err = fmt.Errorf("%s: writing %s: %w", fn, into, ferr)
	}
	if showProgress {
		report(fn, plan.T, plan.T)
	}
	if err != nil {
		return err
	}
	wb.Every(commitSyncEvery)
	return nil
}
