package sqlfuncs_test

import (
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// A charge's interrupt watch polls the connection's sqlite3* from a goroutine
// of its own. The function that charged returns right after the watch's stop,
// and the connection may then close (and SQLite free the handle): stop must
// not return while the watch can still read it.
func TestInterruptWatchEndsBeforeStopReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	late, ok := sqlfuncs.WatchesAfterStop(path, 200)
	if !ok {
		t.Fatal("no dpsql connection to the file")
	}
	if late != 0 {
		t.Errorf("%d of 200 watches were still running after their stop returned", late)
	}
}
