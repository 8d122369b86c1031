package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/ledger"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/beam/pipeline"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

// avgmixConfig holds the avgmix command's options.
type avgmixConfig struct {
	db, scope, into    string
	mu, epsilon, delta float64
	n, T, m            int
	lambda, cx, cy, p  float64
	sampling           string
	src                pipeline.Source
	staging            string
	parts, combineMB   int
	npyFiles, labels   string
	csvFiles, table    string
	command            string
}

// listFlag splits a comma-separated list of paths, making local paths
// absolute: workers run in directories of their own, so a path relative to
// the driver's would name another file there (or none).
func listFlag(s string) []string {
	if s == "" {
		return nil
	}
	paths := strings.Split(s, ",")
	for i, p := range paths {
		paths[i] = absPath(p)
	}
	return paths
}

// absPath makes a local path absolute; URLs of Beam filesystems (gs://...)
// stay as they are.
func absPath(p string) string {
	if p == "" || strings.Contains(p, "://") {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func (m *Main) runAvgmix(ctx context.Context, args []string) int {
	var c avgmixConfig
	fs := flag.NewFlagSet("dpsql-beam avgmix", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&c.db, "db", "", "the dpsql database file holding the ledger (and the release table)")
	fs.StringVar(&c.scope, "scope", accountant.DefaultScope, "the budget scope to charge")
	fs.StringVar(&c.into, "into", "", "the new release table")
	fs.Float64Var(&c.mu, "mu", 0, "GDP budget of the release (or give --epsilon and --delta)")
	fs.Float64Var(&c.epsilon, "epsilon", 0, "epsilon of the release (with --delta)")
	fs.Float64Var(&c.delta, "delta", 0, "delta of the release (with --epsilon)")
	fs.IntVar(&c.n, "n", 0, "the PUBLIC number of rows the release is planned for (q = m/n); never compared with the data")
	fs.IntVar(&c.T, "T", 0, "rows to release (default n)")
	fs.IntVar(&c.m, "m", 0, "mixup degree (default the paper's m*(n, T, mu))")
	fs.Float64Var(&c.lambda, "lambda", 0, "feature/label noise balance (default 1)")
	fs.Float64Var(&c.cx, "cx", 0, "L2 clip bound of feature rows (default 1)")
	fs.Float64Var(&c.cy, "cy", 0, "L2 clip bound of label rows (default 1)")
	fs.StringVar(&c.sampling, "sampling", "", "poisson (default) or hierarchical")
	fs.Float64Var(&c.p, "p", 0, "class rate of hierarchical sampling")
	fs.IntVar(&c.src.Classes, "classes", 0, "the public number of classes K, for integer labels")
	fs.StringVar(&c.npyFiles, "npy", "", "feature shards: comma-separated .npy files")
	fs.StringVar(&c.labels, "labels", "", "label shards for --npy: comma-separated .npy files, one per feature shard")
	fs.StringVar(&c.csvFiles, "csv", "", "CSV shards: comma-separated files with an integer label column")
	fs.StringVar(&c.src.LabelColumn, "label-column", "", "the CSV label column (default: the column named label)")
	fs.StringVar(&c.table, "table", "", "read the rows from this table of --db (features BLOB, label INTEGER or BLOB)")
	fs.StringVar(&c.src.FeatureColumn, "feature-col", "features", "the table's feature column")
	fs.StringVar(&c.src.TableLabelColumn, "label-col", "label", "the table's label column")
	fs.IntVar(&c.src.Parts, "table-parts", 4, "read the table as this many shards (by rowid)")
	fs.Float64Var(&c.src.Scale, "scale", 0, "multiply every feature value (default 1, or 1/255 for uint8 npy)")
	fs.StringVar(&c.staging, "staging", "", "directory under which each job stages its noisy rows, readable by the driver and writable by the workers (default a temporary directory beside --db)")
	fs.IntVar(&c.parts, "staging-parts", 16, "number of staging files")
	fs.IntVar(&c.combineMB, "combine-mb", pipeline.DefaultCombineBytes>>20, "MiB of per-bundle accumulators per sampling worker (T*(d+K)*8 bytes combine best)")
	commandUsage(fs, m.Stderr, "dpsql-beam avgmix --db FILE --into TABLE --mu MU --n N --classes K\n"+
		"         (--npy X0.npy,... --labels Y0.npy,... | --csv A.csv,... | --table T) [options] [Beam flags]")
	return m.runCommand(fs, args, "all inputs are flags", func(command string) (any, error) {
		c.command = command
		return m.avgmix(ctx, &c)
	})
}

// runCommand parses a sub-command's flags (with Beam's own), refuses
// positional arguments (hint says what to give instead), runs it with its
// command line and prints its summary as JSON. It returns the exit status:
// 0, 1 for a failed run, 2 for a usage mistake.
func (m *Main) runCommand(fs *flag.FlagSet, args []string, hint string, run func(command string) (any, error)) int {
	name := fs.Name()
	beamFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "%s: unexpected argument %q (%s)\n", name, fs.Arg(0), hint)
		return 2
	}
	initBeam()
	m.defaultWorkerBinary()
	err := checkRunner()
	var sum any
	if err == nil {
		sum, err = run(name + " " + strings.Join(args, " "))
	}
	if err != nil {
		var u usageError
		fmt.Fprintf(m.Stderr, "%s: %v\n", name, err)
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	b, _ := json.Marshal(sum)
	fmt.Fprintln(m.Stdout, string(b))
	return 0
}

// usageError is a refusal of the options, before anything was charged.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// source fills c.src from the input flags.
func (c *avgmixConfig) source() error {
	n := 0
	for _, s := range []string{c.npyFiles, c.csvFiles, c.table} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return usagef("give exactly one input: --npy (with --labels), --csv or --table")
	}
	switch {
	case c.npyFiles != "":
		c.src.Format, c.src.Files, c.src.Labels = pipeline.NPY, listFlag(c.npyFiles), listFlag(c.labels)
	case c.csvFiles != "":
		c.src.Format, c.src.Files = pipeline.CSV, listFlag(c.csvFiles)
		if c.labels != "" {
			return usagef("--labels is for --npy shards; CSV shards hold their labels in a column (--label-column)")
		}
	default:
		c.src.Format, c.src.DB, c.src.Table = pipeline.SQLite, absPath(c.db), c.table
		if c.labels != "" {
			return usagef("--labels is for --npy shards; a table holds its labels in a column (--label-col)")
		}
	}
	return nil
}

