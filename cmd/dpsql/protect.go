package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/ledger"

	"github.com/spf13/cobra"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/protect"
)

func (m *Main) newProtectCmd() *cobra.Command {
	var unit, persons string
	var groups, rows int
	var bounds, keys, lengths []string
	cmd := &cobra.Command{
		Use:   "protect DB TABLE",
		Short: "Protect a table: analysts reach it only through DP SELECTs (owner only)",
		Long: `Record the owner's policy for TABLE: which column identifies a person
(--privacy-unit; without it each row is a person), how many groups of one
GROUP BY (--max-groups) and rows per group (--max-rows) one person may
contribute, and public clamping bounds per column (--bounds COL=LO:HI, used by
SUM and AVG when the statement gives none). --max-length COL=BYTES bounds
the values of COL a DP statement's WHERE passes to functions and operators
(default 1024 bytes; rows with a longer value are dropped from such a
statement): with the lengths of its literals it bounds a statement's work per
row. --persons NAME declares that the privacy unit identifies the persons
called NAME: two tables protected with the same --persons may be joined on
their privacy units by a DP statement, bounded per person after the join
(protect both with it, after checking that equal ids are the same person).
--public-keys COL=TABLE[.COLUMN]
declares a public table listing COL's values: a GROUP BY on such columns
releases every listed key and no other, without partition selection. Analyst connections
(dpsql query --analyst, ext.OpenAnalyst) then read TABLE only through
SELECT WITH DIFFERENTIAL_PRIVACY. Protecting a protected table replaces its
policy. Each change is a policy record in the ledger's hash chain (dp_ledger,
kind 'policy'), which dpsql audit verify replays against dp_policy.`,
		Example: `  dpsql protect clinic.db patients --privacy-unit pid --max-groups 1 --bounds bmi=10:60`,
		Args:    nargs("DB", "TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := protect.Policy{PrivacyUnit: unit, MaxGroups: groups, MaxRows: rows, Persons: persons}
			for _, b := range bounds {
				c, lo, hi, err := parseBound(b)
				if err != nil {
					return err
				}
				if p.Bounds == nil {
					p.Bounds = map[string][2]float64{}
				}
				p.Bounds[c] = [2]float64{lo, hi}
			}
			for _, l := range lengths {
				c, n, ok := strings.Cut(l, "=")
				v, err := strconv.Atoi(n)
				if !ok || c == "" || err != nil {
					return usagef("--max-length %q: write COL=BYTES", l)
				}
				if p.MaxLength == nil {
					p.MaxLength = map[string]int{}
				}
				p.MaxLength[c] = v
			}
			for _, k := range keys {
				c, src, ok := strings.Cut(k, "=")
				if !ok || c == "" || src == "" {
					return usagef("--public-keys %q: write COL=TABLE or COL=TABLE.COLUMN", k)
				}
				if p.PublicKeys == nil {
					p.PublicKeys = map[string]string{}
				}
				p.PublicKeys[c] = src
			}
			ctx := cmd.Context()
			db, err := openDB(ctx, args[0], "", false)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := protect.Protect(ctx, db, args[1], p); err != nil {
				return err
			}
			ps, err := protect.LoadPolicies(ctx, db)
			if err != nil {
				return err
			}
			for t, pol := range ps {
				if strings.EqualFold(t, args[1]) {
					fmt.Fprintf(cmd.OutOrStdout(), "protected %s: %s\n", t, describePolicy(pol))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&unit, "privacy-unit", "", "column identifying a person (default: each row is a person)")
	cmd.Flags().StringVar(&persons, "persons", "", "name of the persons the privacy unit identifies: tables protected with the same name may be joined on their units")
	cmd.Flags().IntVar(&groups, "max-groups", 1, "groups of one GROUP BY a person may contribute to")
	cmd.Flags().IntVar(&rows, "max-rows", 1, "rows per group a person may contribute")
	cmd.Flags().StringArrayVar(&bounds, "bounds", nil, "public clamping bounds COL=LO:HI (repeatable)")
	cmd.Flags().StringArrayVar(&keys, "public-keys", nil, "public table listing a column's keys, COL=TABLE[.COLUMN] (repeatable)")
	cmd.Flags().StringArrayVar(&lengths, "max-length", nil, fmt.Sprintf("longest value, in bytes, a DP statement's WHERE passes to a function from a column, COL=BYTES (repeatable; default %d: longer rows are dropped)", protect.DefaultMaxLength))
	return cmd
}

func (m *Main) newUnprotectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unprotect DB TABLE",
		Short: "Remove a table's protection: its rows become public (owner only)",
		Args:  nargs("DB", "TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := openDB(ctx, args[0], "", false)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := protect.Unprotect(ctx, db, args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unprotected %s: analysts can now read it with plain SQL\n", args[1])
			return nil
		},
	}
}

