package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/mechanism"

	"github.com/spf13/cobra"

	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/serve"
)

func (m *Main) newAuditCmd() *cobra.Command {
	var scope string
	var limit int
	var immutable bool
	cmd := &cobra.Command{
		Use:   "audit DB",
		Short: "List the ledger: every charge made against the budgets",
		Long: `List the rows of the append-only ledger dp_ledger: id, time, scope, mechanism,
its mu, its full description (params), the SQL that made the charge and the
start of the row's hash. The table format shortens params and query; use
--format json or csv for the full text. The ledger holds every event: charges
and the creation of each budget (mechanism "budget"). "dpsql audit verify DB"
checks the hash chain and the tables derived from it; "dpsql audit head DB"
prints the chain's head, for an auditor to keep.`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := m.format(cmd)
			if err != nil {
				return err
			}
			if limit < 0 {
				return usagef("audit: --limit must be >= 0, got %d", limit)
			}
			ctx := cmd.Context()
			db, err := openReadOnly(ctx, args[0], immutable)
			if err != nil {
				return err
			}
			defer db.Close()
			return printAudit(ctx, db, newPrinter(cmd.OutOrStdout(), format), scope, limit)
		},
	}
	cmd.Flags().StringP("format", "f", FormatTable, "output format: table, csv or json")
	cmd.Flags().StringVarP(&scope, "scope", "s", "", "only this scope's rows")
	cmd.Flags().IntVarP(&limit, "limit", "n", 0, "only the last n rows (0: all)")
	immutableFlag(cmd, &immutable)
	configured(cmd, "format")
	cmd.AddCommand(m.newVerifyCmd(), m.newHeadCmd())
	return cmd
}

func (m *Main) newVerifyCmd() *cobra.Command {
	var head string
	var immutable bool
	cmd := &cobra.Command{
		Use:   "verify DB [--head ID:HASH]",
		Short: "Check the ledger's hash chain and recompute what the file says",
		Long: `Recompute the hash of every ledger row and check that it chains to the previous
row and that each row's recorded mu matches its content; check the schema
version (printed; a file of a later version than this dpsql reads is refused:
upgrade dpsql) and that every object dpsql creates in the file (tables, indexes,
triggers, the dp_budget_status view, dp_policy, dp_account) has the SQL dpsql
gives it, that SQLite's integrity check of those tables passes and that their
values have the types dpsql writes; check that dp_budget matches the chain's
budget events and that every scope's figures in dp_scope_state (what
dp_budget_status shows) match those recomputed from the chain. With
--head (as printed earlier by "dpsql audit head DB"), also check that the chain
still contains that exact row: a removed or rewritten tail fails. Exits with
status 1 at the first problem.

The chain is tamper evidence for an auditor who keeps a head; it cannot stop
someone with write access to the file from rewriting the whole chain.`,
		Example: `  dpsql audit head clinic.db > kept-head.txt
  dpsql audit verify clinic.db --head "$(cat kept-head.txt)"`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var want *ledger.Head
			if cmd.Flags().Changed("head") {
				h, err := ledger.ParseHead(head)
				if err != nil {
					return usagef("audit verify: --head: %v", err)
				}
				want = &h
			}
			ctx := cmd.Context()
			db, err := openReadOnly(ctx, args[0], immutable)
			if err != nil {
				return err
			}
			defer db.Close()
			return verifyLedger(ctx, db, cmd.OutOrStdout(), want)
		},
	}
	cmd.Flags().StringVar(&head, "head", "", "a head ID:HASH the chain must still contain")
	immutableFlag(cmd, &immutable)
	return cmd
}

func (m *Main) newHeadCmd() *cobra.Command {
	var immutable bool
	cmd := &cobra.Command{
		Use:   "head DB",
		Short: "Print the ledger's head as ID:HASH, for an auditor to keep",
		Long: `Print the id and hash of the ledger's last row as ID:HASH (a decimal id and 64
lowercase hex digits; 0 and 64 zeros for an empty ledger). Keep it somewhere
the file's writers cannot reach; "dpsql audit verify DB --head ID:HASH" later
fails unless the chain still contains that row.`,
		Args: nargs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := openReadOnly(ctx, args[0], immutable)
			if err != nil {
				return err
			}
			defer db.Close()
			h, err := ledger.ReadHead(ctx, db)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h)
			return nil
		},
	}
	immutableFlag(cmd, &immutable)
	return cmd
}

// schemaLine says which schema version a verified file has and, for an
// earlier one, what its next write does.
func schemaLine(v int) string {
	switch {
	case v == ledger.SchemaVersion:
		return fmt.Sprintf("schema version %d", v)
	case v == 0:
		return fmt.Sprintf("schema version 0, the first release's: its next charge or dp_init upgrades it to version %d (docs/ledger.md, Schema versions)", ledger.SchemaVersion)
	}
	return fmt.Sprintf("schema version %d, an earlier dpsql's: its next charge or dp_init upgrades it to version %d (docs/ledger.md, Schema versions)", v, ledger.SchemaVersion)
}

