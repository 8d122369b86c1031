package ext

import (
	"os"
	"strconv"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"golang.org/x/sys/unix"
)

// bigWAL is the size of a -wal file from which a closing connection
// checkpoints it itself (checkpointBeforeClose) instead of leaving the copy to
// SQLite's close.
const bigWAL = 8 << 20

// syncEvery is how often the database file is made durable while a
// checkpoint copies a large WAL into it.
const syncEvery = 10 * time.Millisecond

// checkpointBeforeClose runs the checkpoint that closing the last connection
// to a file would run, while making the database file durable as SQLite copies
// the WAL into it, so that the checkpoint's own fsync finds little left to
// write.
//
// When a release has left a large WAL (188 MB for dp_avgmix on
// Fashion-MNIST's shape), SQLite's checkpoint on close copies it into the
// database through the page cache and then fsyncs the database, which waits
// for all of it (0.13-0.15 s on the project's machine, of a 0.4 s close). Here
// a goroutine runs fdatasync on the database file every syncEvery while the
// copy runs. It changes nothing SQLite relies on: the checkpoint is SQLite's
// own PASSIVE one (it waits for no lock and copies only frames no reader still
// needs), which, when it copies every frame, fsyncs the database before it
// records them as copied, and the WAL is reset or deleted only after that
// (SQLite's own sync keeps the frames durable); an fsync more, early, only
// makes pages durable sooner, and a database page written by a checkpoint
// that does not finish is rewritten from the WAL, which is still there, by the
// next one. The close then finds the WAL copied and only removes it.
//
// It needs a descriptor of the database file, and must not open one: closing
// any descriptor of a file releases every POSIX lock the process holds on it,
// SQLite's included, which would let another process take the file's
// exclusive lock and delete the WAL under this one. So it borrows one of
// SQLite's own (sqliteFD) and never closes it. If it belongs to another
// connection that closes meanwhile, the worst case is an fdatasync of
// whatever file reuses the number, or EBADF.
//
// It does nothing for a small WAL, inside a transaction, or for a file it
// cannot find among the process's descriptors; errors are ignored, since the
// close checkpoints anyway.
func checkpointBeforeClose(c *sqlite3.SQLiteConn) {
	path := c.GetFilename("main")
	if path == "" || !c.AutoCommit() {
		return
	}
	if st, err := os.Stat(path + "-wal"); err != nil || st.Size() < bigWAL {
		return
	}
	fd, ok := sqliteFD(path)
	if !ok {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(syncEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = unix.Fdatasync(fd)
			}
		}
	}()
	if checkpointStarted != nil {
		checkpointStarted()
	}
	// Through the file's ledger connection when this process has one open
	// (its batch VFS reads the -wal file ahead: at 4 KiB pages, 60,000 reads
	// become a few hundred), else through c.
	if db := ledgerDB(path); db == nil || checkpointThrough(path, db) != nil {
		_, _ = c.Exec(`PRAGMA wal_checkpoint(PASSIVE)`, nil)
	}
	close(stop)
	<-done
}

// sqliteFD returns a descriptor this process has open on the file at path
// (the same device and inode), without opening one; SQLite holds one for
// every connection to it.
func sqliteFD(path string) (int, bool) {
	var want unix.Stat_t
	if err := unix.Stat(path, &want); err != nil {
		return 0, false
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Dev == want.Dev && st.Ino == want.Ino {
			return fd, true
		}
	}
	return 0, false
}
