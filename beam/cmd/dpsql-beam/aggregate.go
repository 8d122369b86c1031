package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/ledger"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/dpsql/dpsql/beam/pipeline"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// aggregateConfig holds the aggregate command's options.
type aggregateConfig struct {
	db, scope, into, query, staging string
	parts, stagingParts             int
	command                         string
}

// aggregateSummary is what a successful aggregate run prints, as JSON.
type aggregateSummary struct {
	Into            string   `json:"into"`
	Columns         []string `json:"columns"`
	Rows            int      `json:"rows"`
	LedgerID        int64    `json:"ledger_id"`
	Scope           string   `json:"scope"`
	Mechanism       string   `json:"mechanism"`
	Mu              float64  `json:"mu"`
	Job             string   `json:"job"`
	Runner          string   `json:"runner"`
	Seconds         float64  `json:"seconds"`
	PipelineSeconds float64  `json:"pipeline_seconds"`
}

func (m *Main) runAggregate(ctx context.Context, args []string) int {
	var c aggregateConfig
	fs := flag.NewFlagSet("dpsql-beam aggregate", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&c.db, "db", "", "the dpsql database file: the protected table, its policy, the ledger (and the release table)")
	fs.StringVar(&c.scope, "scope", accountant.DefaultScope, "the budget scope to charge")
	fs.StringVar(&c.into, "into", "", "the new release table")
	fs.StringVar(&c.query, "query", "", "the SELECT WITH DIFFERENTIAL_PRIVACY statement over a protected table of --db")
	fs.IntVar(&c.parts, "table-parts", 4, "read the table as this many shards (by rowid)")
	fs.StringVar(&c.staging, "staging", "", "directory under which each job stages its released rows (default a temporary directory beside --db)")
	fs.IntVar(&c.stagingParts, "staging-parts", 4, "number of staging files")
	return m.runCommand(fs, args, "give the statement with --query", func(command string) (any, error) {
		c.command = command
		return m.aggregate(ctx, &c)
	})
}

// aggregate checks, plans, charges, runs and imports one DP statement: the
// same plan and charge as protected mode's SQL (protect.PlanStatement), the
// rows read, bounded, summed and noised by the pipeline.
func (m *Main) aggregate(ctx context.Context, c *aggregateConfig) (aggregateSummary, error) {
	start := time.Now()
	var sum aggregateSummary
	if c.db == "" {
		return sum, usagef("--db (the dpsql database file with the protected table and the ledger) is required")
	}
	if _, err := os.Stat(c.db); err != nil {
		return sum, usagef("--db: %v", err)
	}
	if err := checkInto(c.into); err != nil {
		return sum, err
	}
	if c.query == "" || !dpselect.IsDP(c.query) {
		return sum, usagef("--query must be a SELECT WITH DIFFERENTIAL_PRIVACY statement over a protected table of --db")
	}
	if c.parts < 1 || c.stagingParts < 1 {
		return sum, usagef("--table-parts and --staging-parts must be >= 1")
	}
	st, err := protect.PlanStatement(ctx, c.db, c.scope, c.query)
	if err != nil {
		return sum, err // a refusal says what is allowed; nothing was read or charged
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
	// The workers' query must prepare (a table without rowid cannot be
	// sharded): checked before anything is charged.
	if ps, err := db.PrepareContext(ctx, st.RowSQL(c.parts, 0)); err != nil {
		return sum, fmt.Errorf("the protected table cannot be read in shards: %w", err)
	} else {
		ps.Close()
	}
	job := newJobID()
	runner := *runners.Runner
	if runner == "" {
		runner = "prism"
	}
	staging, cleanup, err := jobStaging(ctx, c.db, c.staging, job)
	if err != nil {
		return sum, err
	}
	defer cleanup()
	p := beam.NewPipeline()
	if err := pipeline.Aggregate(p.Root(), st, pipeline.AggregateOptions{DB: c.db, Parts: c.parts, Staging: staging, StagingParts: c.stagingParts}); err != nil {
		return sum, err
	}
	l, err := ledger.OpenLedger(c.db)
	if err != nil {
		return sum, err
	}
	details := mechanism.BeamAggregate{Protected: st.Details(), BeamRun: mechanism.BeamRun{Engine: "beam", Job: job, Runner: runner}}
	rec, err := l.Charge(ctx, ledger.Charge{Scope: c.scope, Mechanism: st.Mechanism(), Details: details, Query: c.query}, nil)
	if err != nil {
		return sum, err
	}
	fail := func(err error) (aggregateSummary, error) {
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
	cols := st.Columns()
	rows, err := pipeline.ReadAggregate(ctx, staging, len(cols))
	if err != nil {
		return fail(err)
	}
	rows = st.Order(rows)
	out := Outcome{Status: statusReleased, Charge: rec.ID, Into: c.into, Rows: len(rows)}
	if err := appendOutcome(ctx, l, c.scope, job, c.command, out, func(tx *sql.Tx) error {
		return importRows(ctx, tx, c.into, cols, rows)
	}); err != nil {
		return fail(err)
	}
	mech := st.Mechanism()
	return aggregateSummary{Into: c.into, Columns: cols, Rows: len(rows), LedgerID: rec.ID, Scope: rec.Scope, Mechanism: mech.Kind,
		Mu: rec.Mu, Job: job, Runner: runner, Seconds: time.Since(start).Seconds(), PipelineSeconds: pipeSecs}, nil
}

// importRows creates the release table (one column per output, named as the
// statement names them, with an id in release order) and fills it, in tx.
func importRows(ctx context.Context, tx *sql.Tx, into string, cols []string, rows [][]any) error {
	q := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		q[i], marks[i] = dpselect.QuoteIdent(c), "?"
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE `+dpselect.QuoteIdent(into)+` (id INTEGER PRIMARY KEY, `+strings.Join(q, ", ")+`)`); err != nil {
		return fmt.Errorf("creating %s: %w", into, err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO `+dpselect.QuoteIdent(into)+` VALUES (?, `+strings.Join(marks, ", ")+`)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for i, r := range rows {
		if _, err := ins.ExecContext(ctx, append([]any{i + 1}, r...)...); err != nil {
			return fmt.Errorf("writing row %d of %s: %w", i+1, into, err)
		}
	}
	return nil
}

// checkInto checks the release table's name.
func checkInto(into string) error {
	if into == "" || !identRE.MatchString(into) {
		return usagef("--into %q: give the new release table a plain name (letters, digits and _; not starting with a digit)", into)
	}
	if low := strings.ToLower(into); strings.HasPrefix(low, "dp_") || strings.HasPrefix(low, "sqlite_") {
		return usagef("--into %q: names starting with dp_ or sqlite_ are reserved", into)
	}
	return nil
}

// jobStaging returns the job's own staging directory (so no other job's
// files can be imported with it) and a function that removes it.
func jobStaging(ctx context.Context, db, under, job string) (string, func(), error) {
	if under == "" {
		dir, err := os.MkdirTemp(filepath.Dir(db), ".dpsql-beam-"+job+"-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	dir := strings.TrimRight(under, "/") + "/dpsql-beam-" + job
	return dir, func() {
		pipeline.RemoveStaging(context.WithoutCancel(ctx), dir)
		if !strings.Contains(dir, "://") {
			os.Remove(dir)
		}
	}, nil
}
