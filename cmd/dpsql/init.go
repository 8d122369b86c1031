package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/sqlfuncs"
	"github.com/spf13/cobra"
)

func (m *Main) newInitCmd() *cobra.Command {
	var mu, epsilon, delta float64
	cmd := &cobra.Command{
		Use:   "init DB (--mu MU [--delta D] | --epsilon E --delta D) [--scope NAME]",
		Short: "Create the ledger and a privacy budget scope",
		Long: `Create the database file if needed (WAL mode), the dpsql ledger, and a budget
scope. A budget is given in Gaussian DP (--mu) or as (--epsilon, --delta), which
is converted to the largest mu that guarantees it. Budgets cannot be changed
later: create a new scope instead.`,
		Example: `  dpsql init clinic.db --mu 1
  dpsql init clinic.db --epsilon 2 --delta 1e-5 --scope analysis`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			hasMu, hasEps, hasDelta := fs.Changed("mu"), fs.Changed("epsilon"), fs.Changed("delta")
			switch {
			case hasMu && hasEps:
				return usagef("init: give the budget as --mu or as --epsilon with --delta, not both")
			case !hasMu && !hasEps:
				return usagef("init: no budget given: use --mu MU (e.g. --mu 1) or --epsilon E --delta D%s", ignoredBudgetVars())
			case hasEps && !hasDelta:
				return usagef("init: --epsilon needs --delta (e.g. --epsilon 2 --delta 1e-5)")
			}
			scope := m.str(cmd, "scope")
			if scope == "" && !fs.Changed("scope") {
				scope = sqlfuncs.DefaultScope
			}
			b, err := accountant.NewBudget(scope, mu, epsilon, delta)
			if err != nil {
				return usagef("init: %v", err)
			}
			ctx := cmd.Context()
			db, err := openDB(ctx, args[0], "", true)
			if err != nil {
				return err
			}
			defer db.Close()
			stopWatch := watchLock(ctx, m.Stderr, args[0], true)
			err = accountant.Init(ctx, db, b)
			stopWatch()
			if err != nil {
				return fmt.Errorf("init %s: %w", args[0], err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "created budget scope %q in %s\n", b.Scope, args[0])
			if b.Epsilon > 0 {
				fmt.Fprintf(w, "  epsilon = %s at delta = %s\n", short(b.Epsilon), short(b.Delta))
				fmt.Fprintf(w, "  mu      = %s (the largest Gaussian-DP budget that guarantees it)\n", short(b.Mu))
				return nil
			}
			e, err := accountant.Epsilon(b.Mu, b.Delta)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "  mu      = %s (Gaussian DP)\n", short(b.Mu))
			fmt.Fprintf(w, "  epsilon = %s at delta = %s (the (epsilon, delta)-DP guarantee this mu gives)\n", short(e), short(b.Delta))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.Float64Var(&mu, "mu", 0, "budget in Gaussian DP (mu-GDP)")
	fs.Float64Var(&epsilon, "epsilon", 0, "budget epsilon; give --delta with it (the default delta of 1e-05 applies only with --mu)")
	fs.Float64Var(&delta, "delta", 1e-5, "the budget's delta, where epsilon is reported and checked (required with --epsilon)")
	fs.StringP("scope", "s", sqlfuncs.DefaultScope, "name of the budget scope")
	configured(cmd, "scope")
	return cmd
}

// ignoredBudgetVars names DPSQL_MU, DPSQL_EPSILON or DPSQL_DELTA when one is
// set: budgets come only from flags, so the variable was not used.
func ignoredBudgetVars() string {
	var set []string
	for _, k := range budgetKeys {
		if v := "DPSQL_" + strings.ToUpper(k); os.Getenv(v) != "" {
			set = append(set, v)
		}
	}
	if len(set) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s is ignored: budgets come only from the command line)", strings.Join(set, " and "))
}

// short prints a figure with 4 significant digits, for narration.
func short(x float64) string { return humanFloat(sigDigits(x, 4)) }