// errNothingToVerify is verifyLedger's answer for a database without a ledger.
var errNothingToVerify = errors.New("this database has no dpsql ledger, so there is nothing to verify (create one with `dpsql init DB --mu 1` or SELECT dp_init(1.0))")

func verifyLedger(ctx context.Context, db ledger.Queryer, w io.Writer, head *ledger.Head) error {
	r, err := ledger.VerifyAt(ctx, db, head)
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		return errNothingToVerify
	case errors.Is(err, ledger.ErrNewerSchema):
		return fmt.Errorf("cannot verify it: %w", err) // not a failed check: a file this dpsql cannot read
	case err != nil:
		return fmt.Errorf("ledger verification failed after %d good rows: %w", r.Rows, err)
	}
	records := ""
	if r.Records > 0 {
		records = fmt.Sprintf(", records: %d", r.Records)
	}
	fmt.Fprintf(w, "ledger OK: %d rows, chain intact (charges: %d, budget events: %d%s); every dpsql object as dpsql writes it and its pages intact, dp_budget and dp_scope_state match the chain\n", r.Rows, r.Charges, r.Budgets, records)
	fmt.Fprintf(w, "head %s\n", r.Head)
	fmt.Fprintln(w, schemaLine(r.Version))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if n, err := protect.VerifyPolicies(ctx, db); err != nil {
		return fmt.Errorf("policy verification failed: %w", err)
	} else if n > 0 {
		fmt.Fprintf(w, "policies OK: %d changes replayed from the chain, dp_policy matches\n", n)
	}
	if n, err := serve.VerifyAccounts(ctx, db); err != nil {
		return fmt.Errorf("analyst account verification failed: %w", err)
	} else if n > 0 {
		fmt.Fprintf(w, "analyst accounts OK: %d accounts replayed from the chain, dp_account matches\n", n)
	}
	return nil
}

var auditColumns = []string{"id", "at", "scope", "mechanism", "mu", "params", "query", "hash"}

// printAudit prints the ledger rows of scope ("" = all), the last limit of
// them (0 = all). The table format shortens the time, params, query and hash
// to keep a row on one line, and shows a charge's cost (auditCost) where csv
// and json give its mu as recorded; csv and json give everything in full
// (params in json as an object).
func printAudit(ctx context.Context, db ledger.Queryer, p *printer, scope string, limit int) error {
	rows, err := ledger.ReadLedger(ctx, db)
	if err != nil {
		return err
	}
	cols := auditColumns
	if p.format == FormatTable {
		cols = slices.Clone(auditColumns)
		cols[slices.Index(cols, "mu")] = "cost"
	}
	var out [][]any
	for _, r := range rows {
		if scope != "" && r.Scope != scope {
			continue
		}
		var at, mu, params, query, hash any = r.At, r.Mu, r.Params, r.Query, r.Hash
		switch p.format {
		case FormatTable:
			at = shortTime(r.At)
			mu = auditCost(r.Kind, mechanism.CostOf(r.Mu, r.Params))
			params = abbreviate(compactParams(r.Params), 30)
			query = abbreviate(r.Query, 34)
			hash = r.Hash[:min(10, len(r.Hash))]
		case FormatJSON:
			if json.Valid([]byte(r.Params)) {
				params = json.RawMessage(r.Params)
			}
		}
		if r.Query == "" {
			query = nil
		}
		out = append(out, []any{r.ID, at, r.Scope, r.Mechanism, mu, params, query, hash})
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return p.Print(cols, out)
}

// auditCost is the cost column of a ledger entry in the table format of
// dpsql audit and of the shells' .audit: what a charge spent, as
// mechanism.Cost says it (epsilon and delta for Laplace noise, never +Inf);
// a budget event's mu; nothing for other events (a policy record's mu is 0).
func auditCost(kind string, c mechanism.Cost) any {
	switch kind {
	case ledger.EventCharge, "":
		return c.String()
	case ledger.EventBudget:
		return mechanism.Cost{Mu: c.Mu}.String()
	}
	return nil
}

// shortTime turns 2026-01-02T15:04:05.123456Z into 2026-01-02 15:04:05Z,
// keeping the Z that says the time is UTC.
func shortTime(at string) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return at
	}
	return t.UTC().Format(time.DateTime + "Z")
}

// compactParams renders a mechanism description as "sensitivity=1 sigma=2",
// leaving out the mechanism and mu (columns of their own) and the noise grid.
func compactParams(params string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(params), &m); err != nil {
		return params
	}
	delete(m, "mechanism")
	delete(m, "mu")
	delete(m, "grid")
	delete(m, "noise_tv") // bookkeeping, in csv and json; the table is a summary
	delete(m, "weights")  // optnoise's 2 KB of base64; weights_sha256 names them
	first := []string{"sensitivity", "sigma", "q", "steps", "epsilon", "n", "dim"}
	rank := func(k string) int {
		if i := slices.Index(first, k); i >= 0 {
			return i
		}
		return len(first)
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if c := rank(a) - rank(b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		switch v := m[k].(type) {
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'g', 4, 64))
		case string:
			b.WriteString(v)
		default:
			j, _ := json.Marshal(v)
			b.Write(j)
		}
	}
	return b.String()
}
