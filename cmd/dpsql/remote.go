package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"

	"github.com/chzyer/readline"
	"github.com/dpsql/dpsql/serve"
	"github.com/spf13/cobra"
)

// tokenEnv is the environment variable that holds an analyst's token when
// --token-file is not given.
const tokenEnv = "DPSQL_TOKEN"

// withRemote gives the query and shell commands the flags --remote URL and
// --token-file FILE: with --remote they talk to an analyst service (dpsql
// serve) instead of opening a file, and take no DB argument.
func (m *Main) withRemote(cmd *cobra.Command, shell bool) *cobra.Command {
	cmd.Flags().String("remote", "", "URL of an analyst service (dpsql serve) to send the statements to, instead of DB")
	cmd.Flags().String("token-file", "", "file holding the account's token for --remote (default: $"+tokenEnv+")")
	localArgs, localRun := cmd.Args, cmd.RunE
	cmd.Long += "\n\nWith --remote URL the statements go to an analyst service (dpsql serve) instead\nof a file, and DB is left out; the token comes from --token-file FILE, else\nfrom $" + tokenEnv + ". Plain http is allowed only to loopback."
	if shell {
		cmd.Example += "\n  dpsql shell --remote http://127.0.0.1:8642 --token-file alice.token"
	} else {
		cmd.Example += "\n  dpsql query --remote http://127.0.0.1:8642 --token-file alice.token \"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) COUNT(*) FROM patients\""
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if remote, _ := c.Flags().GetString("remote"); remote == "" {
			return localArgs(c, args)
		}
		if shell {
			return nargs()(c, args)
		}
		return nargs("[SQL]")(c, args)
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		remote, _ := c.Flags().GetString("remote")
		if remote == "" {
			if f, _ := c.Flags().GetString("token-file"); f != "" {
				return usagef("--token-file goes with --remote URL")
			}
			return localRun(c, args)
		}
		for _, f := range []string{"analyst", "scope"} {
			if c.Flags().Changed(f) {
				return usagef("--%s does not go with --remote: a remote account's scope is fixed by its token", f)
			}
		}
		cl, err := remoteClient(c, remote)
		if err != nil {
			return err
		}
		format, err := m.format(c)
		if err != nil {
			return err
		}
		if shell {
			return m.remoteShell(c, cl, format)
		}
		text := "-"
		if len(args) == 1 {
			text = args[0]
		}
		if text == "-" {
			b, err := io.ReadAll(c.InOrStdin())
			if err != nil {
				return fmt.Errorf("reading SQL from standard input: %w", err)
			}
			text = string(b)
		}
		return remoteExec(c.Context(), cl, text, newPrinter(c.OutOrStdout(), format), nil)
	}
	return cmd
}

// remoteClient builds the client of --remote: the token from --token-file or
// $DPSQL_TOKEN; plain http only to loopback (a token sent in clear beyond
// this machine could be read on the way).
func remoteClient(c *cobra.Command, remote string) (*serve.Client, error) {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--remote %q: give the service's URL, e.g. http://127.0.0.1:8642", remote)
	}
	if u.Scheme == "http" {
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, usagef("--remote %s: plain http is allowed only to loopback; use https (the token would cross the network in clear)", remote)
		}
	}
	var tok string
	if f, _ := c.Flags().GetString("token-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading the token: %w", err)
		}
		if st, err := os.Stat(f); err == nil && st.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(c.ErrOrStderr(), "dpsql: warning: the token file %s is readable by other users (mode %v): chmod 600 %s\n", f, st.Mode().Perm(), f)
		}
		tok = strings.TrimSpace(string(b))
	} else {
		tok = strings.TrimSpace(os.Getenv(tokenEnv))
	}
	if tok == "" {
		return nil, usagef("--remote needs a token: --token-file FILE, or the environment variable %s", tokenEnv)
	}
	return &serve.Client{URL: remote, Token: tok}, nil
}

