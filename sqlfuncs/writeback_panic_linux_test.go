package sqlfuncs_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/sqlfuncs"
)

// writebackGoroutines counts the goroutines of WAL writebacks (each holds a
// descriptor of the -wal open).
func writebackGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "sqlite.StartWriteback.func")
}

// TestAvgmixPanicStopsWriteback: a panic inside dp_avgmix's charge (here the
// progress callback an embedding program installed with SetProgress) fails
// the statement through the SQL boundary's recover, charges nothing, and
// must not leave the WAL's writeback running: its goroutine and its
// descriptor of the -wal would live as long as the process.
func TestAvgmixPanicStopsWriteback(t *testing.T) {
	db := openDB(t, `SELECT dp_init(100)`)
	fillTrain(t, db, "train", 2000, 4, 2)
	before, rows := writebackGoroutines(), ledgerRows(t, db)
	sqlfuncs.SetProgress(func(fn string, done, total int) {
		if done == total {
			panic("progress callback panicked")
		}
	})
	defer sqlfuncs.SetProgress(nil)
	var out string
	err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('classes', 2, 'into', 'r', 'T', 100, 'm', 16, 'mu', 1.0, 'n', 2000)) FROM train`).Scan(&out)
	if err == nil {
		t.Fatal("dp_avgmix succeeded although its progress callback panicked")
	}
	if n := ledgerRows(t, db); n != rows {
		t.Errorf("the failed release left %d ledger rows, %d before", n, rows)
	}
	deadline := time.Now().Add(2 * time.Second)
	for writebackGoroutines() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := writebackGoroutines(); n > before {
		t.Errorf("%d WAL writeback goroutines left running after the panic (%d before)", n, before)
	}
}
