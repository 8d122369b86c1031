package ext

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
)

// PageSize is the page size of the database files [Open] creates: 65536
// bytes, SQLite's largest. The size of a file is fixed when it is created (a
// WAL file cannot change it), so files created by other tools keep theirs.
//
// dpsql's files hold tables that DP statements scan whole and releases that
// are written whole, and every page costs system calls: two writes to the
// WAL and a read and a write at the checkpoint. SQLite's default, 4096
// bytes, held one 784-float row (3.2 KB) a page, so a Fashion-MNIST
// dp_avgmix release wrote 60,000 pages; 16384-byte pages held five. At 64
// KiB a 188 MB release is 2,900 pages, fewer than one interior page's
// children, so the table's root never splits during the write either: at
// 16 KiB it did, and SQLite, which rewrites a spilled page in place when it
// changes again, re-read and re-checksummed 10,000 of the release's 12,000
// WAL frames at commit (0.1 s). The release ran 0.2-0.35 s faster end to
// end (1.53-1.86 s against 1.76-2.06 s, four alternating pairs). The price
// is paid by small transactions, which write each page they change whole:
// a dp_gaussian charge (its ledger row and scope state, fsync'd) took 13%
// longer on average (0.95-1.50 ms against 0.92-1.33 ms, six alternating
// runs of `go test ./sqlfuncs -run '^$' -bench 'Charge$' -benchtime
// 2000x`), and 3000 charges in one dpsql query statement 40% longer (1.3
// ms a charge against 0.95 ms); a fraction of a millisecond that a
// budget-limited workload of charges does not notice. The -wal file of a
// file open to charges grows to SQLite's 1000-page checkpoint threshold,
// 64 MB instead of 16 MB, until the last connection closes (docs/benchmarks.md
// has the figures and their commands).
const PageSize = 65536

// prepareFile creates an empty database file at path with [PageSize] pages
// in WAL mode, unless a file is there already (an empty one counts as
// absent: SQLite treats it as a new database).
func prepareFile(path string) error {
	if path == "" || path == ":memory:" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.Size() > 0 || err != nil && !os.IsNotExist(err) {
		return nil // an existing file, or one the real open will report on
	}
	// The plain driver, without the WAL parameter: journal_mode = WAL on a new
	// file writes its header, so the page size must come first.
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA page_size = %d`, PageSize)); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := db.Exec(`PRAGMA journal_mode = WAL`); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}