// remoteExec sends each statement of text in turn and prints the rows; it
// stops at the first error. charged, when set, is told each charge.
func remoteExec(ctx context.Context, cl *serve.Client, text string, p *printer, charged func(*serve.Charge)) error {
	stmts, rest := splitSQL(text)
	if rest != "" && !onlyComment(rest) {
		stmts = append(stmts, rest)
	}
	if len(stmts) == 0 {
		return usagef("no SQL statement given")
	}
	for i, st := range stmts {
		res, err := cl.Query(ctx, strings.TrimSpace(st))
		if err == nil {
			err = p.Print(res.Columns, res.Rows)
			if res.Charge != nil && charged != nil {
				charged(res.Charge)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				err = errors.New("statement interrupted (a DP statement the service had accepted keeps its charge: see .audit)")
			}
			if len(stmts) > 1 {
				return fmt.Errorf("statement %d (%s): %w", i+1, abbreviate(st, 60), err)
			}
			return err
		}
	}
	return nil
}

const remoteShellHelp = `SQL statements end with ";" and may span several lines; each runs on the service.
.audit                the ledger entries of your scope
.budget               your scope's budget
.format [FORMAT]      show or set the output format: table, csv, json
.help                 this help
.quit                 leave (also .exit, Ctrl-D)
.tables               what you may query: protected tables and their policies, public tables
`

