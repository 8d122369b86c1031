package ext_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/internal/sqlite/diskfull"
)

// A charge or a release whose commit cannot be written (the disk is full, at
// the first byte or part way through the release's frames) is refused with an
// error that says so, and leaves nothing: no charge, no release table, a
// ledger that verifies and a file that passes integrity_check, read by another
// connection as an auditor would; once there is room again the same release
// is charged and written. The ledger's connection and ext's own go through
// the batch VFS, which holds writes back; this is what it must not change.
func TestDiskFullRefusesCleanly(t *testing.T) {
	if err := diskfull.Install(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(diskfull.Empty)
	path := initDB(t, 10)
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	trainTable(t, db, 2000)
	release := `SELECT dp_avgmix(features, label, json_object('n', 2000, 'classes', 2, 'into', 'rel', 'mu', 1.0, 'm', 16)) FROM train`
	// From no room at all up, in steps of 256 KiB, until the release fits:
	// the disk fills at every stage of it, the last ones in its commit.
	var room int64
	for ; room < 64<<20; room += 256 << 10 {
		diskfull.Fill(room)
		errs := map[string]error{}
		if room == 0 { // with room, a charge's few pages fit
			var v sql.NullFloat64
			errs["a charge"] = db.QueryRow(`SELECT dp_gaussian(1.0, 1.0, 0.5)`).Scan(&v)
		}
		var res string
		errs["a release"] = db.QueryRow(release).Scan(&res)
		diskfull.Empty()
		if errs["a release"] == nil {
			break // it fit: charged and written
		}
		for what, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "full") {
				t.Errorf("room %d: %s on a full disk returned %v, want an error that says the disk is full", room, what, err)
			} else if testing.Verbose() {
				t.Logf("room %d: %s: %v", room, what, err)
			}
		}
		checkFile(t, path, 0, false)
	}
	t.Logf("the release fit in %d bytes", room)
	if room == 0 || room >= 64<<20 {
		t.Fatalf("the release fit in %d bytes: the disk never filled part way through it", room)
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM rel`).Scan(&rows); err != nil || rows != 2000 {
		t.Fatalf("the release has %d rows (%v), want 2000", rows, err)
	}
	checkFile(t, path, 1, true)
}
