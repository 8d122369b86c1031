package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dpsql/dpsql/serve"
	"github.com/spf13/cobra"
)

func (m *Main) newAnalystCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "analyst",
		Short: "Manage the analyst accounts of dpsql serve (owner only)",
		Long: `Accounts of the analyst service (dpsql serve). Each account has one bearer
token, bound to one budget scope that the analyst cannot change. Only a salted
hash of the token is kept, as a record in the ledger's hash chain; the service
accepts a token only while the chain shows its account as active.`,
	}
	cmd.AddCommand(m.newAnalystAddCmd(), m.newAnalystListCmd(), m.newAnalystRevokeCmd())
	return cmd
}

func (m *Main) newAnalystAddCmd() *cobra.Command {
	var scope string
	cmd := &cobra.Command{
		Use:   "add DB NAME --scope SCOPE",
		Short: "Create an account and print its token (shown once)",
		Long: `Create the account NAME, charging SCOPE, and print its bearer token on standard
output. The token is shown this once and not stored: give it to the analyst
over a private channel. When standard output is a file, the file is first made
readable by you only; create it so (umask 077, as in the example) to leave no
moment in which another user could open it. The scope must exist (dpsql init DB --scope SCOPE).`,
		Example: `  (umask 077; dpsql analyst add clinic.db alice --scope alice > alice.token)`,
		Args:    nargs("DB", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if scope == "" {
				return usagef("analyst add: --scope is required: the budget scope the account's token charges")
			}
			path, err := existingFile(args[0])
			if err != nil {
				return err
			}
			where, err := tokenOut(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			tok, err := serve.AddAccount(cmd.Context(), path, args[1], scope)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintf(cmd.ErrOrStderr(), "dpsql: account %s created in scope %q; %s is shown only this once\n", args[1], scope, where)
			return nil
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "", "budget scope the account charges (required)")
	return cmd
}

func (m *Main) newAnalystListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list DB",
		Short: "List the accounts, active and revoked, from the ledger's chain",
		Long: `List every account, active or revoked, as the ledger's chain records it, and
check that the derived table dp_account matches the chain (exit status 1 if it
does not: someone edited the file; the service reads only the chain).`,
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
			as, err := serve.ListAccounts(ctx, db)
			if err != nil {
				return err
			}
			rows := make([][]any, 0, len(as))
			for _, a := range as {
				status, revoked := "active", any(nil)
				if !a.Active() {
					status, revoked = "revoked", shortTime(a.Revoked)
				}
				rows = append(rows, []any{a.Name, a.Scope, status, shortTime(a.Added), revoked})
			}
			if err := newPrinter(cmd.OutOrStdout(), format).Print([]string{"name", "scope", "status", "added", "revoked"}, rows); err != nil {
				return err
			}
			if _, err := serve.VerifyAccounts(ctx, db); err != nil {
				return fmt.Errorf("%w (the list above is the chain's, which is all the service reads)", err)
			}
			return nil
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	configured(cmd, "format")
	return cmd
}

func (m *Main) newAnalystRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke DB NAME",
		Short: "Revoke an account: the service refuses its token from now on",
		Args:  nargs("DB", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := existingFile(args[0])
			if err != nil {
				return err
			}
			if err := serve.RevokeAccount(cmd.Context(), path, args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked account %s\n", args[1])
			return nil
		},
	}
}

// existingFile returns the absolute path of an existing database file.
func existingFile(path string) (string, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", fmt.Errorf("no database file at %s (create one with `dpsql init %s --mu 1`)", path, path)
	case st.IsDir():
		return "", fmt.Errorf("%s is a directory, not a database file", path)
	}
	return filepath.Abs(path)
}