// remoteShell is the shell of --remote: the same line handling as the local
// shell, the statements sent to the service.
func (m *Main) remoteShell(c *cobra.Command, cl *serve.Client, format string) error {
	ctx := c.Context()
	out, errw := c.OutOrStdout(), c.ErrOrStderr()
	interactive := isTerminal(c.InOrStdin())
	var lr lineReader
	if interactive {
		rl, err := readline.NewEx(&readline.Config{Prompt: promptFirst, InterruptPrompt: "^C", Stdout: out, Stderr: errw})
		if err != nil {
			return fmt.Errorf("starting the line editor: %w", err)
		}
		lr = &readlineReader{rl}
		b, err := cl.Budget(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "dpsql on %s as %s, charging scope %q (mu remaining %.4g). Statements end with \";\"; .help for commands.\n", cl.URL, b.Account, b.Scope, b.MuRemaining)
	} else {
		lr = &plainReader{r: bufio.NewReader(c.InOrStdin())}
	}
	defer lr.Close()
	failures := 0
	fail := func(err error) {
		failures++
		fmt.Fprintf(errw, "Error: %s\n", trimPrefix(err.Error()))
	}
	var buf strings.Builder
	for {
		prompt := promptFirst
		if buf.Len() > 0 {
			prompt = promptMore
		}
		line, err := lr.ReadLine(prompt)
		switch {
		case errors.Is(err, errInterrupt):
			buf.Reset()
			continue
		case errors.Is(err, io.EOF):
			if rest := strings.TrimSpace(buf.String()); rest != "" {
				fail(fmt.Errorf("incomplete SQL at the end of the input (missing \";\"?): %s", abbreviate(rest, 60)))
			}
			if !interactive && failures > 0 {
				return fmt.Errorf("%d error(s) in the input", failures)
			}
			return nil
		case err != nil:
			return err
		}
		if t := strings.TrimSpace(line); buf.Len() == 0 && strings.HasPrefix(t, ".") {
			lr.AddHistory(t)
			f := strings.Fields(t)
			p := newPrinter(out, format)
			switch f[0] {
			case ".quit", ".exit", ".q":
				return nil
			case ".help":
				fmt.Fprint(out, remoteShellHelp)
			case ".budget":
				b, err := cl.Budget(ctx)
				if err != nil {
					fail(err)
					break
				}
				if err := p.Print([]string{"account", "scope", "mu_budget", "mu_spent", "mu_remaining", "epsilon_spent", "delta", "entries"},
					[][]any{{b.Account, b.Scope, float64(b.MuBudget), float64(b.MuSpent), float64(b.MuRemaining), float64(b.EpsilonSpent), b.Delta, b.Entries}}); err != nil {
					fail(err)
				}
			case ".audit":
				l, err := cl.Ledger(ctx)
				if err != nil {
					fail(err)
					break
				}
				if err := p.Print(remoteAudit(l, format)); err != nil {
					fail(err)
				}
			case ".tables":
				l, err := cl.Tables(ctx)
				if err != nil {
					fail(err)
					break
				}
				if err := p.Print(tablesColumns, tablesRows(l)); err != nil {
					fail(err)
				}
				if l.Example != "" {
					fmt.Fprintf(out, "for example:\n%s\n", l.Example)
				}
			case ".format", ".mode":
				switch {
				case len(f) == 1:
					fmt.Fprintf(out, "output format: %s\n", format)
				case len(f) == 2 && checkFormat(strings.ToLower(f[1])) == nil:
					format = strings.ToLower(f[1])
				default:
					fail(errors.New("usage: .format table|csv|json"))
				}
			default:
				fail(fmt.Errorf("unknown command %s: .help lists the commands of a remote shell", f[0]))
			}
			continue
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		stmts, rest := splitSQL(buf.String())
		if len(stmts) == 0 {
			if rest == "" {
				buf.Reset()
			}
			continue
		}
		text := strings.Join(stmts, "\n")
		lr.AddHistory(strings.ReplaceAll(text, "\n", " "))
		buf.Reset()
		buf.WriteString(rest)
		sctx, stop := context.WithCancel(ctx)
		if interactive && m.HandleSignals {
			sctx, stop = signal.NotifyContext(ctx, os.Interrupt)
		}
		err = remoteExec(sctx, cl, text, newPrinter(out, format), func(ch *serve.Charge) {
			if interactive {
				if !math.IsInf(float64(ch.Mu), 0) {
					fmt.Fprintf(errw, "(charged mu %.4g; mu remaining %.4g)\n", ch.Mu, ch.MuRemaining)
				} else {
					fmt.Fprintf(errw, "(charged Laplace noise; the scope has spent epsilon %.4g at delta %.3g)\n", ch.Epsilon, ch.Delta)
				}
			}
		})
		stop()
		if err != nil {
			fail(err)
		}
	}
}

// remoteAudit shows GET /v1/ledger as the local .audit shows the ledger: the
// table format with each entry's cost (auditCost: epsilon and delta for
// Laplace noise, never +Inf), csv and json with its figures, mu NULL where
// it has no finite value, epsilon and delta where it has them.
func remoteAudit(l *serve.LedgerResponse, format string) ([]string, [][]any) {
	rows := make([][]any, 0, len(l.Entries))
	for _, e := range l.Entries {
		var query any = e.Query
		if e.Query == "" {
			query = nil
		}
		if format == FormatTable {
			rows = append(rows, []any{e.ID, shortTime(e.At), e.Kind, e.Mechanism, auditCost(e.Kind, e.Cost()), query})
			continue
		}
		c := e.Cost()
		var mu, eps, delta any
		if c.Finite() {
			mu = c.Mu
		}
		if e.Epsilon != nil {
			eps, delta = c.Epsilon, c.Delta
		}
		rows = append(rows, []any{e.ID, e.At, e.Kind, e.Mechanism, mu, eps, delta, query})
	}
	if format == FormatTable {
		return []string{"id", "at", "kind", "mechanism", "cost", "query"}, rows
	}
	return []string{"id", "at", "kind", "mechanism", "mu", "epsilon", "delta", "query"}, rows
}

// tablesColumns and tablesRows show GET /v1/tables one column a row.
var tablesColumns = []string{"table", "access", "column", "type", "bounds", "public_keys", "max_length"}

func tablesRows(l *serve.TablesResponse) [][]any {
	var rows [][]any
	for _, t := range l.Protected {
		access := "DP only; each row a person"
		if t.PrivacyUnit != "" {
			access = fmt.Sprintf("DP only; person = %s, max_groups %d, max_rows %d", t.PrivacyUnit, t.MaxGroups, t.MaxRows)
		}
		for _, c := range t.Columns {
			var bounds any
			if c.Bounds != nil {
				bounds = fmt.Sprintf("[%g, %g]", c.Bounds[0], c.Bounds[1])
			}
			rows = append(rows, []any{t.Table, access, c.Name, c.Type, bounds, c.PublicKeys, c.MaxLength})
		}
	}
	for _, t := range l.Public {
		for _, c := range t.Columns {
			rows = append(rows, []any{t.Table, "public", c.Name, c.Type, nil, nil, nil})
		}
	}
	return rows
}
