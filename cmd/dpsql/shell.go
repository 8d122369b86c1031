package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/version"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"
)

func (m *Main) newShellCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shell DB",
		Short: "Interactive SQL shell with DP functions",
		Long: `An interactive SQL shell on DB with every dpsql function. Statements end with
";" and may span lines; lines starting with "." are shell commands (.help lists
them). An error is printed and the shell carries on. Ctrl-C cancels the running
statement, Ctrl-D or .quit leaves. When standard input is not a terminal the
statements are read from it, without prompts, and the exit status is 1 if any
of them failed.`,
		Args:        nargs("DB"),
		Annotations: map[string]string{"signals": "self"},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := m.format(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			open := m.openSession
			if analyst, _ := cmd.Flags().GetBool("analyst"); analyst {
				open = m.openAnalystSession
			}
			s, err := open(ctx, args[0], m.str(cmd, "scope"))
			if err != nil {
				return err
			}
			defer s.Close()
			sh := &shell{m: m, s: s, out: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(), format: format}
			in := cmd.InOrStdin()
			sh.interactive = isTerminal(in)
			var lr lineReader
			if sh.interactive {
				hist := historyPath(m.str(cmd, "history"))
				if err := prepareHistory(hist); err != nil {
					fmt.Fprintf(sh.errw, "dpsql: history not kept: %v\n", err)
					hist = ""
				}
				rl, err := readline.NewEx(&readline.Config{
					Prompt:                 promptFirst,
					HistoryFile:            hist,
					DisableAutoSaveHistory: true,
					HistorySearchFold:      true,
					InterruptPrompt:        "^C",
					Stdout:                 sh.out,
					Stderr:                 sh.errw,
				})
				if err != nil {
					return fmt.Errorf("starting the line editor: %w", err)
				}
				lr = &readlineReader{rl}
			} else {
				if m.HandleSignals {
					var stop context.CancelFunc
					ctx, stop = signal.NotifyContext(ctx, os.Interrupt)
					defer stop()
				}
				lr = &plainReader{r: bufio.NewReader(in)}
			}
			defer lr.Close()
			return sh.loop(ctx, lr)
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	cmd.Flags().StringP("scope", "s", "", `budget scope DP functions charge (default "default")`)
	cmd.Flags().Bool("analyst", false, "connect as an analyst of protected mode (protected tables only through SELECT WITH DIFFERENTIAL_PRIVACY)")
	cmd.Flags().String("history", "~/.dpsql_history", `history file ("" for none)`)
	configured(cmd, "format", "scope", "history")
	return cmd
}

const (
	promptFirst = "dpsql> "
	promptMore  = "   ...> "
)

const shellHelp = `SQL statements end with ";" and may span several lines.
.audit [N]            the ledger (the last N rows)
.budget               budget status of every scope
.format [FORMAT]      show or set the output format: table, csv, json
.help                 this help
.quit                 leave (also .exit, Ctrl-D)
.schema [TABLE]       CREATE statements (of one table)
.scope [NAME]         show or set the budget scope DP functions charge
.tables               list tables and views
.verify               check the ledger's hash chain
`

// lineReader yields input lines; errInterrupt reports a Ctrl-C at the prompt.
type lineReader interface {
	ReadLine(prompt string) (string, error)
	AddHistory(entry string)
	Close() error
}

var errInterrupt = errors.New("interrupt")

type readlineReader struct{ rl *readline.Instance }

func (r *readlineReader) ReadLine(prompt string) (string, error) {
	r.rl.SetPrompt(prompt)
	line, err := r.rl.Readline()
	if errors.Is(err, readline.ErrInterrupt) {
		return line, errInterrupt
	}
	return line, err
}

func (r *readlineReader) AddHistory(e string) { _ = r.rl.SaveHistory(e) }
func (r *readlineReader) Close() error        { return r.rl.Close() }

type plainReader struct{ r *bufio.Reader }

func (p *plainReader) ReadLine(string) (string, error) {
	line, err := p.r.ReadString('\n')
	if err == io.EOF && line != "" {
		err = nil
	}
	return strings.TrimRight(line, "\r\n"), err
}

func (*plainReader) AddHistory(string) {}
func (*plainReader) Close() error      { return nil }

// prepareHistory creates the history file readable by its owner only (mode
// 0600: it holds every statement typed, literals included), and narrows the
// mode of an existing one that others could read; the line editor would
// create it with mode 0666 minus the umask. "" means no history.
func prepareHistory(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return f.Chmod(st.Mode().Perm() & 0o700)
	}
	return nil
}

// historyPath expands a leading ~ to the home directory.
func historyPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		return filepath.Join(home, p[1:])
	}
	return p
}

type shell struct {
	m           *Main
	s           *session
	out, errw   io.Writer
	format      string
	interactive bool
	failures    int
}