// parseBound reads COL=LO:HI.
func parseBound(s string) (string, float64, float64, error) {
	c, r, ok := strings.Cut(s, "=")
	lo, hi, ok2 := strings.Cut(r, ":")
	if !ok || !ok2 || c == "" {
		return "", 0, 0, usagef("--bounds %q: write COL=LO:HI, e.g. bmi=10:60", s)
	}
	l, err1 := strconv.ParseFloat(lo, 64)
	h, err2 := strconv.ParseFloat(hi, 64)
	if err1 != nil || err2 != nil || !(l < h) || math.IsInf(l, 0) || math.IsInf(h, 0) {
		return "", 0, 0, usagef("--bounds %q: LO and HI must be finite numbers with LO < HI", s)
	}
	return c, l, h, nil
}

func describePolicy(p protect.Policy) string {
	unit := "each row is a person"
	if p.PrivacyUnit != "" {
		unit = "privacy unit " + p.PrivacyUnit
		if p.Persons != "" {
			unit += " (persons " + p.Persons + ")"
		}
	}
	s := fmt.Sprintf("%s, at most %d group(s) and %d row(s) per group per person", unit, p.MaxGroups, p.MaxRows)
	var cols []string
	for c := range p.Bounds {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		s += fmt.Sprintf(", %s in [%g, %g]", c, p.Bounds[c][0], p.Bounds[c][1])
	}
	cols = cols[:0]
	for c := range p.PublicKeys {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		s += fmt.Sprintf(", keys of %s from %s", c, p.PublicKeys[c])
	}
	cols = cols[:0]
	for c := range p.MaxLength {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		s += fmt.Sprintf(", %s at most %d bytes", c, p.MaxLength[c])
	}
	return s
}

// openAnalystSession opens an analyst session of protected mode: scope fixed,
// protected tables only through SELECT WITH DIFFERENTIAL_PRIVACY.
func (m *Main) openAnalystSession(ctx context.Context, path, scope string) (*session, error) {
	check, err := openDB(ctx, path, "", false) // the file must exist
	if err != nil {
		return nil, err
	}
	// A file written before policy records: carry its dp_policy_log over
	// into the ledger now (the owner runs this command). If the file cannot
	// be written, its checked log still serves.
	if _, err := protect.UpgradePolicies(ctx, check); err != nil && !errors.Is(err, ledger.ErrChainBroken) {
		fmt.Fprintf(m.Stderr, "warning: the policies of %s were not carried over into the ledger: %v\n", path, err)
	}
	err = checkAnalystScope(ctx, check, path, scope)
	check.Close()
	if err != nil {
		return nil, err
	}
	db, err := ext.OpenAnalyst(path, scope)
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

// demoAnalyst is the demo's last step: the owner protects patients, and an
// analyst sees it only through a DP SELECT.
func (m *Main) demoAnalyst(ctx context.Context, w io.Writer, path string) error {
	say := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	run := func(args ...string) error {
		say("$ dpsql %s\n", strings.Join(args, " "))
		return m.Run(ctx, args)
	}
	say(`
10. Protected mode. So far whoever wrote the SQL was trusted. Now the owner
    protects patients and gives an analyst a scope of their own; the analyst
    reaches patients only through SELECT WITH DIFFERENTIAL_PRIVACY.
`)
	if err := run("init", path, "--mu", "1", "--scope", "analyst"); err != nil {
		return err
	}
	if err := run("protect", path, "patients", "--privacy-unit", "id", "--bounds", "bmi=10:60"); err != nil {
		return err
	}
	s, err := m.openAnalystSession(ctx, path, "analyst")
	if err != nil {
		return err
	}
	defer s.Close()
	step := func(stmt string) error {
		say("analyst> %s\n", stmt)
		return s.Run(ctx, stmt, newPrinter(w, FormatTable))
	}
	say("\n    A raw query is refused (and charges nothing):\n")
	if err := step(`SELECT * FROM patients LIMIT 3;`); err == nil || !protect.IsRefusal(err) {
		return fmt.Errorf("demo: the analyst's raw query was not refused: %v", err)
	} else {
		say("refused: %s\n", strings.TrimPrefix(err.Error(), "refused: "))
	}
	say(`
    A DP GROUP BY: the keys come out only if enough people hold them (private
    partition selection), counts and means carry noise, and the whole statement
    is one charge of mu = 0.5 to the scope "analyst".
`)
	return step(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, COUNT(*) AS n, AVG(bmi) AS mean_bmi FROM patients WHERE age >= 18 GROUP BY sex;`)
}
