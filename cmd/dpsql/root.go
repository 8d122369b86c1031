package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/dpsql/dpsql/version"

	"github.com/dpsql/dpsql/ledger"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/dpsql/dpsql/ext"
)

// Main is the dpsql program. Its fields are what a test replaces; Run executes
// one command line in-process.
//
// Configuration is described once, in configHelp (shown by "dpsql help").
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// HandleSignals makes an interrupt (Ctrl-C) cancel the running command;
	// in the interactive shell it cancels only the running statement.
	HandleSignals bool

	// Progress, when set, is told when each SQL statement starts and returns
	// the task to update and stop. When nil, statements running longer than a
	// second show a spinner on Stderr if Stderr is a terminal.
	Progress func(label string) Task

	configFile  string
	v           *viper.Viper
	stopSignals []context.CancelFunc
}

// NewMain returns a Main on the process's standard streams.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// Exec runs args, prints any error as "dpsql: <message>" on Stderr and returns
// the exit status: 0 on success, 2 for a usage mistake, 1 for any other error.
func (m *Main) Exec(ctx context.Context, args []string) int {
	err := m.Run(ctx, args)
	if err == nil {
		return 0
	}
	// cobra reports an unknown command as a plain error.
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command ") {
		msg, more, _ := strings.Cut(msg, "\n")
		msg = strings.TrimSuffix(msg, ` for "dpsql"`)
		if _, sugg, ok := strings.Cut(more, "Did you mean this?"); ok {
			msg += "; did you mean " + strings.Join(strings.Fields(sugg), " or ") + "?"
		}
		err = usagef("%s (run 'dpsql help' for the list of commands)", msg)
	}
	m.PrintError(err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// PrintError prints err as "dpsql: <message>" on Stderr.
func (m *Main) PrintError(err error) {
	fmt.Fprintf(m.Stderr, "dpsql: %s\n", trimPrefix(err.Error()))
}

// trimPrefix drops a "dpsql: " that a library already put in front.
func trimPrefix(s string) string { return strings.TrimPrefix(s, "dpsql: ") }

// Run executes one command line, for example {"query", "a.db", "SELECT 1"}.
func (m *Main) Run(ctx context.Context, args []string) error {
	root := m.newRoot()
	root.SetArgs(args)
	root.SetIn(m.Stdin)
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	mark := len(m.stopSignals) // a nested Run (demo) releases only its own
	// A file switched to WAL mode for its first charge, or whose ledger a
	// write upgraded, is said on this command's standard error.
	prevNotice, prevUpgrade := ledger.WALNotice, ledger.UpgradeNotice
	ledger.WALNotice = func(msg string) { fmt.Fprintf(m.Stderr, "dpsql: %s\n", msg) }
	ledger.UpgradeNotice = ledger.WALNotice
	defer func() {
		ledger.WALNotice, ledger.UpgradeNotice = prevNotice, prevUpgrade
		for _, stop := range m.stopSignals[mark:] {
			stop()
		}
		m.stopSignals = m.stopSignals[:mark]
	}()
	return root.ExecuteContext(ctx)
}

func (m *Main) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "dpsql",
		Short: "Differential privacy inside SQLite",
		Long: `dpsql answers SQL queries over a SQLite file with differential privacy: DP
functions (dp_gaussian, ...) add calibrated noise, and every release is charged
to a privacy budget recorded in an append-only, hash-chained ledger inside the
same file. New here? Run "dpsql demo".

` + configHelp,
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if m.HandleSignals && cmd.Annotations["signals"] != "self" {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				m.stopSignals = append(m.stopSignals, stop)
				cmd.SetContext(ctx)
			}
			return m.configure(cmd)
		},
	}
	root.PersistentFlags().StringVar(&m.configFile, "config", "", "config file (default: $DPSQL_CONFIG, else ./dpsql.yaml, else $XDG_CONFIG_HOME/dpsql/config.yaml)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see 'dpsql help %s')", flagError(err), strings.TrimPrefix(c.CommandPath(), "dpsql "))
	})
	root.AddCommand(m.newProtectCmd(), m.newUnprotectCmd())
	root.AddCommand(m.newInitCmd(), m.withRemote(m.newQueryCmd(), false), m.newBudgetCmd(), m.newAuditCmd(),
		m.withRemote(m.newShellCmd(), true), m.newDemoCmd(), m.newImportCmd(), m.newExportCmd(), m.newVersionCmd())
	root.AddCommand(m.newServeCmd(), m.newAnalystCmd(), m.newExplainCmd())
	return root
}

