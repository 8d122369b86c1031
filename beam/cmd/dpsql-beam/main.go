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
	if isBootArgs(os.Args[1:]) {
		// Started by a runner's PROCESS environment or a worker pool.
		err := boot(os.Args[1:], os.Stderr)
		fmt.Fprintf(os.Stderr, "dpsql-beam: starting a worker: %v\n", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-") {
		// Started by a runner as a worker: Beam's flags only.
		flag.Parse()
		beam.Init()
		fmt.Fprintln(os.Stderr, "dpsql-beam: give a command (avgmix or aggregate); run dpsql-beam help")
		os.Exit(2)
	}
	self, _ := os.Executable()
	os.Exit((&Main{Stdout: os.Stdout, Stderr: os.Stderr, self: self}).Run(context.Background(), os.Args[1:]))
}

const usage = `dpsql-beam runs dpsql releases as Apache Beam pipelines, charged to a dpsql ledger.

Commands:
  avgmix    NeuroMixGDP (dp_avgmix) over npy, CSV or SQLite-table shards
  aggregate a protected-mode DP GROUP BY (SELECT WITH DIFFERENTIAL_PRIVACY) over
            a protected table of the database, with its policy and charge
  help      this text

Run "dpsql-beam avgmix -h" (or aggregate -h) for its options. Beam's own flags (--runner,
--endpoint, --environment_type, ...) are accepted after the command.
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
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return 0
	}
	fmt.Fprintf(m.Stderr, "dpsql-beam: unknown command %q\n%s", args[0], usage)
	return 2
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