func (sh *shell) loop(ctx context.Context, lr lineReader) error {
	if sh.interactive {
		fmt.Fprintf(sh.out, "dpsql %s on %s, charging scope %q. Statements end with \";\"; .help for commands.\n",
			version.Version, sh.s.path, sh.scope(ctx))
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
			if buf.Len() == 0 {
				fmt.Fprintln(sh.errw, "(.quit or Ctrl-D to leave)")
			}
			buf.Reset()
			continue
		case errors.Is(err, io.EOF):
			if rest := strings.TrimSpace(buf.String()); rest != "" {
				sh.fail(fmt.Errorf("incomplete SQL at the end of the input (missing \";\"?): %s", abbreviate(rest, 60)))
			}
			return sh.result()
		case err != nil:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if buf.Len() == 0 && strings.HasPrefix(strings.TrimSpace(line), ".") {
			lr.AddHistory(strings.TrimSpace(line))
			if quit := sh.dot(ctx, strings.TrimSpace(line)); quit {
				return sh.result()
			}
			continue
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		stmts, rest := splitSQL(buf.String())
		if len(stmts) == 0 {
			if rest == "" { // only whitespace and comments
				buf.Reset()
			}
			continue
		}
		text := strings.Join(stmts, "\n")
		if !strings.Contains(text, "--") { // one history entry per input, unless a line comment needs its line end
			lr.AddHistory(strings.ReplaceAll(text, "\n", " "))
		} else {
			lr.AddHistory(text)
		}
		buf.Reset()
		buf.WriteString(rest)
		sh.exec(ctx, text)
	}
}

// exec runs complete statements; an interrupt cancels only them.
func (sh *shell) exec(ctx context.Context, text string) {
	ctx, stop := sh.statementContext(ctx)
	defer stop()
	if err := sh.s.Exec(ctx, text, newPrinter(sh.out, sh.format)); err != nil {
		sh.fail(err)
	}
}

func (sh *shell) statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !sh.interactive || !sh.m.HandleSignals {
		return context.WithCancel(ctx)
	}
	return signal.NotifyContext(ctx, os.Interrupt)
}

func (sh *shell) fail(err error) {
	sh.failures++
	fmt.Fprintf(sh.errw, "Error: %s\n", trimPrefix(err.Error()))
}

func (sh *shell) result() error {
	if !sh.interactive && sh.failures > 0 {
		return fmt.Errorf("%d error(s) in the input", sh.failures)
	}
	return nil
}

func (sh *shell) scope(ctx context.Context) string {
	var s string
	if err := sh.s.conn.QueryRowContext(ctx, `SELECT dp_scope()`).Scan(&s); err != nil {
		return "?"
	}
	return s
}

// dot runs a shell command; it reports whether the shell should end.
func (sh *shell) dot(ctx context.Context, line string) (quit bool) {
	f := strings.Fields(line)
	name, args := f[0], f[1:]
	p := newPrinter(sh.out, sh.format)
	var err error
	switch name {
	case ".quit", ".exit", ".q":
		return true
	case ".help":
		fmt.Fprint(sh.out, shellHelp)
	case ".tables":
		err = sh.tables(ctx)
	case ".schema":
		if len(args) > 1 {
			err = errors.New("usage: .schema [TABLE]")
			break
		}
		err = sh.schema(ctx, args)
	case ".budget":
		err = printBudget(ctx, sh.s.conn, p)
	case ".audit":
		n := 0
		if len(args) > 0 {
			if n, err = strconv.Atoi(args[0]); err != nil || n < 0 || len(args) > 1 {
				err = errors.New("usage: .audit [N]")
				break
			}
		}
		err = printAudit(ctx, sh.s.conn, p, "", n)
	case ".verify":
		err = verifyLedger(ctx, sh.s.conn, sh.out, nil)
	case ".scope":
		switch len(args) {
		case 0:
			fmt.Fprintf(sh.out, "DP functions charge scope %q\n", sh.scope(ctx))
		case 1:
			var s string
			if err = sh.s.conn.QueryRowContext(ctx, `SELECT dp_use_scope(?)`, args[0]).Scan(&s); err == nil {
				fmt.Fprintf(sh.out, "DP functions now charge scope %q\n", s)
			}
		default:
			err = errors.New("usage: .scope [NAME]")
		}
	case ".format", ".mode":
		switch {
		case len(args) == 0:
			fmt.Fprintf(sh.out, "output format: %s\n", sh.format)
		case len(args) == 1 && checkFormat(strings.ToLower(args[0])) == nil:
			sh.format = strings.ToLower(args[0])
		case len(args) == 1:
			err = checkFormat(strings.ToLower(args[0]))
		default:
			err = errors.New("usage: .format table|csv|json")
		}
	default:
		err = fmt.Errorf("unknown command %s: .help lists the commands", name)
	}
	if err != nil {
		sh.fail(err)
	}
	return false
}

func (sh *shell) tables(ctx context.Context) error {
	rows, err := sh.s.conn.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return err
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(names) > 0 {
		fmt.Fprintln(sh.out, strings.Join(names, "  "))
	}
	return nil
}

func (sh *shell) schema(ctx context.Context, args []string) error {
	q := `SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`
	var qa []any
	if len(args) == 1 {
		q += ` AND lower(tbl_name) = lower(?)`
		qa = append(qa, args[0])
	}
	rows, err := sh.s.conn.QueryContext(ctx, q+` ORDER BY tbl_name, type DESC, name`, qa...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		fmt.Fprintln(sh.out, s+";")
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n == 0 && len(args) == 1 {
		return fmt.Errorf("no table %q", args[0])
	}
	return nil
}
