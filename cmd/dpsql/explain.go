package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/dpsql/dpsql/protect"
	"github.com/spf13/cobra"
)

func (m *Main) newExplainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain DB SQL",
		Short: "Show how a DP statement would be released, before spending anything",
		Long: `Plan a SELECT WITH DIFFERENTIAL_PRIVACY statement exactly as protected mode
would run it, and print, instead of its rows, how it would be released: the
budget and the noise law chosen (and why), the partition selection's
threshold, each noisy value the statement draws (its law, scale, share of the
budget and sensitivity), and each aggregate's expected error and the
half-width of its interval (at OPTIONS confidence, else 95%). Nothing is read
from protected tables and nothing is charged, so an analyst can pick mu or
epsilon for the accuracy they need. The statement may start with EXPLAIN.`,
		Example: `  dpsql explain clinic.db "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5)
      sex, COUNT(*) AS n, AVG(bmi) AS mean_bmi FROM patients GROUP BY sex"`,
		Args: nargs("DB", "SQL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := m.format(cmd)
			if err != nil {
				return err
			}
			path := args[0]
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no database file at %s", path)
			}
			scope := m.str(cmd, "scope")
			if scope == "" {
				scope = "default"
			}
			e, err := protect.EngineFor(path)
			if err != nil {
				return err
			}
			defer e.Release()
			res, err := e.Explain(cmd.Context(), scope, args[1])
			if err != nil {
				return err
			}
			return newPrinter(cmd.OutOrStdout(), format).Print(res.Columns, res.Rows)
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	cmd.Flags().StringP("scope", "s", "", `budget scope the statement would charge (default "default")`)
	configured(cmd, "format", "scope")
	return cmd
}