// configHelp documents the configuration; it closes "dpsql help".
const configHelp = `Configuration:
  format, scope and history (the flags marked "config:" in a command's help)
  come, in increasing precedence, from the flag's default, a YAML config file,
  the environment variables DPSQL_FORMAT, DPSQL_SCOPE and DPSQL_HISTORY, and the
  command-line flag. The config file is --config FILE, else $DPSQL_CONFIG, else
  ./dpsql.yaml, else $XDG_CONFIG_HOME/dpsql/config.yaml (the first that exists).
  A key the config file does not know is an error. Budgets (--mu, --epsilon,
  --delta) come only from the command line: no file or variable sets a budget.`

// configKeys are the settings a config file may hold.
var configKeys = []string{"format", "scope", "history"}

// budgetKeys are settings that only flags give; a config file holding one is
// refused with an explanation.
var budgetKeys = []string{"mu", "epsilon", "delta"}

// flagError rewords pflag's errors about a flag's value without Go's
// internals: "--mu: \"abc\" is not a number" rather than
// "invalid argument ... strconv.ParseFloat: parsing \"abc\": invalid syntax".
func flagError(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	want := "a valid value"
	switch f.Value.Type() {
	case "float64", "float32":
		want = "a number"
	case "int", "int64", "int32", "uint", "uint64":
		want = "a whole number"
	case "bool":
		want = "true or false"
	}
	return fmt.Errorf("--%s: %q is not %s", f.Name, ive.GetValue(), want)
}

func (m *Main) newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print dpsql's version",
		Args:  nargs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "dpsql version %s (%s, %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// configured marks the flags of cmd that viper may also set from the config
// file and DPSQL_* variables.
func configured(cmd *cobra.Command, names ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations["viper"] = strings.Join(names, ",")
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		f.Usage += " (config: " + n + ", $DPSQL_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_")) + ")"
	}
}

// configure builds the viper instance of this run: config file, environment
// and the command's configured flags.
func (m *Main) configure(cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix("DPSQL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	path := m.configFile
	if path == "" {
		path = os.Getenv("DPSQL_CONFIG")
	}
	if path == "" {
		path = defaultConfigFile()
	}
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("reading config file %s: %w", path, err)
		}
		if err := checkConfigKeys(path, v.AllKeys()); err != nil {
			return err
		}
	}
	if names := cmd.Annotations["viper"]; names != "" {
		for _, n := range strings.Split(names, ",") {
			if err := v.BindPFlag(n, cmd.Flags().Lookup(n)); err != nil {
				return err
			}
		}
	}
	m.v = v
	return nil
}

// checkConfigKeys refuses keys a config file cannot set.
func checkConfigKeys(path string, keys []string) error {
	for _, k := range keys {
		switch {
		case slices.Contains(configKeys, k):
		case slices.Contains(budgetKeys, k):
			return fmt.Errorf("config file %s: %q cannot be set in a config file: budgets are given only on the command line (--mu, or --epsilon and --delta)", path, k)
		default:
			return fmt.Errorf("config file %s: unknown key %q (known keys: %s)", path, k, strings.Join(configKeys, ", "))
		}
	}
	return nil
}

