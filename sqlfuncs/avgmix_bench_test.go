package sqlfuncs_test

import (
	"database/sql"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
	"github.com/dpsql/dpsql/vector"
)

// BenchmarkAvgmixSQL is dp_avgmix end to end on the Fashion-MNIST shape
// (n = T = 60000, d = 784, K = 10, m = 64): read the blobs, mix, add noise and
// write the release table, ledger charge included. The data is generated.
func BenchmarkAvgmixSQL(b *testing.B) {
	const n, d, k = 60000, 784, 10
	db := openDB(b, `SELECT dp_init(1e6)`)
	fashionShaped(b, db, n, d, k)
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

// BenchmarkAvgmixFreshDB is dp_avgmix end to end as a new dpsql process meets
// it: each iteration opens a fresh copy of a database holding the
// Fashion-MNIST-shaped table (generated data, n = T = 60000, d = 784, K = 10,
// m = 64, mu = 1), forgets every calibration this process made, runs the
// statement (read, plan, charge, mix, noise, write, commit) and closes the
// database (the checkpoint). "first" is the file's first release, which
// calibrates; "cached" finds the calibration in the file and only verifies
// it. Copying the file is not timed.
func BenchmarkAvgmixFreshDB(b *testing.B) {
	const n, d, k = 60000, 784, 10
	dir := b.TempDir()
	template := filepath.Join(dir, "template.db")
	db, err := ext.Open(template)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`SELECT dp_init(1e6)`); err != nil {
		b.Fatal(err)
	}
	fashionShaped(b, db, n, d, k)
	db.Close()
	const query = `SELECT dp_avgmix(features, label, json_object('n', 60000, 'into', 'rel', 'mu', 1.0, 'm', 64, 'classes', 10)) FROM train`
	run := func(b *testing.B, path string) {
		sqlfuncs.ResetCalibrationMemo()
		db, err := ext.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var out string
		if err := db.QueryRow(query).Scan(&out); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	copyTo := func(b *testing.B, dst string) {
		for _, suffix := range []string{"-wal", "-shm"} {
			os.Remove(dst + suffix)
		}
		if err := copyFile(template, dst); err != nil {
			b.Fatal(err)
		}
	}
	work := filepath.Join(dir, "work.db")
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			copyTo(b, work)
			b.StartTimer()
			run(b, work)
		}
	})
	// A template whose file already holds the calibration.
	copyTo(b, work)
	run(b, work)
	cached := filepath.Join(dir, "cached.db")
	if db, err = ext.Open(work); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE rel; VACUUM INTO '` + cached + `'`); err != nil {
		b.Fatal(err)
	}
	db.Close()
	template = cached
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			copyTo(b, work)
			b.StartTimer()
			run(b, work)
		}
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fashionShaped creates the table train(features BLOB, label INTEGER) of n
// generated rows shaped like Fashion-MNIST: d pixel-like values in [0, 1]
// and labels 0..k-1.
func fashionShaped(b *testing.B, db *sql.DB, n, d, k int) {
	b.Helper()
	if _, err := db.Exec(`CREATE TABLE train(features BLOB, label INTEGER)`); err != nil {
		b.Fatal(err)
	}
	tx, _ := db.Begin()
	ins, _ := tx.Prepare(`INSERT INTO train VALUES (?, ?)`)
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, d)
	for i := 0; i < n; i++ {
		for j := range x {
			x[j] = float32(r.IntN(256)) / 255
		}
		if _, err := ins.Exec(vector.Encode(x), i%k); err != nil {
			b.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
