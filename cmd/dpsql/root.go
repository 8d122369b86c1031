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
	"strings"
	"syscall"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// Main is the dpsql program. Its fields are what a test replaces; Run executes
// one command line in-process.
//
// Configuration: the settings marked "(config)" in a command's help come, in
// increasing precedence, from the flag's default, a YAML config file, DPSQL_*
// environment variables (DPSQL_FORMAT, DPSQL_SCOPE, DPSQL_HISTORY, ...) and the
// command-line flag. The config file is --config, else $DPSQL_CONFIG, else
// ./dpsql.yaml if present, else $XDG_CONFIG_HOME/dpsql/config.yaml if present.
// Budgets (--mu, --epsilon, --delta) come only from flags: a budget is never
// set by a stray file or variable.
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
	defer func() {
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
same file. New here? Run "dpsql demo".`,
		Version:       sqlfuncs.Version,
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
	root.PersistentFlags().StringVar(&m.configFile, "config", "", "config file (default ./dpsql.yaml or $XDG_CONFIG_HOME/dpsql/config.yaml)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see 'dpsql help %s')", err, c.Name())
	})
	root.AddCommand(m.newProtectCmd(), m.newUnprotectCmd())
	root.AddCommand(m.newInitCmd(), m.newQueryCmd(), m.newBudgetCmd(), m.newAuditCmd(),
		m.newShellCmd(), m.newDemoCmd(), m.newImportCmd())
	return root
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
			return usagef("%s: missing %s (usage: %s)", cmd.CommandPath(), strings.Join(names[len(args):min], " "), cmd.UseLine())
		case len(args) > len(names):
			return usagef("%s: too many arguments: %q (usage: %s)", cmd.CommandPath(), args[len(names):], cmd.UseLine())
		}
		return nil
	}
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
	return ext.OpenScope(ctx, path, scope)
}
