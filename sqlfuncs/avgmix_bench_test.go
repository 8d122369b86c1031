package sqlfuncs_test

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/dpsql/dpsql/sqlfuncs"
)

// BenchmarkAvgmixSQL is dp_avgmix end to end on the Fashion-MNIST shape
// (n = T = 60000, d = 784, K = 10, m = 64): read the blobs, mix, add noise and
// write the release table, ledger charge included. The data is generated.
func BenchmarkAvgmixSQL(b *testing.B) {
	const n, d, k = 60000, 784, 10
	db := openDB(b, `SELECT dp_init(1e6)`)
	if _, err := db.Exec(`CREATE TABLE train(features BLOB, label INTEGER)`); err != nil {
		b.Fatal(err)
	}
	tx, _ := db.Begin()
	ins, _ := tx.Prepare(`INSERT INTO train VALUES (?, ?)`)
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, d)
	for i := 0; i < n; i++ {
		for j := range x {
			x[j] = float32(r.IntN(256)) / 255 // pixel-like values in [0, 1]
		}
		if _, err := ins.Exec(sqlfuncs.EncodeVector(x), i%k); err != nil {
			b.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		var out string
		q := `SELECT dp_avgmix(features, label, json_object('n', 60000, 'into', 'rel` + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + `', 'mu', 1.0, 'm', 64, 'classes', 10)) FROM train`
		if err := db.QueryRow(q).Scan(&out); err != nil {
			b.Fatal(err)
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
}