// avgmixSummary is what a successful run prints, as JSON.
type avgmixSummary struct {
	Into              string  `json:"into"`
	Rows              int     `json:"rows"`
	N                 int     `json:"n"`
	D                 int     `json:"d"`
	K                 int     `json:"K"`
	M                 int     `json:"m"`
	Q                 float64 `json:"q"`
	Steps             int     `json:"steps"`
	Sampling          string  `json:"sampling"`
	Sigma             float64 `json:"sigma"` // the charged noise multiplier (the row's sigma_applied is at least it)
	SigmaX            float64 `json:"sigma_x"`
	SigmaY            float64 `json:"sigma_y"`
	MuCLT             float64 `json:"mu_clt"`
	EpsilonRigorous   float64 `json:"epsilon_rigorous"`
	Delta             float64 `json:"delta"`
	LedgerID          int64   `json:"ledger_id"`
	Scope             string  `json:"scope"`
	ScopeEpsilonSpent float64 `json:"scope_epsilon_spent"`
	Job               string  `json:"job"`
	Runner            string  `json:"runner"`
	Seconds           float64 `json:"seconds"`
	PipelineSeconds   float64 `json:"pipeline_seconds"`
}

// planned is a release ready to charge.
type planned struct {
	plan  *avgmix.Plan
	eps   float64 // the target epsilon at delta
	delta float64
	quote mechanism.Quote // what is charged: the plan priced at the scope's delta, with dp_avgmix's record
}

