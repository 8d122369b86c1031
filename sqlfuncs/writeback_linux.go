package sqlfuncs

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeback makes a growing file durable as it grows: while a release
// streams 188 MB into the WAL, the kernel would otherwise keep it in the page
// cache until the commit's fsync, which then waits for every byte. Each
// request runs fdatasync on the file, on a goroutine of its own, so the disk
// writes, and flushes its cache, while the release is still being computed;
// the commit's own fsync then finds only the last few megabytes to write.
// (An earlier version only started the writes with
// sync_file_range(SYNC_FILE_RANGE_WRITE): the commit's fsync still took
// 0.15-0.2 s on the project's machine, the disk's cache flush of everything
// written since the last one; fdatasync flushes it as it goes.)
//
// It changes nothing SQLite relies on: the commit still fsyncs the WAL before
// it returns, and frames made durable early without their commit frame are
// ignored by recovery, as any uncommitted frame is. It opens the file
// read-only and holds no lock on it; SQLite locks the database and its -shm
// file, never the -wal, so closing this descriptor releases none of SQLite's
// POSIX locks.
type writeback struct {
	f    *os.File
	kick chan struct{}
	done chan struct{}
	sync func(fd int) error // unix.Fdatasync; a test counts the calls
}

// startWriteback starts a writeback of the file at path; it returns nil (a
// writeback that does nothing) if the file cannot be opened.
func startWriteback(path string) *writeback {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	w := &writeback{f: f, kick: make(chan struct{}, 1), done: make(chan struct{}), sync: unix.Fdatasync}
	go func() {
		defer close(w.done)
		for range w.kick {
			_ = w.sync(int(f.Fd()))
		}
	}()
	return w
}

// start asks for the file's written pages to be made durable, without
// waiting; a request while one is under way is merged with the next.
func (w *writeback) start() {
	if w == nil {
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// stop ends the writeback, waiting for a request under way, and closes the
// file.
func (w *writeback) stop() {
	if w == nil {
		return
	}
	close(w.kick)
	<-w.done
	w.f.Close()
}
