package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpsql/dpsql/npy"
)

// BenchmarkAvgmixFashionShape releases avgmix on the Fashion-MNIST shape
// (n = T = 60000, d = 784 uint8 pixels scaled by 1/255, K = 10, m = 64,
// mu = 1) from generated data, through dpsql-beam on the in-process prism
// runner (four npy shards) and through the SQL function dp_avgmix on the
// same rows imported into the database, and reports input rows per second
// for each, with the process's CPU seconds per release (the machine is
// shared, so wall time depends on its load). Run with -benchtime 1x: each
// iteration is a whole release.
func BenchmarkAvgmixFashionShape(b *testing.B) {
	const n, d, k, shards = 60000, 784, 10, 4
	dir := b.TempDir()
	path, db := initDB(b, 1000)
	r := rand.New(rand.NewPCG(3, 4))
	var files, labels []string
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(`CREATE TABLE train (id INTEGER PRIMARY KEY, features BLOB NOT NULL, label INTEGER)`); err != nil {
		b.Fatal(err)
	}
	vec := make([]float32, d)
	id := 0
	for s := range shards {
		rows := n / shards
		px := make([]byte, rows*d)
		var lab []byte
		for i := range rows {
			c := r.IntN(k)
			for j := range d {
				px[i*d+j] = byte(r.IntN(256))
				vec[j] = float32(float64(px[i*d+j]) * (1.0 / 255))
			}
			lab = binary.LittleEndian.AppendUint64(lab, uint64(c))
			id++
			if _, err := tx.Exec(`INSERT INTO train VALUES (?, ?, ?)`, id, f32blob(vec...), c); err != nil {
				b.Fatal(err)
			}
		}
		f, l := filepath.Join(dir, fmt.Sprintf("x%d.npy", s)), filepath.Join(dir, fmt.Sprintf("y%d.npy", s))
		if err := os.WriteFile(f, npy.Encode("|u1", []int{rows, d}, px), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(l, npy.Encode("<i8", []int{rows}, lab), 0o644); err != nil {
			b.Fatal(err)
		}
		files, labels = append(files, f), append(labels, l)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	release := 0
	b.Run("beam", func(b *testing.B) {
		start, cpu := time.Now(), cpuSeconds()
		for range b.N {
			release++
			code, _, errs := run(b, nil, "avgmix", "--db", path, "--into", fmt.Sprintf("b%d", release), "--mu", "1",
				"--n", fmt.Sprint(n), "--m", "64", "--classes", fmt.Sprint(k),
				"--npy", strings.Join(files, ","), "--labels", strings.Join(labels, ","))
			if code != 0 {
				b.Fatalf("exit %d: %s", code, errs)
			}
		}
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "rows/s")
		b.ReportMetric((cpuSeconds()-cpu)/float64(b.N), "cpu-s/op")
	})
	b.Run("sql", func(b *testing.B) {
		start, cpu := time.Now(), cpuSeconds()
		for range b.N {
			release++
			var out string
			q := fmt.Sprintf(`SELECT dp_avgmix(features, label, json_object('into', 's%d', 'n', %d, 'mu', 1.0, 'm', 64, 'classes', %d)) FROM train`, release, n, k)
			if err := db.QueryRow(q).Scan(&out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "rows/s")
		b.ReportMetric((cpuSeconds()-cpu)/float64(b.N), "cpu-s/op")
	})
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