// planAvgmix plans the release from public parameters exactly as the SQL
// function dp_avgmix does (sqlfuncs/avgmix.go): the budget as mu (at the
// scope's delta) or (epsilon, delta), the rigorous PLD calibration, T = n
// and m = m*(n, T, mu) by default, and the same quote (mechanism,
// mechanism.Avgmix record, noise_tv, quoted epsilon at the scope's delta).
// n is the caller's public assertion.
func planAvgmix(c *avgmixConfig, st ledger.Status, d, k int) (planned, error) {
	var pr planned
	var mu float64
	var err error
	switch {
	case c.mu != 0 && c.epsilon != 0:
		return pr, usagef("give either --mu or --epsilon (with --delta), not both")
	case c.mu != 0:
		if !(c.mu > 0) || math.IsInf(c.mu, 0) {
			return pr, usagef("--mu must be positive and finite, got %v", c.mu)
		}
		if c.delta != 0 {
			return pr, usagef("--delta goes with --epsilon; with --mu the scope's delta (%g) is used", st.Delta)
		}
		mu, pr.delta = c.mu, st.Delta
		if pr.eps, err = accountant.Epsilon(mu, pr.delta); err != nil {
			return pr, usageError{err}
		}
	case c.epsilon != 0:
		if !(c.epsilon > 0) || math.IsInf(c.epsilon, 0) {
			return pr, usagef("--epsilon must be positive and finite, got %v", c.epsilon)
		}
		if !(c.delta > 0 && c.delta < 1) {
			return pr, usagef("--epsilon needs --delta in (0, 1), got %v", c.delta)
		}
		pr.eps, pr.delta = c.epsilon, c.delta
		if mu, err = accountant.Mu(pr.eps, pr.delta); err != nil {
			return pr, usageError{err}
		}
	default:
		return pr, usagef("--mu (or --epsilon and --delta) is required: the privacy budget of this release")
	}
	if c.n < 1 {
		return pr, usagef("--n (the public number of rows the release is planned for) is required and must be >= 1, got %d; it is never compared with the data", c.n)
	}
	p := avgmix.Params{T: c.n, Mu: mu, Sampling: c.sampling,
		Calibrate: func(q float64, steps int) (float64, error) {
			return accountant.CalibrateSubsampledSigma(q, steps, pr.eps, pr.delta)
		}}
	if c.T < 0 {
		return pr, usagef("--T (rows to release) must be >= 1, got %d", c.T)
	}
	if c.T > 0 {
		p.T = c.T
	}
	if c.m < 0 {
		return pr, usagef("--m (mixup degree) must be >= 1, got %d", c.m)
	}
	p.M = c.m
	for _, f := range []struct {
		name string
		v    float64
		dst  *float64
	}{{"lambda", c.lambda, &p.Lambda}, {"cx", c.cx, &p.Cx}, {"cy", c.cy, &p.Cy}, {"p", c.p, &p.P}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return pr, usagef("--%s must be positive and finite, got %v", f.name, f.v)
		}
		*f.dst = f.v
	}
	pl, err := avgmix.NewPlan(release.NewNoise(), c.n, d, k, p)
	if err != nil {
		return pr, usageError{err}
	}
	rec := mechanism.Avgmix{Into: c.into, N: c.n, NSource: mechanism.NAsserted, TargetEpsilon: pr.eps, TargetDelta: pr.delta}
	if pr.quote, err = pl.Quote(nil, rec, st.Delta, accountant.Price); err != nil {
		return pr, err
	}
	// The calibration certified the charged mechanism; confirm it on the
	// quote, as dp_avgmix does.
	epsPlan := pr.quote.Epsilon
	if pr.delta != pr.quote.Delta {
		if epsPlan, err = accountant.Price(pr.quote.Mechanism, pr.delta); err != nil {
			return pr, err
		}
	}
	if epsPlan > pr.eps {
		return pr, fmt.Errorf("internal error: the calibrated release costs epsilon %g, above its target %g", epsPlan, pr.eps)
	}
	pr.plan = pl
	return pr, nil
}

