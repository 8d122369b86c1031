package sqlite_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/internal/sqlite/diskfull"
	"github.com/dpsql/dpsql/internal/sqlite/linked"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// batchVFS registers the batch VFS over the SQLite go-sqlite3 links.
func batchVFS(t testing.TB) {
	t.Helper()
	api, err := linked.API()
	if err == nil {
		err = sqlite.SetAPI(api)
	}
	if err == nil {
		err = sqlite.RegisterBatchVFS()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// newFile makes an empty WAL-mode database of the given page size.
func newFile(t testing.TB, pageSize int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{fmt.Sprintf("PRAGMA page_size = %d", pageSize), "PRAGMA journal_mode = WAL", "CREATE TABLE t(id INTEGER PRIMARY KEY, x BLOB)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func openDB(t testing.TB, path, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&"+params)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// row is the content of row i: its number in its first bytes, 3 KB long.
func row(i int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, 3000)
	copy(b, strconv.Itoa(i))
	return b
}

// check reads rows 1..n from db and fails unless each is row(i).
func check(t *testing.T, db *sql.DB, n int, who string) {
	t.Helper()
	rows, err := db.Query(`SELECT id, x FROM t ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var id int
		var x []byte
		if err := rows.Scan(&id, &x); err != nil {
			t.Fatal(err)
		}
		i++
		if id != i || !bytes.Equal(x, row(i)) {
			t.Fatalf("%s: row %d (id %d) is not what was written", who, i, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("%s: %d rows, want %d", who, i, n)
	}
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("%s: integrity_check %q, %v", who, ok, err)
	}
}

// What one connection writes through the batch VFS, in a file of 4 KiB
// pages (a frame per row), is what every other connection reads, through
// it or not, whatever the synchronous setting: none while the transaction
// is open, all of it once it commits (the frames reach the -wal file before
// the wal-index publishes them), and the same again after a checkpoint
// through the VFS copied them into the database file and a connection reads
// them from there (its read ahead forgotten between transactions).
func TestBatchVFSReadersSeeWhatWasWritten(t *testing.T) {
	batchVFS(t)
	for _, sync := range []string{"OFF", "NORMAL", "FULL"} {
		t.Run(sync, func(t *testing.T) {
			path := newFile(t, 4096)
			w := openDB(t, path, "_synchronous="+sync+"&vfs="+sqlite.BatchVFS)
			plain := openDB(t, path, "")
			shimmed := openDB(t, path, "vfs="+sqlite.BatchVFS)
			n := 0
			for round := 0; round < 3; round++ {
				tx, err := w.Begin()
				if err != nil {
					t.Fatal(err)
				}
				for range 700 {
					n++
					if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, n, row(n)); err != nil {
						t.Fatal(err)
					}
				}
				// The open transaction has spilled frames to the -wal file:
				// nobody else sees them.
				check(t, plain, n-700, "plain reader during the write")
				check(t, shimmed, n-700, "batch reader during the write")
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				check(t, plain, n, "plain reader")
				check(t, shimmed, n, "batch reader")
				check(t, w, n, "writer")
			}
			// Another connection changes rows the batch reader has read
			// ahead; it sees the change in its next transaction.
			if _, err := plain.Exec(`UPDATE t SET x = ? WHERE id = 5`, row(5)); err != nil {
				t.Fatal(err)
			}
			for _, db := range []*sql.DB{w, shimmed} {
				var busy, frames, copied int
				if err := db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil || busy != 0 || copied != frames {
					t.Fatalf("checkpoint: busy %d, %d of %d frames copied, %v", busy, copied, frames, err)
				}
			}
			check(t, plain, n, "plain reader after the checkpoint")
			check(t, shimmed, n, "batch reader after the checkpoint")
			if _, err := plain.Exec(`UPDATE t SET x = x || 'z' WHERE id = 5`); err != nil {
				t.Fatal(err)
			}
			var last byte
			var x []byte
			if err := shimmed.QueryRow(`SELECT x FROM t WHERE id = 5`).Scan(&x); err != nil || len(x) != 3001 {
				t.Fatalf("the batch reader read row 5 as %d bytes (%v) after another connection grew it", len(x), err)
			}
			last = x[len(x)-1]
			if last != 'z' {
				t.Fatalf("the batch reader read a stale row 5")
			}
		})
	}
}

// A process killed while it writes through the batch VFS (synchronous FULL,
// as the ledger's, and NORMAL, as ext's own connections), checkpointing as it
// goes, loses nothing it committed and leaves the file intact: a commit's
// frames reach the file before SQLite publishes or syncs them.
func TestBatchVFSKilledWriterKeepsCommits(t *testing.T) {
	if path := os.Getenv("DPSQL_BATCHVFS_WRITER"); path != "" {
		batchVFS(t)
		db := openDB(t, path, "_synchronous="+os.Getenv("DPSQL_BATCHVFS_SYNC")+"&vfs="+sqlite.BatchVFS)
		for n := 1; ; n++ {
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				id := (n-1)*50 + i + 1
				if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, id, row(id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%d\n", n*50) // committed
			os.Stdout.Sync()
		}
	}
	for _, sync := range []string{"FULL", "NORMAL"} {
		t.Run(sync, func(t *testing.T) {
			path := newFile(t, 4096)
			cmd := exec.Command(os.Args[0], "-test.run", "^TestBatchVFSKilledWriterKeepsCommits$")
			cmd.Env = append(os.Environ(), "DPSQL_BATCHVFS_WRITER="+path, "DPSQL_BATCHVFS_SYNC="+sync)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(700 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			committed := 0
			for _, f := range bytes.Fields(out.Bytes()) {
				if n, err := strconv.Atoi(string(f)); err == nil {
					committed = n
				}
			}
			if committed == 0 {
				t.Skipf("the writer committed nothing in its time (output %q)", out.String())
			}
			db := openDB(t, path, "")
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n < committed || n%50 != 0 {
				t.Fatalf("%d rows after the kill, %d reported committed (commits of 50)", n, committed)
			}
			check(t, db, n, "after the kill")
		})
	}
}

// BenchmarkBatchVFS writes and commits 60,000 rows of 3,176 bytes (a
// Fashion-MNIST release) in one transaction, as the ledger does (WAL,
// synchronous FULL, no reader: the commit's automatic checkpoint copies it
// all), through the default VFS and the batch VFS, into files of 4 KiB and
// 64 KiB pages:
//
//	go test ./internal/sqlite -run '^$' -bench BatchVFS -benchtime 3x
func BenchmarkBatchVFS(b *testing.B) {
	batchVFS(b)
	x, y := make([]byte, 3136), make([]byte, 40)
	for _, ps := range []int{4096, 65536} {
		for _, vfs := range []string{"unix", sqlite.BatchVFS} {
			b.Run(fmt.Sprintf("page=%d/vfs=%s", ps, vfs), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					path := newFile(b, ps)
					db, err := sql.Open("sqlite3", "file:"+path+"?_synchronous=FULL&_txlock=immediate&vfs="+vfs)
					if err != nil {
						b.Fatal(err)
					}
					db.SetMaxOpenConns(1)
					b.StartTimer()
					tx, err := db.Begin()
					if err != nil {
						b.Fatal(err)
					}
					tx.Exec(`CREATE TABLE rel(id INTEGER PRIMARY KEY, x BLOB NOT NULL, y BLOB NOT NULL)`)
					st, _ := tx.Prepare(`INSERT INTO rel VALUES (?, ?, ?)`)
					for i := range 60000 {
						if _, err := st.Exec(int64(i+1), x, y); err != nil {
							b.Fatal(err)
						}
					}
					st.Close()
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					db.Close()
					b.StartTimer()
				}
			})
		}
	}
}

// fullDisk installs package diskfull's failing writes in the process's
// SQLite (they write everything until diskfull.Fill) and lifts any limit when
// the test ends.
func fullDisk(t *testing.T) {
	t.Helper()
	if err := diskfull.Install(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(diskfull.Empty)
}

// insert commits rows from..to of t in one transaction on db.
func insert(t *testing.T, db *sql.DB, from, to int) error {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i <= to; i++ {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, i, row(i)); err != nil {
			t.Fatal(err)
		}
	}
	return tx.Commit()
}

func isFull(err error) bool {
	var e sqlite3.Error
	return errors.As(err, &e) && (e.Code == sqlite3.ErrFull || e.Code == sqlite3.ErrIoErr)
}

// A commit whose frames cannot be written (the disk is full) fails with
// SQLITE_FULL at every synchronous setting, and nothing of it is seen, by the
// writer or anyone else; the write lock is released (another connection
// writes while the disk is still full, until its own commit fails), and once
// there is room again the file takes new commits and keeps every earlier one.
// The commit is small (its frames fit in one gathered write, flushed only when
// the commit is published): a shim that wrote them at the wal-index barrier,
// where SQLite cannot hear of a failure, reported the commit as made while its
// frames were not in the file.
func TestBatchVFSDiskFullCommitFails(t *testing.T) {
	batchVFS(t)
	fullDisk(t)
	for _, sync := range []string{"OFF", "NORMAL", "FULL"} {
		t.Run(sync, func(t *testing.T) {
			path := newFile(t, 4096)
			w := openDB(t, path, "_synchronous="+sync+"&vfs="+sqlite.BatchVFS)
			plain := openDB(t, path, "_busy_timeout=200")
			if err := insert(t, w, 1, 20); err != nil {
				t.Fatal(err)
			}
			for _, room := range []int64{0, 5000, 30000} {
				diskfull.Fill(room)
				err := insert(t, w, 21, 30)
				if !isFull(err) {
					diskfull.Empty()
					t.Fatalf("room %d: a commit that could not be written returned %v, want SQLITE_FULL", room, err)
				}
				// Still full: the writer's locks are released.
				if _, err := plain.Exec(`BEGIN IMMEDIATE; ROLLBACK`); err != nil {
					diskfull.Empty()
					t.Fatalf("room %d: after the failed commit another connection cannot take the write lock: %v", room, err)
				}
				diskfull.Empty()
				check(t, w, 20, "the writer after its failed commit")
				check(t, plain, 20, "another connection after the failed commit")
			}
			if err := insert(t, w, 21, 40); err != nil {
				t.Fatal(err)
			}
			check(t, plain, 40, "another connection after the disk had room again")
			check(t, w, 40, "the writer after the disk had room again")
		})
	}
}

// A checkpoint that cannot write the database file (the disk is full) fails
// and records nothing as copied, when it copies only part of the WAL (a reader
// holds the rest): SQLite records a partial checkpoint's frames as copied
// right after the copy, with no sync in between (3.54), so a page the shim
// held back and could not write was lost to every reader that came after.
func TestBatchVFSDiskFullCheckpoint(t *testing.T) {
	batchVFS(t)
	fullDisk(t)
	for _, sync := range []string{"NORMAL", "FULL"} {
		t.Run(sync, func(t *testing.T) {
			path := newFile(t, 4096)
			w := openDB(t, path, "_synchronous="+sync+"&vfs="+sqlite.BatchVFS)
			w.Exec(`PRAGMA wal_autocheckpoint = 0`)
			plain := openDB(t, path, "")
			if err := insert(t, w, 1, 10); err != nil {
				t.Fatal(err)
			}
			// A reader of the first ten rows keeps their frames and those
			// after them from being copied: the checkpoint below copies the
			// first commit's frames only.
			r := openDB(t, path, "")
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tx.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 10 {
				t.Fatalf("reader: %d rows, %v", n, err)
			}
			if err := insert(t, w, 11, 20); err != nil {
				t.Fatal(err)
			}
			diskfull.Fill(0)
			var busy, frames, copied int
			err = w.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
			diskfull.Empty()
			if err == nil && copied > 0 {
				t.Errorf("a checkpoint that could not write the database file says it copied %d of %d frames", copied, frames)
			}
			tx.Rollback()
			check(t, plain, 20, "a reader after the failed checkpoint")
			if err := w.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied); err != nil || busy != 0 {
				t.Fatalf("checkpoint with room: busy %d, %v", busy, err)
			}
			check(t, plain, 20, "a reader after the WAL was copied and emptied")
		})
	}
}

// payload is the content of row id at version ver of table v.
func payload(id, ver int) []byte {
	b := bytes.Repeat([]byte{byte(id*7 + ver)}, 3000)
	copy(b, fmt.Sprintf("%d:%d:", id, ver))
	return b
}

// consistent reads table v and its summary in one transaction and says what
// disagrees: the summary's row count and version sum, and every row's content
// (its id and version) when all is set, and that the state is no older than
// atLeast rows.
func consistent(db *sql.DB, all bool, atLeast int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n, sum, count, vsum int
	if err := tx.QueryRow(`SELECT n, sumver FROM meta`).Scan(&n, &sum); err != nil {
		return err
	}
	if err := tx.QueryRow(`SELECT count(*), coalesce(sum(ver), 0) FROM v`).Scan(&count, &vsum); err != nil {
		return err
	}
	if n != count || sum != vsum {
		return fmt.Errorf("the summary says %d rows of version sum %d, the table has %d of %d", n, sum, count, vsum)
	}
	if n < atLeast {
		return fmt.Errorf("%d rows, but the writer had committed %d before the read began (a stale state)", n, atLeast)
	}
	if !all {
		return nil
	}
	rows, err := tx.Query(`SELECT id, ver, x FROM v`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, ver int
		var x []byte
		if err := rows.Scan(&id, &ver, &x); err != nil {
			return err
		}
		if !bytes.Equal(x, payload(id, ver)) {
			return fmt.Errorf("row %d (version %d) holds other bytes", id, ver)
		}
	}
	return rows.Err()
}

// A writer in another process, through the batch VFS (synchronous NORMAL; in
// WAL mode, checkpoints every 64 pages, most of them partial, since readers
// come and go; also in rollback-journal mode, where the writer rewrites the
// database file between two reads), and readers here, through the batch VFS, the default VFS and the
// sqlite3 shell when there is one: every read transaction sees a state some
// commit left (the summary row agrees with the table, every row's bytes are
// those of its version), although the writer rewrites pages others have read
// ahead and a checkpoint copies pages into the database file while they read.
func TestBatchVFSTwoProcesses(t *testing.T) {
	if path := os.Getenv("DPSQL_BATCHVFS_TWOPROC"); path != "" {
		batchVFS(t)
		db := openDB(t, path, "_synchronous=NORMAL&vfs="+sqlite.BatchVFS)
		if _, err := db.Exec(`PRAGMA wal_autocheckpoint = 64`); err != nil {
			t.Fatal(err)
		}
		n, ver := 0, map[int]int{}
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && n < 5000; {
			time.Sleep(2 * time.Millisecond)
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for range 10 {
				n++
				if _, err := tx.Exec(`INSERT INTO v VALUES (?, 0, ?)`, n, payload(n, 0)); err != nil {
					t.Fatal(err)
				}
			}
			for k := range 3 {
				id := 1 + (n*31+k*17)%n
				ver[id]++
				if _, err := tx.Exec(`UPDATE v SET ver = ?, x = ? WHERE id = ?`, ver[id], payload(id, ver[id]), id); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tx.Exec(`UPDATE meta SET n = n + 10, sumver = sumver + 3`); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%d\n", n) // committed
			os.Stdout.Sync()
		}
		return
	}
	for _, mode := range []string{"WAL", "DELETE"} {
		t.Run(mode, func(t *testing.T) {
			path := newFile(t, 4096)
			setup := openDB(t, path, "")
			for _, q := range []string{`CREATE TABLE v(id INTEGER PRIMARY KEY, ver INTEGER NOT NULL, x BLOB NOT NULL)`,
				`CREATE TABLE meta(n INTEGER NOT NULL, sumver INTEGER NOT NULL)`, `INSERT INTO meta VALUES (0, 0)`,
				`PRAGMA journal_mode = ` + mode} {
				if _, err := setup.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			batchVFS(t)
			cmd := exec.Command(os.Args[0], "-test.run", "^TestBatchVFSTwoProcesses$")
			cmd.Env = append(os.Environ(), "DPSQL_BATCHVFS_TWOPROC="+path)
			var out bytes.Buffer
			cmd.Stderr = &out
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var committed atomic.Int64 // the last commit the writer reported
			done := make(chan error, 1)
			go func() {
				lines := bufio.NewScanner(pipe)
				for lines.Scan() {
					if n, err := strconv.Atoi(lines.Text()); err == nil {
						committed.Store(int64(n))
					} else {
						out.WriteString(lines.Text() + "\n")
					}
				}
				done <- cmd.Wait()
			}()
			readers := map[string]*sql.DB{
				"batch reader": openDB(t, path, "vfs="+sqlite.BatchVFS),
				"plain reader": openDB(t, path, ""),
			}
			shell, _ := exec.LookPath("sqlite3")
			reads := 0
			for running := true; running; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("the writer: %v\n%s", err, out.String())
					}
					running = false
				default:
				}
				for who, db := range readers {
					if err := consistent(db, reads%4 == 0, int(committed.Load())); err != nil {
						t.Fatalf("%s, read %d: %v", who, reads, err)
					}
				}
				if shell != "" && reads%3 == 0 {
					least := committed.Load()
					got, err := exec.Command(shell, "-cmd", ".timeout 5000", path, fmt.Sprintf(`SELECT (SELECT n FROM meta) = count(*) AND (SELECT sumver FROM meta) = coalesce(sum(ver), 0) AND count(*) >= %d FROM v`, least)).CombinedOutput()
					if err != nil || string(bytes.TrimSpace(got)) != "1" {
						t.Fatalf("the sqlite3 shell, read %d: %q, %v", reads, got, err)
					}
				}
				reads++
			}
			var n int
			if err := setup.QueryRow(`SELECT n FROM meta`).Scan(&n); err != nil || n == 0 {
				t.Fatalf("the writer committed nothing (%d rows, %v)", n, err)
			}
			for who, db := range readers {
				if err := consistent(db, true, int(committed.Load())); err != nil {
					t.Fatalf("%s after the writer ended: %v", who, err)
				}
			}
			var ok string
			if err := setup.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
				t.Fatalf("integrity_check %q, %v", ok, err)
			}
			t.Logf("%d rows written, %d reads (sqlite3 shell: %q)", n, reads, shell)
		})
	}
}
