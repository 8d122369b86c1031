package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/dpsql/dpsql/ledger"

	"github.com/spf13/cobra"

	"github.com/dpsql/dpsql/accountant"
)

func (m *Main) newDemoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo [DB]",
		Short: "A guided tour: budget, noisy queries, refusal, audit",
		Long: `Build a database with a generated "patients" table and walk through a short
session: create a budget, run noisy queries, watch the budget run out, and audit
the ledger. Without DB the database lives in a new temporary directory that is
removed at the end unless --keep is given; DB (which must not exist yet) is
kept. The data are generated from a fixed seed; the noise is not.`,
		Args: nargs("[DB]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				path := args[0]
				if _, err := os.Lstat(path); err == nil {
					return fmt.Errorf("demo: %s already exists; give a new path (the demo never overwrites a file)", path)
				} else if !errors.Is(err, os.ErrNotExist) {
					return err
				}
				return m.demo(cmd.Context(), cmd.OutOrStdout(), path, true)
			}
			dir, err := os.MkdirTemp("", "dpsql-demo-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			return m.demo(cmd.Context(), cmd.OutOrStdout(), filepath.Join(dir, "demo.db"), keep)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary directory and its database for exploring afterwards")
	return cmd
}

// selfCommand is how the user ran this program, for the hints the demo
// prints: "go run ./cmd/dpsql" when exe was built by go run (into a go-build
// temporary directory that is gone afterwards), else "dpsql".
func selfCommand(exe string) string {
	if filepath.Base(exe) == "dpsql" && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/dpsql"
	}
	return "dpsql"
}

// demoPatients is the size of the demo table.
const demoPatients = 10000

