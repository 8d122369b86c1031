package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/sqlfuncs"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func (m *Main) newQueryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "query DB [SQL]",
		Short: "Run SQL statements and print their results",
		Long: `Run one or more SQL statements, separated by semicolons, and print the rows of
each statement that returns rows. Without SQL, or with "-", the statements are
read from standard input. DP functions charge the scope given by --scope.`,
		Example: `  dpsql query clinic.db "SELECT dp_gaussian(count(*), 1, 0.5) FROM patients"
  dpsql query clinic.db --scope analysis --format json < queries.sql`,
		Args: nargs("DB", "[SQL]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := m.format(cmd)
			if err != nil {
				return err
			}
			text := "-"
			if len(args) == 2 {
				text = args[1]
			}
			if text == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("reading SQL from standard input: %w", err)
				}
				text = string(b)
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
			return s.Exec(ctx, text, newPrinter(cmd.OutOrStdout(), format))
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	cmd.Flags().StringP("scope", "s", "", `budget scope DP functions charge (default "default")`)
	cmd.Flags().Bool("analyst", false, "connect as an analyst of protected mode (protected tables only through SELECT WITH DIFFERENTIAL_PRIVACY)")
	configured(cmd, "format", "scope")
	return cmd
}

// session is one connection to a database file on which statements run in
// order, so that connection state (dp_use_scope, temp tables, transactions)
// carries from one statement to the next.
type session struct {
	m    *Main
	path string
	db   *sql.DB
	conn *sql.Conn
}

// openSession opens an existing database file; a non-empty scope must exist
// when the file has a ledger (ext.OpenScope checks).
func (m *Main) openSession(ctx context.Context, path, scope string) (*session, error) {
	db, err := openDB(ctx, path, scope, false)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &session{m: m, path: path, db: db, conn: conn}, nil
}

func (s *session) Close() error {
	s.conn.Close()
	return s.db.Close()
}

// Exec runs every statement in text in order, printing the rows of those that
// return rows, and stops at the first error.
func (s *session) Exec(ctx context.Context, text string, p *printer) error {
	stmts, rest := splitSQL(text)
	if rest != "" && !onlyComment(rest) {
		stmts = append(stmts, rest)
	}
	if len(stmts) == 0 {
		return usagef("no SQL statement given")
	}
	for i, st := range stmts {
		if err := s.Run(ctx, st, p); err != nil {
			if len(stmts) > 1 {
				return fmt.Errorf("statement %d (%s): %w", i+1, abbreviate(st, 60), err)
			}
			return err
		}
	}
	return nil
}

// Run runs one statement and prints its rows, if it returns any. A progress
// display (see Task) runs until the first row arrives.
func (s *session) Run(ctx context.Context, stmt string, p *printer) error {
	task := s.m.startTask(abbreviate(stmt, 50))
	defer task.Stop()
	// Long releases (dp_avgmix) report rows written; show them beside the spinner.
	sqlfuncs.SetProgress(func(fn string, done, total int) {
		task.Set(fmt.Sprintf("%s: %d/%d rows (%.0f%%)", fn, done, total, 100*float64(done)/float64(max(total, 1))))
	})
	defer sqlfuncs.SetProgress(nil)
	stopWatch := watchLock(ctx, s.m.Stderr, s.path, !readOnlyStatement(stmt))
	defer stopWatch()
	// A refused charge's type crossed SQLite as a message only: recover it
	// from the connection (ext.Typed), for accountant.CodeOf and errors.As.
	rows, err := s.conn.QueryContext(ctx, stmt)
	if err != nil {
		return sqlError(ctx, ext.Typed(s.conn, err))
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return err
	}
	if len(cols) == 0 {
		for rows.Next() {
		}
		err = rows.Err()
	} else {
		err = p.PrintRows(rows, task.Stop)
	}
	rows.Close()
	return sqlError(ctx, ext.Typed(s.conn, err))
}

// sqlError explains a cancelled statement; a DP statement of an analyst
// connection that was accepted before the interrupt keeps its charge.
func sqlError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	var stopped *protect.Stopped
	if errors.As(err, &stopped) {
		return fmt.Errorf("statement interrupted after its charge committed: it keeps its charge (ledger row %d, %s) and released nothing",
			stopped.Receipt.ID, stopped.Cost())
	}
	return errors.New("statement interrupted")
}

// abbreviate shortens s to one line of at most n characters.
func abbreviate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
