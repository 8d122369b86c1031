package sqlfuncs

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeback starts the disk writes of a growing file early: while a release
// streams 188 MB into the WAL, the kernel would otherwise keep it all in the
// page cache until the commit's fsync, which then waits for every byte
// (about 0.35 s on the project's machine). kick asks the kernel, on a
// goroutine of its own, to start writing what is dirty
// (sync_file_range(SYNC_FILE_RANGE_WRITE)), so the disk works while the
// release is still being computed and the fsync finds little left to do.
//
// It changes nothing SQLite relies on: the commit still fsyncs the WAL before
// it returns, and frames written out early without their commit frame are
// ignored by recovery, as any uncommitted frame is. It opens the file
// read-only and holds no lock on it; SQLite locks the database and its -shm
// file, never the -wal, so closing this descriptor releases none of SQLite's
// POSIX locks.
type writeback struct {
	f    *os.File
	kick chan struct{}
	done chan struct{}
}

// startWriteback starts a writeback of the file at path; it returns nil (a
// writeback that does nothing) if the file cannot be opened.
func startWriteback(path string) *writeback {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	w := &writeback{f: f, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for range w.kick {
			_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		}
	}()
	return w
}

// start asks for the file's dirty pages to be written out, without waiting;
// a request while one is pending is merged with it.
func (w *writeback) start() {
	if w == nil {
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// stop ends the writeback and closes the file.
func (w *writeback) stop() {
	if w == nil {
		return
	}
	close(w.kick)
	<-w.done
	w.f.Close()
}
