package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dpsql/dpsql/ledger"

	"github.com/spf13/cobra"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

func (m *Main) newInitCmd() *cobra.Command {
	var mu, epsilon, delta, fileMu float64
	var neighbours string
	cmd := &cobra.Command{
		Use:   "init DB (--mu MU [--delta D] | --epsilon E --delta D) [--scope NAME] [--neighbours add_remove|replace_one]",
		Short: "Create the ledger and a privacy budget scope",
		Long: `Create the database file if needed (WAL mode), the dpsql ledger, and a budget
scope. A budget is given in Gaussian DP (--mu) or as (--epsilon, --delta), which
is converted to the largest mu that guarantees it. Budgets cannot be changed
later: create a new scope instead.

A scope's budget holds for one neighbour relation, fixed here: add_remove (the
default: one person's row added or removed) or replace_one (one row replaced
by another, the number of rows public), which per-row releases such as
dp_select_topm need. Add/remove charges into a replace_one scope cost twice
their mu (group privacy); replace-one charges are refused in an add_remove
scope.

All scopes of a file protect the same people: dpsql budget shows their total
(scope "*"). --file-mu caps that total, as a budget event of its own, at the
given --delta and in the given --neighbours relation; every charge must then
pass both its scope's budget and the cap. Give it alone or with a scope.`,
		Example: `  dpsql init clinic.db --mu 1
  dpsql init clinic.db --file-mu 2 --delta 1e-5
  dpsql init clinic.db --epsilon 2 --delta 1e-5 --scope analysis
  dpsql init clinic.db --mu 2 --scope rows --neighbours replace_one`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			hasMu, hasEps, hasDelta := fs.Changed("mu"), fs.Changed("epsilon"), fs.Changed("delta")
			switch {
			case hasMu && hasEps:
				return usagef("init: give the budget as --mu or as --epsilon with --delta, not both")
			case !hasMu && !hasEps && !fs.Changed("file-mu"):
				return usagef("init: no budget given: use --mu MU (e.g. --mu 1) or --epsilon E --delta D (or --file-mu MU to cap the file's total)%s", ignoredBudgetVars())
			case hasEps && !hasDelta:
				return usagef("init: --epsilon needs --delta (e.g. --epsilon 2 --delta 1e-5)")
			}
			if neighbours != mechanism.AddRemove && neighbours != mechanism.ReplaceOne {
				return usagef("init: --neighbours must be %s or %s, got %q", mechanism.AddRemove, mechanism.ReplaceOne, neighbours)
			}
			var capB accountant.Budget
			if fs.Changed("file-mu") {
				var err error
				if capB, err = accountant.NewBudget(accountant.FileScope, fileMu, 0, delta); err != nil {
					return usagef("init: --file-mu: %v", err)
				}
				capB.Neighbours = neighbours
			}
			scope := m.str(cmd, "scope")
			if scope == "" && !fs.Changed("scope") {
				scope = accountant.DefaultScope
			}
			var b accountant.Budget
			if hasMu || hasEps {
				var err error
				if b, err = accountant.NewBudget(scope, mu, epsilon, delta); err != nil {
					return usagef("init: %v", err)
				}
				b.Neighbours = neighbours
			}
			ctx := cmd.Context()
			db, err := openDB(ctx, args[0], "", true)
			if err != nil {
				return err
			}
			defer db.Close()
			w := cmd.OutOrStdout()
			stopWatch := watchLock(ctx, m.Stderr, args[0], true)
			defer stopWatch()
			if capB.Mu > 0 {
				if err := ledger.Init(ctx, db, capB); err != nil {
					return fmt.Errorf("init %s: %w", args[0], err)
				}
				fmt.Fprintf(w, "capped the total over every scope of %s at mu = %s (delta %s, %s)\n", args[0], short(capB.Mu), short(capB.Delta), capB.Neighbours)
				if b.Mu == 0 {
					return nil
				}
			}
			if err := ledger.Init(ctx, db, b); err != nil {
				return fmt.Errorf("init %s: %w", args[0], err)
			}
			fmt.Fprintf(w, "created budget scope %q in %s\n", b.Scope, args[0])
			if b.Neighbours == mechanism.ReplaceOne {
				fmt.Fprintf(w, "  neighbours = replace_one (one row replaced by another; the number of rows is public)\n")
			}
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
	fs.StringP("scope", "s", accountant.DefaultScope, "name of the budget scope")
	fs.StringVar(&neighbours, "neighbours", mechanism.AddRemove, "the scope's neighbour relation: add_remove or replace_one")
	fs.Float64Var(&fileMu, "file-mu", 0, "cap the total over every scope of the file at this mu")
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
