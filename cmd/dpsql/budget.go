package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/ledger"

	"github.com/spf13/cobra"

	"github.com/dpsql/dpsql/accountant"
)

func (m *Main) newBudgetCmd() *cobra.Command {
	var immutable bool
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
			db, err := openReadOnly(ctx, args[0], immutable)
			if err != nil {
				return err
			}
			defer db.Close()
			return printBudget(ctx, db, newPrinter(cmd.OutOrStdout(), format))
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	immutableFlag(cmd, &immutable)
	configured(cmd, "format")
	return cmd
}

// printBudget prints dp_budget_status, one row per scope, its columns in the
// view's order; the table format adds, per scope, what its budget check
// compares.
func printBudget(ctx context.Context, db ledger.Queryer, p *printer) error {
	// Only dpsql's view, of a version this dpsql reads: a look-alike view
	// could show any budget.
	if err := ledger.CheckStatusView(ctx, db); err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, `SELECT * FROM dp_budget_status ORDER BY scope = '*', scope`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return ledger.ErrNoLedger
		}
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	var out [][]any
	var notes []string
	for rows.Next() {
		r := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range r {
			ptrs[i] = &r[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		notes = append(notes, bindingNote(cols, r))
		if p.format == FormatTable { // 6 significant digits read better; csv and json stay exact
			for i, v := range r {
				if f, ok := v.(float64); ok {
					r[i] = sigDigits(f, 6)
				}
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := p.Print(cols, out); err != nil {
		return err
	}
	if p.format == FormatTable && len(notes) > 0 {
		_, err = fmt.Fprintf(p.w, "what each budget check compares:\n%s", strings.Join(notes, ""))
	}
	return err
}

// bindingNote says which figure a scope's budget check compares, against the
// budget as the owner set it: mu_spent against mu_budget while every charge
// is Gaussian (mu composes exactly), else epsilon_rigorous, the PLD
// accountant's upper bound, against the budget's epsilon at the scope's delta
// (epsilon_budget, or the epsilon of mu_budget).
func bindingNote(cols []string, row []any) string {
	get := func(name string) any {
		if i := slices.Index(cols, name); i >= 0 {
			return row[i]
		}
		return nil
	}
	scope := fmt.Sprint(get("scope"))
	delta, _ := get("delta").(float64)
	mu, capped := get("mu_budget").(float64)
	if scope == accountant.FileScope && !capped {
		return fmt.Sprintf("  %s: the total over every scope, composed at delta = %s; no cap is set (dpsql init DB --file-mu MU sets one)\n", scope, humanFloat(delta))
	}
	num := func(x float64) string { return humanFloat(sigDigits(x, 6)) }
	gaussian := fmt.Sprintf("mu_spent against mu_budget = %s", num(mu))
	var epsTarget string
	if eps, ok := get("epsilon_budget").(float64); ok { // set as (epsilon, delta)
		gaussian = fmt.Sprintf("epsilon_spent against epsilon_budget = %s at delta = %s", num(eps), humanFloat(delta))
		epsTarget = fmt.Sprintf("at delta = %s against epsilon_budget = %s", humanFloat(delta), num(eps))
	} else {
		eps, _ := accountant.Epsilon(mu, delta)
		epsTarget = fmt.Sprintf("at delta = %s against %s, the epsilon of mu_budget = %s", humanFloat(delta), num(eps), num(mu))
	}
	switch {
	case get("entries") == int64(0):
		return fmt.Sprintf("  %s: nothing spent yet; while every charge is Gaussian, checks compare %s\n", scope, gaussian)
	case get("epsilon_rigorous") == nil:
		return fmt.Sprintf("  %s: %s (every charge is Gaussian, so mu composes exactly)\n", scope, gaussian)
	}
	return fmt.Sprintf("  %s: epsilon_rigorous %s (the scope holds subsampled or non-Gaussian charges, checked by the PLD accountant)\n", scope, epsTarget)
}

// sigDigits rounds x to n significant digits.
func sigDigits(x float64, n int) float64 {
	y, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', n, 64), 64)
	if err != nil {
		return x
	}
	return y
}
