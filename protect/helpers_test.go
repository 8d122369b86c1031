package protect_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
)

// newClinic creates a database with a budget scope "default" of mu, a
// protected table patients(pid, sex, age, bmi) filled by fill, a public
// table wards, and returns its path and the owner's connection.
func newClinic(t testing.TB, mu float64, policy string, fill func(tx *sql.Tx)) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clinic.db")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	mustExec(t, owner, fmt.Sprintf(`SELECT dp_init(%g, 1e-5)`, mu))
	mustExec(t, owner, `CREATE TABLE patients (pid INTEGER, sex TEXT, age INTEGER, bmi REAL)`)
	mustExec(t, owner, `CREATE TABLE wards (name TEXT, beds INTEGER)`)
	mustExec(t, owner, `INSERT INTO wards VALUES ('north', 12), ('south', 8)`)
	tx, err := owner.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fill(tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if policy != "" {
		mustExec(t, owner, `SELECT dp_protect('patients', `+policy+`)`)
	}
	return path, owner
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func openAnalyst(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := ext.OpenAnalyst(path, "")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// queryAll runs q and returns its columns and rows.
func queryAll(ctx context.Context, db *sql.DB, q string) ([]string, [][]any, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			return nil, nil, err
		}
		out = append(out, v)
	}
	return cols, out, rows.Err()
}

func ledgerRows(t testing.TB, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func insertPatients(n int, row func(i int) (pid int, sex string, age int, bmi any)) func(tx *sql.Tx) {
	return func(tx *sql.Tx) {
		st, err := tx.Prepare(`INSERT INTO patients VALUES (?, ?, ?, ?)`)
		if err != nil {
			panic(err)
		}
		defer st.Close()
		for i := range n {
			pid, sex, age, bmi := row(i)
			if _, err := st.Exec(pid, sex, age, bmi); err != nil {
				panic(err)
			}
		}
	}
}

const issueExample = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5)
       sex, COUNT(*) AS n, AVG(bmi, contribution_bounds_per_group => (10, 60)) AS mean_bmi
FROM patients WHERE age >= 18 GROUP BY sex;`

var _ = strings.Contains
