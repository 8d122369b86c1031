package sqlfuncs_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/sqlfuncs"
)

// queryWithin runs the one-row query q and returns its text column, and
// panics, printing every goroutine, if it has not returned after limit: a
// release that deadlocked cannot be stopped or closed, so the test binary
// must end with the stacks that show where.
func queryWithin(ctx context.Context, db *sql.DB, q string, limit time.Duration) (string, error) {
	type result struct {
		out string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		r.err = db.QueryRowContext(ctx, q).Scan(&r.out)
		ch <- r
	}()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-time.After(limit):
		panic(fmt.Sprintf("%s: no answer after %v (deadlocked?)", q, limit))
	}
}

// TestAvgmixWithProbedInterrupts runs dp_avgmix, and interrupts it, with the
// interrupt found as a SQLite before 3.41 finds it (Debian 12's 3.40 in the
// libsqlite3 build and under dp0): through a probe statement on the query's
// connection, which only the statement's own thread may run. dp_avgmix's
// workers write the release themselves; when they ran the probe, it waited
// for the connection's mutex, held by the statement that waited for them,
// and the release hung at its 1024th row.
func TestAvgmixWithProbedInterrupts(t *testing.T) {
	sqlfuncs.ProbeOnly(true)
	defer sqlfuncs.ProbeOnly(false)
	if sqlfuncs.CanPollInterrupts() {
		t.Fatal("ProbeOnly(true) did not take effect")
	}
	db := openDB(t, `SELECT dp_init(3)`)
	fillTrain(t, db, "train", 3000, 6, 3)
	out, err := queryWithin(context.Background(), db, `SELECT dp_avgmix(features, label, json_object('n', 3000, 'classes', 3, 'into', 'released', 'mu', 1.0, 'T', 3000)) FROM train`, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM released`).Scan(&n)
	if n != 3000 || ledgerRows(t, db) != 1 {
		t.Fatalf("released %d rows with %d charges (%s), want 3000 with 1", n, ledgerRows(t, db), out)
	}

	if testing.Short() {
		return
	}
	// Interrupted while the workers write: nothing released, nothing charged.
	fillTrain(t, db, "big", 20000, 256, 10)
	for _, delay := range []time.Duration{5 * time.Millisecond, 150 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), delay)
		start := time.Now()
		_, err := queryWithin(ctx, db, `SELECT dp_avgmix(features, label, json_object('n', 20000, 'classes', 10, 'into', 'rel', 'mu', 1.0)) FROM big`, time.Minute)
		cancel()
		if err == nil {
			t.Fatalf("release finished within %v; make the table larger", delay)
		}
		t.Logf("interrupted after %v: returned after %v: %v", delay, time.Since(start), err)
		if n := ledgerRows(t, db); n != 1 {
			t.Fatalf("interrupted after %v (%v): %d charges, want the first release's 1", delay, err, n)
		}
		var tables int
		db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'rel'`).Scan(&tables)
		if tables != 0 {
			t.Fatalf("interrupted after %v: the release table exists", delay)
		}
	}
}

// TestAvgmixEmitPanicStack: a panic while dp_avgmix writes its release (here
// in the progress callback an embedding program installed) fails the
// statement, charges nothing, and the "please report" error shows where it
// happened. The release is written from avgmix's workers, and the panic
// re-raised on the statement's goroutine, whose stack (the one the SQL
// boundary's recover used to print) no longer shows the panic's site; with
// the SQLite before 3.41 path, re-raised once more.
func TestAvgmixEmitPanicStack(t *testing.T) {
	for _, probe := range []bool{false, true} {
		t.Run(fmt.Sprint("probe only ", probe), func(t *testing.T) {
			sqlfuncs.ProbeOnly(probe)
			defer sqlfuncs.ProbeOnly(false)
			db := openDB(t, `SELECT dp_init(100)`)
			fillTrain(t, db, "train", 2000, 4, 2)
			sqlfuncs.SetProgress(func(fn string, done, total int) {
				if done < total {
					panic("progress callback panicked")
				}
			})
			defer sqlfuncs.SetProgress(nil)
			_, err := queryWithin(context.Background(), db, `SELECT dp_avgmix(features, label, json_object('classes', 2, 'into', 'r', 'T', 5000, 'm', 16, 'mu', 1.0, 'n', 2000)) FROM train`, time.Minute)
			if err == nil {
				t.Fatal("dp_avgmix succeeded although its progress callback panicked")
			}
			msg := err.Error()
			if !strings.Contains(msg, "internal error (please report): progress callback panicked") ||
				!strings.Contains(msg, "TestAvgmixEmitPanicStack.func1.1") {
				t.Errorf("the error does not show the panic's site:\n%s", msg)
			}
			if n := ledgerRows(t, db); n != 0 {
				t.Errorf("the failed release left %d ledger rows", n)
			}
		})
	}
}
