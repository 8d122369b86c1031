package ext

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// dbSize returns the size of the database file itself (not its WAL): what a
// checkpoint has copied into it. (PRAGMA wal_checkpoint(NOOP), which reports
// frames without copying them, is unknown to the system SQLite 3.40 of the
// libsqlite3 build, which runs a PASSIVE checkpoint instead.)
func dbSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestCheckpointBeforeClose checks when a closing connection checkpoints the
// WAL itself: a WAL of at least bigWAL is copied into the database before
// SQLite's close (the writeback hook runs and every frame is copied while
// the connection is still open), through a descriptor SQLite already holds
// (sqliteFD finds one with the file's inode); a small WAL, or a connection
// inside a transaction, is left to the close.
func TestCheckpointBeforeClose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   int // of 4 KB
		inTx   bool
		wantCk bool
	}{
		{"large WAL", 3000, false, true}, // 12 MB
		{"small WAL", 200, false, false},
		{"in a transaction", 3000, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			db, err := Open(path) // a new file: WAL mode
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, q := range []string{`PRAGMA wal_autocheckpoint = 0`, `CREATE TABLE t(b BLOB)`, `BEGIN`} {
				if _, err := c.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			blob := make([]byte, 4096)
			for i := range tc.rows {
				blob[0] = byte(i)
				if _, err := c.ExecContext(ctx, `INSERT INTO t VALUES (?)`, blob); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.ExecContext(ctx, `COMMIT`); err != nil {
				t.Fatal(err)
			}
			if tc.inTx {
				if _, err := c.ExecContext(ctx, `BEGIN; SELECT count(*) FROM t`); err != nil {
					t.Fatal(err)
				}
			}
			fd, ok := sqliteFD(path)
			if !ok {
				t.Fatal("sqliteFD found no descriptor of an open database")
			}
			var st, want unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || unix.Stat(path, &want) != nil || st.Ino != want.Ino {
				t.Fatalf("sqliteFD returned descriptor %d, not one of %s (%v)", fd, path, err)
			}
			if _, ok := sqliteFD(filepath.Join(t.TempDir(), "other.db")); ok {
				t.Error("sqliteFD found a descriptor of a file that does not exist")
			}
			size0 := dbSize(t, path)
			if wal := dbSize(t, path+"-wal"); wal < int64(tc.rows)*4096 || size0 > 1<<20 {
				t.Fatalf("before: database %d bytes, WAL %d bytes; want the table still in the WAL", size0, wal)
			}
			started := 0
			checkpointStarted = func() { started++ }
			defer func() { checkpointStarted = nil }()
			if err := c.Raw(func(dc any) error {
				checkpointBeforeClose(dc.(*conn).SQLiteConn)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			size := dbSize(t, path)
			copied := size-size0 >= int64(tc.rows)*4096
			if ran := started == 1 && copied; ran != tc.wantCk {
				t.Errorf("WAL of %d rows of 4 KB: writeback started %d times, database %d -> %d bytes before the close; want a checkpoint: %v", tc.rows, started, size0, size, tc.wantCk)
			}
		})
	}
}

// TestSqliteFDNeverOpens checks that finding SQLite's descriptor opens none:
// the process's descriptors of the file are the same before and after.
func TestSqliteFDNeverOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	db, err := sql.Open(DriverName, DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == path {
				n++
			}
		}
		return n
	}
	before := count()
	if _, ok := sqliteFD(path); !ok || count() != before || before == 0 {
		t.Errorf("descriptors of the file: %d before, %d after, found: %v", before, count(), ok)
	}
}