// defaultConfigFile returns ./dpsql.yaml or $XDG_CONFIG_HOME/dpsql/config.yaml,
// whichever exists first, or "".
func defaultConfigFile() string {
	cands := []string{"dpsql.yaml"}
	if dir, err := os.UserConfigDir(); err == nil {
		cands = append(cands, filepath.Join(dir, "dpsql", "config.yaml"))
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}

// str returns a string setting: through viper for configured flags.
func (m *Main) str(cmd *cobra.Command, name string) string {
	if m.v != nil && strings.Contains(","+cmd.Annotations["viper"]+",", ","+name+",") {
		return m.v.GetString(name)
	}
	s, _ := cmd.Flags().GetString(name)
	return s
}

// format returns the validated output format setting.
func (m *Main) format(cmd *cobra.Command) (string, error) {
	f := strings.ToLower(m.str(cmd, "format"))
	if err := checkFormat(f); err != nil {
		return "", usagef("%v", err)
	}
	return f, nil
}

// nargs checks the positional arguments, naming what is missing.
func nargs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		min := 0
		for _, n := range names {
			if !strings.HasPrefix(n, "[") {
				min++
			}
		}
		switch {
		case len(args) < min:
			return usagef("%s: missing %s (usage: %s)", strings.TrimPrefix(cmd.CommandPath(), "dpsql "), strings.Join(names[len(args):min], " "), cmd.UseLine())
		case len(args) > len(names):
			return usagef("%s: too many arguments: %q (usage: %s)", strings.TrimPrefix(cmd.CommandPath(), "dpsql "), args[len(names):], cmd.UseLine())
		}
		return nil
	}
}

// openReadOnly opens the existing database file at path for reading only
// (budget, audit, export): nothing is created or written and the journal mode
// is left alone, so that an auditor can read a file, in a directory, that
// they cannot write. immutable (the --immutable flag) reads a WAL-mode file
// whose -shm file is missing without any locking.
func openReadOnly(ctx context.Context, path string, immutable bool) (*sql.DB, error) {
	if path == "" {
		return nil, usagef("the database path is empty")
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a database file", path)
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("no database file at %s (create one with `dpsql init %s --mu 1`)", path, path)
	case err != nil:
		return nil, err
	}
	db, err := ext.OpenReadOnly(ctx, path, immutable)
	switch {
	case errors.Is(err, ext.ErrReadOnlyWAL):
		return nil, fmt.Errorf("%w. If no process is writing %s, add --immutable to read it as it is on disk; "+
			"otherwise copy %s and its -wal file, if any, into a directory you can write and run the command on the copy", err, path, path)
	case errors.Is(err, ext.ErrUncheckpointedWAL):
		return nil, fmt.Errorf("%w. Copy %s and %s-wal into a directory you can write and run the command on the copy, without --immutable, "+
			"or have the file's owner checkpoint it: sqlite3 %s 'PRAGMA wal_checkpoint(TRUNCATE)'", err, path, path, path)
	}
	return db, err
}

// immutableFlag adds --immutable, read by openReadOnly, to a read-only command.
func immutableFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "immutable", false, "read the file as it is on disk, without locks (only when no process is writing it: a WAL file whose -shm is missing in a directory you cannot write)")
}

// openDB opens the database file at path with every dpsql SQL function; the
// connections charge scope ("" = the default scope). Unless create is set the
// file must exist, so that a mistyped path does not silently create an empty
// database.
func openDB(ctx context.Context, path, scope string, create bool) (*sql.DB, error) {
	if path == "" {
		return nil, usagef("the database path is empty")
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a database file", path)
	case errors.Is(err, os.ErrNotExist) && !create:
		return nil, fmt.Errorf("no database file at %s (create one with `dpsql init %s --mu 1`)", path, path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	db, err := ext.OpenScope(ctx, path, scope)
	if errors.Is(err, ledger.ErrUnknownScope) {
		return nil, fmt.Errorf("%s has no budget scope %q (create it with `dpsql init %s --scope %s --mu 1`)", path, scope, path, scope)
	}
	return db, err
}