func (m *Main) demo(ctx context.Context, w io.Writer, path string, keep bool) error {
	if err := createPatients(ctx, path, demoPatients); err != nil {
		return fmt.Errorf("demo: building %s: %w", path, err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	run := func(args ...string) error {
		say("$ dpsql %s\n", strings.Join(args, " "))
		return m.Run(ctx, args)
	}

	exe, _ := os.Executable()
	self := selfCommand(exe)
	kept := "removed at the end; to keep it, run: " + self + " demo --keep"
	if keep {
		kept = "kept: explore it afterwards with " + self + " shell"
	}
	say(`dpsql demo: differential privacy inside SQLite
Database: %s (%s)

The table patients holds %d generated people, one row each:
id, age, sex, bmi, systolic_bp, diabetic. Differential privacy hides whether any
one person is in the table: every answer carries random noise, and every noisy
answer is first charged to a privacy budget, in a ledger inside the same file.

`, path, kept, demoPatients)

	say("1. Create a budget of mu = 1 (Gaussian DP) for the scope \"default\".\n")
	if err := run("init", path, "--mu", "1", "--scope", "default"); err != nil {
		return err
	}
	s, err := m.openSession(ctx, path, "default")
	if err != nil {
		return err
	}
	defer s.Close()
	sqlStep := func(stmt string) error {
		say("sql> %s\n", stmt)
		return s.Run(ctx, stmt, newPrinter(w, FormatTable))
	}
	// The budget as the owner set it, in mu; dpsql budget shows every figure.
	budgetStep := func() error {
		return sqlStep(`SELECT scope, mu_budget, round(mu_spent, 3) AS mu_spent, round(mu_remaining, 3) AS mu_remaining, entries FROM dp_budget_status WHERE scope = 'default';`)
	}
	say(`
2. The budget before any query: a view in the same file. (dpsql budget DB
   shows all of it: epsilon at delta, the rigorous epsilon, the file's total.)
`)
	if err := budgetStep(); err != nil {
		return err
	}

	say(`
3. A noisy count. Adding or removing one person changes count(*) by at most 1
   (sensitivity 1). Spending mu = 0.5 adds Gaussian noise of standard
   deviation sensitivity/mu = 2.
`)
	if err := sqlStep(`SELECT dp_gaussian(count(*), 1, 0.5) AS noisy_count FROM patients;`); err != nil {
		return err
	}
	say(`
4. A noisy sum. One person must not move a sum by more than a known bound, so
   clip age to [0, 100]: sensitivity 100. With mu = 0.5 the noise has standard
   deviation 200, small beside a total near half a million.
`)
	if err := sqlStep(`SELECT dp_gaussian(sum(min(max(age, 0), 100)), 100, 0.5) AS noisy_age_sum FROM patients;`); err != nil {
		return err
	}
	say(`
5. A noisy average: a noisy sum over a noisy count, mu = 0.4 each (two charges).
   Mean BMI of the diabetic patients, BMI clipped to [10, 60] (sensitivity 60).
`)
	if err := sqlStep(`SELECT dp_gaussian(sum(min(max(bmi, 10), 60)), 60, 0.4) / dp_gaussian(count(*), 1, 0.4) AS noisy_mean_bmi FROM patients WHERE diabetic = 1;`); err != nil {
		return err
	}
	st, err := ledger.ReadStatus(ctx, s.db, "default")
	if err != nil {
		return err
	}
	say(`
   Charges compose as mu = sqrt(sum of mu_i^2): sqrt(0.5^2 + 0.5^2 + 0.4^2 + 0.4^2)
   = %s spent, sqrt(1 - %s^2) = %s left.

6. The budget now. Every charge so far is Gaussian, so the next one is checked
   as mu: mu_spent against the mu_budget of 1.
`, humanFloat(round3(st.MuSpent)), humanFloat(round3(st.MuSpent)), humanFloat(round3(st.MuRemaining)))
	if err := budgetStep(); err != nil {
		return err
	}

	say(`
7. One query too many: mu = 0.5 more would bring the total to
   sqrt(%s^2 + 0.5^2) = %s, over the budget of 1. dpsql refuses before any
   noise is drawn.
`, humanFloat(round3(st.MuSpent)), humanFloat(round3(math.Hypot(st.MuSpent, 0.5))))
	err = sqlStep(`SELECT dp_gaussian(count(*), 1, 0.5) AS noisy_seniors FROM patients WHERE age >= 65;`)
	if err == nil {
		return errors.New("demo: the over-budget query was not refused")
	}
	if !accountant.IsBudgetExceeded(err) {
		return fmt.Errorf("demo: the over-budget query failed unexpectedly: %w", err)
	}
	say("refused: %s\n", err)

	say(`
8. Plan before spending: dp_cost prices a release without charging anything.
   Noise sigma = 4 on a count (sensitivity 1) is mu = 0.25; the cost of 120
   rounds of subsampled noise (rate 1%%, noise multiplier 0.7) is computed by the
   rigorous accountant, as every dpsql budget check does for such releases.
`)
	if err := sqlStep(`SELECT gdp_epsilon(0.25, 1e-5) AS eps_sigma_4, dp_cost(json_object('mechanism', 'subsampled_gaussian', 'q', 0.01, 'sigma', 0.7, 'steps', 120), 1e-5) AS eps_subsampled;`); err != nil {
		return err
	}

	say("\n9. The audit trail: every charge, its mechanism and the SQL that made it,\n   hash-chained so that editing or deleting a row shows.\n")
	if err := run("audit", path, "--format", "table"); err != nil {
		return err
	}
	if err := run("audit", "verify", path); err != nil {
		return err
	}
	if err := m.demoAnalyst(ctx, w, path); err != nil {
		return err
	}
	if keep {
		say("\nNext: %s shell %s   (then .help, .budget, or your own SQL)\n", self, path)
	} else {
		say("\nThe temporary database is removed now. To explore one afterwards: %s demo --keep\n", self)
	}
	return nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// createPatients writes the demo table: n generated people from a fixed seed
// (the data are reproducible; the noise of DP queries never is).
func createPatients(ctx context.Context, path string, n int) error {
	db, err := openDB(ctx, path, "", true)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE patients (
  id          INTEGER PRIMARY KEY,
  age         INTEGER NOT NULL,
  sex         TEXT NOT NULL,
  bmi         REAL NOT NULL,
  systolic_bp INTEGER NOT NULL,
  diabetic    INTEGER NOT NULL
)`); err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO patients(id, age, sex, bmi, systolic_bp, diabetic) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	rng := rand.New(rand.NewPCG(2024, 1)) // data only; DP noise comes from crypto/rand
	for i := 1; i <= n; i++ {
		age := 18 + int(math.Min(72, math.Abs(rng.NormFloat64()*18+30)))
		sex := "F"
		if rng.IntN(2) == 0 {
			sex = "M"
		}
		bmi := math.Round(math.Max(15, math.Min(55, 27+5*rng.NormFloat64()))*10) / 10
		sbp := int(math.Round(100 + 0.5*float64(age) + 12*rng.NormFloat64()))
		risk := 0.02 + 0.004*math.Max(0, bmi-25) + 0.002*float64(age-18)
		diabetic := 0
		if rng.Float64() < risk {
			diabetic = 1
		}
		if _, err := ins.ExecContext(ctx, i, age, sex, bmi, sbp, diabetic); err != nil {
			return err
		}
	}
	return tx.Commit()
}
