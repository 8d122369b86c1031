package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpsql/dpsql/ext"
)

// releaseTable writes a table train of n rows of d-dimensional random
// features and labels 0..9 into a database with a budget of mu = 100, and
// returns the path.
func releaseTable(tb testing.TB, n, d int) string {
	path := filepath.Join(tb.TempDir(), "release.db")
	db, err := ext.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`SELECT dp_init(100)`); err != nil {
		tb.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`CREATE TABLE train(id INTEGER PRIMARY KEY, features BLOB, label INTEGER)`); err != nil {
		tb.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO train(features, label) VALUES (?, ?)`)
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4*d)
	for i := range n {
		for j := range d {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(float32(r.Float64())))
		}
		if _, err := ins.Exec(buf, i%10); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return path
}

func releaseQuery(into string) string {
	return `SELECT dp_avgmix(features, label, json_object('into', '` + into + `', 'n', 40000, 'mu', 1.0, 'm', 64, 'classes', 10)) FROM train`
}

// TestInterruptRelease interrupts a dp_avgmix release while it writes its
// table (at its first progress report, as Ctrl-C would): the release stops
// there instead of writing on to the end, and nothing is charged or left.
func TestInterruptRelease(t *testing.T) {
	const n = 40000 // 9 progress reports of 4096 rows when not interrupted
	db := releaseTable(t, n, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var statuses []string
	var cancelled time.Time
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Progress: func(string) Task {
		return &statusTask{set: func(s string) {
			mu.Lock()
			defer mu.Unlock()
			statuses = append(statuses, s)
			if cancelled.IsZero() {
				cancelled = time.Now()
				cancel()
			}
		}}
	}}
	code := m.Exec(ctx, []string{"query", db, releaseQuery("rel")})
	mu.Lock()
	stopped := time.Since(cancelled)
	if code != 1 || errb.String() != "dpsql: statement interrupted\n" {
		t.Fatalf("interrupted release: exit %d, stderr %q, progress %q", code, errb.String(), statuses)
	}
	// After the first report an uninterrupted release reports every 4096
	// rows, then its closing n/n: 10 reports. Stopping at once gives 2; a
	// margin of three more (12288 rows) absorbs a busy machine.
	if len(statuses) > 5 {
		t.Errorf("the release wrote on after the interrupt (stopped %v later): progress %q", stopped, statuses)
	}
	mu.Unlock()
	t.Logf("stopped %v after the interrupt", stopped)
	if out := mustRun(t, "query", db, "SELECT count(*) AS n FROM dp_ledger WHERE kind = 'charge'; SELECT count(*) AS n FROM sqlite_schema WHERE name = 'rel'", "-f", "csv"); out != "n\n0\n\nn\n0\n" {
		t.Errorf("after the interrupt: %q, want no charge and no table", out)
	}
}

// BenchmarkInterruptRelease measures how long a dp_avgmix release of
// 20000 x 784 rows takes to stop after its statement is interrupted at a
// random moment of its run (reading, calibration, mixing and writing): ns/op
// and max-ms are the mean and the slowest stop over the runs the interrupt
// stopped (goal: 200 ms). An interrupt that lands after the charge committed
// finds the release paid for and finishing; those runs are counted in
// finished/op, not timed.
func BenchmarkInterruptRelease(b *testing.B) {
	db := releaseTable(b, 20000, 784)
	run := func(ctx context.Context, into string) bool {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
		m.Exec(ctx, []string{"query", db, releaseQuery(into)})
		return strings.Contains(errb.String(), "interrupted")
	}
	start := time.Now()
	run(context.Background(), "full")
	full := time.Since(start)
	r := rand.New(rand.NewPCG(3, 4))
	var total, worst time.Duration
	stopped, finished := 0, 0
	for i := 0; b.Loop(); i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool, 1)
		go func() { done <- run(ctx, "r"+strconv.Itoa(i)) }()
		select {
		case <-done:
			finished++
		case <-time.After(time.Duration(r.Int64N(int64(full)))):
			at := time.Now()
			cancel()
			if !<-done {
				finished++
				break
			}
			d := time.Since(at)
			stopped++
			total += d
			worst = max(worst, d)
		}
		cancel()
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Nanoseconds())/float64(max(stopped, 1)), "ns/op")
	b.ReportMetric(float64(worst.Milliseconds()), "max-ms")
	b.ReportMetric(float64(finished)/float64(b.N), "finished/op")
	b.ReportMetric(full.Seconds(), "release-s")
}
