package main

import (
	"context"
	"database/sql"
	"math"
	"strconv"

	"github.com/dpsql/dpsql/accountant"
	"github.com/spf13/cobra"
)

func (m *Main) newBudgetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget DB",
		Short: "Show every budget scope: spent and remaining",
		Long: `Show dp_budget_status for every scope: the budget in mu (Gaussian DP), mu spent
(sqrt of the sum of squares of the charges) and remaining, epsilon spent at the
scope's delta, the rigorous (PLD) epsilon once a subsampled or non-Gaussian
charge exists, the epsilon budget of scopes created from (epsilon, delta), and
the number of ledger entries.`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := m.format(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, err := openDB(ctx, args[0], "", false)
			if err != nil {
				return err
			}
			defer db.Close()
			return printBudget(ctx, db, newPrinter(cmd.OutOrStdout(), format))
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	configured(cmd, "format")
	return cmd
}

var budgetColumns = []string{"scope", "mu_budget", "mu_spent", "mu_remaining", "delta", "epsilon_spent", "epsilon_rigorous", "epsilon_budget", "entries"}

// printBudget prints dp_budget_status, one row per scope and, last, the
// total over every scope (scope "*").
func printBudget(ctx context.Context, db accountant.Queryer, p *printer) error {
	sts, err := accountant.ReadStatuses(ctx, db, "")
	if err != nil {
		return err
	}
	rows := make([][]any, 0, len(sts))
	for _, s := range sts {
		var budget, remaining any = s.MuBudget, s.MuRemaining
		if math.IsInf(s.MuBudget, 1) { // the file's total without a cap
			budget, remaining = nil, nil
		}
		r := []any{s.Scope, budget, s.MuSpent, remaining, s.Delta, s.EpsilonSpent,
			nullFloat(s.EpsilonRigorous), nullFloat(s.EpsilonBudget), s.Entries}
		if p.format == FormatTable { // 6 significant digits read better; csv and json stay exact
			for i, v := range r {
				if f, ok := v.(float64); ok {
					r[i] = sigDigits(f, 6)
				}
			}
		}
		rows = append(rows, r)
	}
	return p.Print(budgetColumns, rows)
}

// sigDigits rounds x to n significant digits.
func sigDigits(x float64, n int) float64 {
	y, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', n, 64), 64)
	if err != nil {
		return x
	}
	return y
}

func nullFloat(f sql.NullFloat64) any {
	if !f.Valid {
		return nil
	}
	return f.Float64
}
