// Command dpsql-beam runs dpsql's releases as Apache Beam pipelines, for
// tables that outgrow one machine, charged to the ledger of a dpsql database
// file exactly as the SQL functions charge it.
//
//	dpsql-beam avgmix --db FILE --into TABLE --mu MU --n N [input] [options] [Beam flags]
//	dpsql-beam aggregate --db FILE --into TABLE --query 'SELECT WITH DIFFERENTIAL_PRIVACY ...' [options] [Beam flags]
//
// The driver plans the release from public parameters only (the asserted n,
// T, m, the budget), charges it to the ledger in FILE before the pipeline
// runs, runs it (on the in-process prism runner by default, or on Flink,
// Spark or Dataflow with Beam's --runner and --endpoint flags), and imports
// the noisy rows into the release table. A failed job has still spent its
// budget and releases nothing; either way the job's outcome is appended to the
// ledger as a record (kind "outcome", see outcome.go). See docs/beam.md.
//
// When a runner starts this binary as a Beam worker (--worker), it serves
// the pipeline's DoFns instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
)

// Main is the command; Run executes one invocation.
type Main struct {
	Stdout, Stderr io.Writer

	// beforeRun, when set, is called after the charge has committed and
	// before the pipeline runs (a test hook).
	beforeRun func(job string) error

	// self is the running dpsql-beam binary, the default worker binary a
	// portable runner's workers run (main sets it; tests leave it empty).
	self string
}

func main() {
	args := os.Args[1:]
	switch {
	case isBootArgs(args):
		// Started by a runner's PROCESS environment or a worker pool.
		err := boot(args, os.Stderr)
		fmt.Fprintf(os.Stderr, "dpsql-beam: starting a worker: %v\n", err)
		os.Exit(1)
	case isWorkerArgs(args):
		// Started as Beam's worker: Beam's flags only; beam.Init serves the
		// DoFns and does not return.
		flag.Parse()
		beam.Init()
		fmt.Fprintln(os.Stderr, "dpsql-beam: --worker needs --id, --control_endpoint and --logging_endpoint (a runner gives them)")
		os.Exit(2)
	}
	self, _ := os.Executable()
	os.Exit((&Main{Stdout: os.Stdout, Stderr: os.Stderr, self: self}).Run(context.Background(), args))
}

// isWorkerArgs reports whether args start Beam's worker (--worker).
func isWorkerArgs(args []string) bool {
	for _, a := range args {
		if name, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == "worker" && strings.HasPrefix(a, "-") && v != "false" {
			return true
		}
	}
	return false
}

const usage = `dpsql-beam runs dpsql releases as Apache Beam pipelines, charged to a dpsql ledger.

Usage:
  dpsql-beam avgmix --db FILE --into TABLE --mu MU --n N --classes K
                    (--npy X0.npy,... --labels Y0.npy,... | --csv A.csv,... | --table T) [options] [Beam flags]
  dpsql-beam aggregate --db FILE --into TABLE --query 'SELECT WITH DIFFERENTIAL_PRIVACY ...'
                    [--csv A.csv,... | --parquet A.parquet,...] [options] [Beam flags]
  dpsql-beam worker-pool [--listen HOST:PORT]
  dpsql-beam help [avgmix | aggregate | worker-pool | beam]

Commands:
  avgmix       NeuroMixGDP (dp_avgmix) over npy, CSV or SQLite-table shards
  aggregate    protected mode's DP GROUP BY (SELECT WITH DIFFERENTIAL_PRIVACY) over a protected
               table of --db, with its policy and charge; rows from CSV or Parquet shards, or the table
  worker-pool  serve worker processes to a portable runner (--environment_type=EXTERNAL)
  help         this text; "help beam" lists every Beam flag

Where the pipeline runs (Beam's flags, after the command's options):
  (no flag)                     prism, inside this process
  --runner=universal --endpoint=HOST:PORT
                                a portable job server (prism's own binary, Flink's or Spark's job server),
  --environment_type=PROCESS --environment_config='{"command":"/path/to/dpsql-beam"}'
                                whose workers run this binary as processes of their own,
  --environment_type=EXTERNAL --environment_config=HOST:PORT
                                or ask a dpsql-beam worker-pool for them
  --environment_type=LOOPBACK   or run inside this process (a trial)
Shards and --staging must be paths every worker can reach; the database file stays with the driver.
`

