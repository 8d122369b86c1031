package sqlfuncs_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perRowRows is the table size of the per-row benchmarks.
const perRowRows = 1_000_000

// BenchmarkPerRow is the cost a row pays for crossing into a dpsql function
// (SQLite to Go and back), over a table of 10^6 rows (x a 16-float BLOB, y an
// INTEGER): "plain" reads the same column without a dpsql function;
// "dp_scope" calls a scalar without arguments (not deterministic, so SQLite
// calls it on every row; its body only reads the scope): the crossing
// itself; "dp_vec_select" calls a scalar (a BLOB in, a BLOB out) on every row;
// "dp_avgmix_ingest" feeds every row to dp_avgmix, whose release is then
// refused before anything is drawn or charged (its "into" names a table that
// exists), so the time is the ingest. The ns/row metric is the whole
// statement's time over the rows, cpu-ns/row the process's CPU time over
// them (steadier on a loaded machine); subtract "plain" for the function's
// share.
func BenchmarkPerRow(b *testing.B) {
	db := openDB(b, `SELECT dp_init(1e6)`)
	if _, err := db.Exec(`CREATE TABLE t(x BLOB, y INTEGER)`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
		INSERT INTO t SELECT zeroblob(64), i % 10 FROM c`, perRowRows-1); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, q, fails string }{
		{"plain", `SELECT sum(length(x)) FROM t`, ""},
		{"dp_scope", `SELECT count(dp_scope()) FROM t`, ""},
		{"dp_vec_select", `SELECT sum(length(dp_vec_select(x, '[0, 2]'))) FROM t`, ""},
		{"dp_avgmix_ingest", `SELECT dp_avgmix(x, y, json_object('n', 1000000, 'mu', 1.0, 'classes', 10, 'into', 't')) FROM t`, "already exists"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			start, cpu := time.Now(), cpuTime()
			for b.Loop() {
				var v any
				err := db.QueryRow(bc.q).Scan(&v)
				if bc.fails == "" && err != nil || bc.fails != "" && (err == nil || !strings.Contains(err.Error(), bc.fails)) {
					b.Fatalf("%s: %v", bc.name, err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*perRowRows), "ns/row")
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*perRowRows), "cpu-ns/row")
		})
	}
}