// openDB opens the database file for the driver's own reads (the release
// table's name is free); every write goes through the ledger.
func openDB(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", "30000")
	q.Set("_foreign_keys", "1")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// avgmix validates, plans, charges, runs and imports; see the package doc.
func (m *Main) avgmix(ctx context.Context, c *avgmixConfig) (avgmixSummary, error) {
	start := time.Now()
	var sum avgmixSummary
	if c.db == "" {
		return sum, usagef("--db (the dpsql database file with the ledger) is required")
	}
	if _, err := os.Stat(c.db); err != nil {
		return sum, usagef("--db: %v (create it with `dpsql init FILE --mu 1`)", err)
	}
	if err := checkInto(c.into); err != nil {
		return sum, err
	}
	if c.parts < 1 || c.combineMB < 1 {
		return sum, usagef("--staging-parts and --combine-mb must be >= 1")
	}
	if err := c.source(); err != nil {
		return sum, err
	}
	d, k, err := c.src.Check(ctx)
	if err != nil {
		return sum, usageError{err}
	}
	l, err := ledger.OpenLedger(c.db)
	if err != nil {
		return sum, err
	}
	st, err := l.Remaining(ctx, c.scope)
	if err != nil {
		return sum, err
	}
	db, err := openDB(c.db)
	if err != nil {
		return sum, err
	}
	defer db.Close()
	if exists, err := tableExists(ctx, db, c.into); err != nil {
		return sum, err
	} else if exists {
		return sum, usagef("table %q already exists; releases never overwrite, choose another --into", c.into)
	}
	pr, err := planAvgmix(c, st, d, k)
	if err != nil {
		return sum, err
	}
	job := newJobID()
	runner := *runners.Runner
	if runner == "" {
		runner = "prism"
	}
	run := mechanism.BeamRun{Engine: "beam", Job: job, Runner: runner}

	// The pipeline is built, from public parameters only, before anything
	// is charged: a construction error costs nothing.
	// Each job stages into a directory of its own, so that no other job's
	// files can be imported with it.
	staging, cleanup, err := jobStaging(ctx, c.db, c.staging, job)
	if err != nil {
		return sum, err
	}
	defer cleanup()
	p := beam.NewPipeline()
	if err := pipeline.Avgmix(p.Root(), pr.plan, c.src, pipeline.AvgmixOptions{Staging: staging, Parts: c.parts, CombineBytes: c.combineMB << 20}); err != nil {
		return sum, err
	}

	// Charge before the run: the charge (its params name the job) commits
	// before any worker reads a row.
	rec, err := l.Charge(ctx, ledger.Charge{Scope: c.scope, Quote: &pr.quote, Details: run, Query: c.command}, nil)
	if err != nil {
		return sum, err
	}
	// From here on the budget is spent: every failure is recorded as the
	// job's outcome and releases nothing.
	fail := func(err error) (avgmixSummary, error) {
		if rerr := recordFailure(ctx, l, c.scope, job, c.command, rec.ID, c.into, err); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return sum, fmt.Errorf("%w; the budget was spent (ledger entry %d) and nothing was released", err, rec.ID)
	}
	if m.beforeRun != nil {
		if err := m.beforeRun(job); err != nil {
			return fail(err)
		}
	}
	runStart := time.Now()
	if err := beamx.Run(ctx, p); err != nil {
		return fail(fmt.Errorf("the pipeline failed: %w", err))
	}
	pipeSecs := time.Since(runStart).Seconds()
	out := Outcome{Status: statusReleased, Charge: rec.ID, Into: c.into, Rows: pr.plan.T}
	if err := appendOutcome(ctx, l, c.scope, job, c.command, out, func(tx *sql.Tx) error {
		return importAvgmix(ctx, tx, staging, c.into, pr.plan)
	}); err != nil {
		return fail(err)
	}
	// The summary is built from the quote that was charged: its record
	// (mechanism.Avgmix) and the charged subsampled Gaussian.
	q := pr.quote
	r, _ := q.Params.(mechanism.Avgmix)
	epsRig := q.Epsilon
	if math.IsInf(epsRig, 0) {
		epsRig = -1
	}
	return avgmixSummary{
		Into: r.Into, Rows: r.T, N: r.N, D: r.D, K: r.K, M: r.M, Q: q.Mechanism.Q, Steps: q.Mechanism.Steps, Sampling: r.Sampling,
		Sigma: q.Mechanism.Sigma, SigmaX: r.SigmaX, SigmaY: r.SigmaY, MuCLT: r.MuCLT, EpsilonRigorous: epsRig, Delta: q.Delta,
		LedgerID: rec.ID, Scope: rec.Scope, ScopeEpsilonSpent: rec.Epsilon, Job: job, Runner: runner,
		Seconds: time.Since(start).Seconds(), PipelineSeconds: pipeSecs,
	}, nil
}

func tableExists(ctx context.Context, db *sql.DB, name string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE lower(name) = lower(?)`, name).Scan(&n)
	return n > 0, err
}

// importAvgmix creates the release table and fills it from the staged
// output, in tx (the transaction that appends the job's "released" record):
// a partial or malformed output rolls back and releases nothing.
func importAvgmix(ctx context.Context, tx *sql.Tx, staging, into string, plan *avgmix.Plan) error {
	q := `"` + into + `"`
	if _, err := tx.ExecContext(ctx, `CREATE TABLE `+q+` (id INTEGER PRIMARY KEY, x BLOB NOT NULL, y BLOB NOT NULL)`); err != nil {
		return fmt.Errorf("creating %s: %w", into, err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO `+q+` (id, x, y) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	var xb, yb []byte
	err = pipeline.ReadAvgmix(ctx, staging, plan, func(t int, x, y []float32) error {
		xb, yb = vector.AppendEncoded(xb[:0], x), vector.AppendEncoded(yb[:0], y)
		if _, err := ins.ExecContext(ctx, t+1, xb, yb); err != nil {
			return fmt.Errorf("writing row %d of %s: %w", t+1, into, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("importing the release: %w", err)
	}
	return nil
}
