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

// TestAnalystInterruptKeepsCharge interrupts a DP statement of an analyst
// session (dpsql query --analyst) while it reads: it was accepted and
// charged before its read started, so the interrupt stops it but the charge
// stands, exactly once, and the message says so.
func TestAnalystInterruptKeepsCharge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clinic.db")
	mustRun(t, "init", path, "--mu", "2", "--scope", "analyst")
	mustRun(t, "query", path, `CREATE TABLE patients(pid, sex, age);
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 500000)
		INSERT INTO patients SELECT i, CASE i % 2 WHEN 0 THEN 'F' ELSE 'M' END, 10 + i % 70 FROM s`)
	mustRun(t, "protect", path, "patients", "--privacy-unit", "pid", "--max-groups", "2", "--max-rows", "1")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	charges := func() int {
		var n int
		if err := owner.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Ctrl-C once the charge shows in the ledger
		for ctx.Err() == nil && charges() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	code := m.Exec(ctx, []string{"query", "--analyst", "--scope", "analyst", path,
		"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, COUNT(*) AS n FROM patients GROUP BY sex"})
	if code != 1 || !strings.Contains(errb.String(), "keeps its charge") {
		t.Errorf("interrupted analyst statement: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if n := charges(); n != 1 {
		t.Errorf("%d charges, want exactly 1", n)
	}
}
