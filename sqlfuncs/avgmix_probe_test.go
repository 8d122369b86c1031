package sqlfuncs_test

import (
	"context"
	"database/sql"
	"fmt"
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
