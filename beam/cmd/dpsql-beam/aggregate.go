package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	csvFiles, parquetFiles          string
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
	fs.StringVar(&c.csvFiles, "csv", "", "read the table's rows from these CSV shards (comma-separated; the header row names the columns) instead of --db")
	fs.StringVar(&c.parquetFiles, "parquet", "", "read the table's rows from these Parquet shards (comma-separated; flat columns named as the table's) instead of --db")
	fs.IntVar(&c.parts, "table-parts", 4, "without --csv or --parquet: read the table from --db as this many shards (by rowid)")
	fs.StringVar(&c.staging, "staging", "", "directory under which each job stages its released rows (default a temporary directory beside --db)")
	fs.IntVar(&c.stagingParts, "staging-parts", 4, "number of staging files")
	commandUsage(fs, m.Stderr, "dpsql-beam aggregate --db FILE --into TABLE --query 'SELECT WITH DIFFERENTIAL_PRIVACY ...'\n"+
		"         [--csv A.csv,... | --parquet A.parquet,...] [options] [Beam flags]")
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
	opts := pipeline.AggregateOptions{DB: absPath(c.db), Parts: c.parts, StagingParts: c.stagingParts}
	if c.csvFiles != "" && c.parquetFiles != "" {
		return sum, usagef("give --csv or --parquet, not both")
	}
	if c.csvFiles != "" || c.parquetFiles != "" {
		opts.Shards.Format, opts.Shards.Files = pipeline.ShardCSV, listFlag(c.csvFiles)
		if c.parquetFiles != "" {
			opts.Shards.Format, opts.Shards.Files = pipeline.ShardParquet, listFlag(c.parquetFiles)
		}
		if opts.Shards.Tables, err = shardTables(ctx, db, st); err != nil {
			return sum, err
		}
		// Headers, schemas and the statement's SQL over the declared
		// table are checked before anything is charged.
		if err := pipeline.CheckShards(ctx, opts.Shards, st); err != nil {
			return sum, usageError{err}
		}
	} else if ps, err := db.PrepareContext(ctx, st.RowSQL(c.parts, 0)); err != nil {
		// The workers' query must prepare (a table without rowid cannot be
		// sharded): checked before anything is charged.
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
	opts.Staging = staging
	if err := pipeline.Aggregate(p.Root(), st, opts); err != nil {
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
		dir, err := os.MkdirTemp(filepath.Dir(absPath(db)), ".dpsql-beam-"+job+"-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	dir := strings.TrimRight(absPath(under), "/") + "/dpsql-beam-" + job
	return dir, func() {
		pipeline.RemoveStaging(context.WithoutCancel(ctx), dir)
		if !strings.Contains(dir, "://") {
			os.Remove(dir)
		}
	}, nil
}

// shardTables returns the tables a worker recreates in memory to read
// shards: the statement's FROM table as the owner declared it, and each
// public key table the policy names, with the key column's declared type and
// listed values (public by the policy).
func shardTables(ctx context.Context, db *sql.DB, st *protect.Statement) ([]pipeline.MemTable, error) {
	in := st.Inputs()
	var create string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE`, in.Table).Scan(&create); err != nil {
		return nil, fmt.Errorf("reading the declaration of table %s: %w", in.Table, err)
	}
	tables := []pipeline.MemTable{{Name: in.Table, Create: create}}
	keys := map[string][]string{} // key table -> its listed columns
	var order []string
	for _, src := range in.Policy.PublicKeys {
		t, col, ok := strings.Cut(src, ".")
		if !ok {
			return nil, fmt.Errorf("the policy's public key source %q is not table.column", src)
		}
		if strings.EqualFold(t, in.Table) {
			return nil, fmt.Errorf("the policy lists public keys in the protected table %s itself; list them in a table of their own to read shards", t)
		}
		if _, seen := keys[t]; !seen {
			order = append(order, t)
		}
		if !slices.Contains(keys[t], col) {
			keys[t] = append(keys[t], col)
		}
	}
	sort.Strings(order)
	for _, t := range order {
		cols := keys[t]
		defs := make([]string, len(cols))
		q := make([]string, len(cols))
		for i, col := range cols {
			var typ string
			if err := db.QueryRowContext(ctx, `SELECT type FROM pragma_table_info(?) WHERE name = ? COLLATE NOCASE`, t, col).Scan(&typ); err != nil {
				return nil, fmt.Errorf("the public key column %s.%s: %w", t, col, err)
			}
			q[i] = dpselect.QuoteIdent(col)
			defs[i] = q[i] + " " + typ
		}
		rows, err := db.QueryContext(ctx, `SELECT `+strings.Join(q, ", ")+` FROM main.`+dpselect.QuoteIdent(t))
		if err != nil {
			return nil, fmt.Errorf("reading the public key table %s: %w", t, err)
		}
		var vals [][]any
		for rows.Next() {
			v := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range v {
				ptrs[i] = &v[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			vals = append(vals, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		enc, err := pipeline.EncodeRows(vals)
		if err != nil {
			return nil, fmt.Errorf("the public key table %s: %w", t, err)
		}
		tables = append(tables, pipeline.MemTable{Name: t, Create: `CREATE TABLE ` + dpselect.QuoteIdent(t) + ` (` + strings.Join(defs, ", ") + `)`,
			Columns: cols, Rows: enc})
	}
	return tables, nil
}
