package sqlfuncs_test

import (
	"database/sql"
	"testing"
)

// benchDB returns a database with a table t of n rows (x REAL in [0, 1)).
func benchDB(b *testing.B, n int) *dbT {
	b.Helper()
	db := openDB(b, `SELECT dp_init(1e9)`)
	if _, err := db.Exec(`CREATE TABLE t(x REAL)`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
		INSERT INTO t SELECT (i * 7919 % 1000) / 1000.0 FROM c`, n-1); err != nil {
		b.Fatal(err)
	}
	return db
}

type dbT = sql.DB

// BenchmarkAggregate compares a DP sum over 1 million rows with the plain sum:
// the DP query adds one ledger commit and one noise draw to the scan.
func BenchmarkAggregate(b *testing.B) {
	db := benchDB(b, 1_000_000)
	for _, bc := range []struct{ name, q string }{
		{"plain", `SELECT sum(x) FROM t`},
		{"dp", `SELECT dp_gaussian(sum(x), 1, 0.001) FROM t`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var v float64
			for b.Loop() {
				if err := db.QueryRow(bc.q).Scan(&v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCharge measures one dp_gaussian call: argument checks, the ledger
// transaction (BEGIN IMMEDIATE, budget check, append, fsync'd commit) and the
// noise draw.
func BenchmarkCharge(b *testing.B) {
	db := openDB(b, `SELECT dp_init(1e9)`)
	var v float64
	for b.Loop() {
		if err := db.QueryRow(`SELECT dp_gaussian(1, 1, 0.001)`).Scan(&v); err != nil {
			b.Fatal(err)
		}
	}
}