// Run executes args and returns the exit status: 0 on success, 1 when the
// release failed, 2 for a usage error.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "avgmix":
		return m.runAvgmix(ctx, args[1:])
	case "aggregate":
		return m.runAggregate(ctx, args[1:])
	case "worker-pool":
		return m.runWorkerPool(ctx, args[1:])
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" {
			switch args[1] {
			case "avgmix", "aggregate", "worker-pool":
				return m.Run(ctx, []string{args[1], "-h"})
			case "beam":
				fmt.Fprintln(m.Stdout, "Beam's flags, accepted after avgmix's and aggregate's options:")
				flag.CommandLine.SetOutput(m.Stdout)
				flag.CommandLine.PrintDefaults()
				return 0
			}
		}
		fmt.Fprint(m.Stdout, usage)
		return 0
	}
	fmt.Fprintf(m.Stderr, "dpsql-beam: unknown command %q\n%s", args[0], usage)
	return 2
}

// mainBeamFlags are the Beam flags a command's help lists: the ones that say
// where the pipeline runs.
var mainBeamFlags = []string{"runner", "endpoint", "environment_type", "environment_config", "worker_binary", "job_name", "parallelism"}

// commandUsage sets fs's help: synopsis, fs's own flags, then the main Beam
// flags (all of them: dpsql-beam help beam). Call it before beamFlags.
func commandUsage(fs *flag.FlagSet, out io.Writer, synopsis string) {
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) { own.Var(f.Value, f.Name, f.Usage) })
	own.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s\n\nOptions:\n", synopsis)
		own.PrintDefaults()
		beam := flag.NewFlagSet("beam", flag.ContinueOnError)
		for _, name := range mainBeamFlags {
			if f := flag.CommandLine.Lookup(name); f != nil {
				beam.Var(f.Value, f.Name, f.Usage)
			}
		}
		beam.SetOutput(out)
		fmt.Fprintf(out, "\nWhere it runs (Beam's flags; every Beam flag: dpsql-beam help beam):\n")
		beam.PrintDefaults()
	}
}

// beamFlags adds Beam's own flags (registered on the standard command line by
// the SDK and its runners) to fs, so that --runner, --endpoint and the
// others work after the command. Names fs already defines are dpsql-beam's.
func beamFlags(fs *flag.FlagSet) {
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil && !strings.HasPrefix(f.Name, "test.") {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
}

// checkRunner refuses, before anything is charged, a portable runner
// without the job server's address (the SDK would say so only when the job
// is submitted, after the charge).
func checkRunner() error {
	switch strings.ToLower(*runners.Runner) {
	case "universal", "portable", "portablerunner":
		if *jobopts.Endpoint == "" {
			return usagef("--runner=%s needs --endpoint=HOST:PORT, the job server's address", *runners.Runner)
		}
	}
	return nil
}

// defaultWorkerBinary makes the running binary the workers' binary when the
// runner starts workers of its own (not prism in-process, not LOOPBACK) and
// --worker_binary is not given. Left alone, the Go SDK would compile the
// driver's source again, without cgo, which SQLite's driver needs.
func (m *Main) defaultWorkerBinary() {
	switch strings.ToLower(*runners.Runner) {
	case "", "direct", "prism":
		return
	}
	if *jobopts.WorkerBinary == "" && !jobopts.IsLoopback() && m.self != "" {
		*jobopts.WorkerBinary = m.self
	}
}

// initBeam runs Beam's initialisation hooks once, after the flags are parsed.
func initBeam() {
	if !beam.Initialized() {
		beam.Init()
	}
}
