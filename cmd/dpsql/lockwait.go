package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dpsql/dpsql/sqlfuncs"
)

// lockWaitDelay is how long a command waits silently for the database's write
// lock before saying who holds it.
const lockWaitDelay = time.Second

// watchLock reports on w, once, when the command has waited lockWaitDelay and
// another process holds the write lock of the database at path while this
// one needs it: writing says whether the running statement writes; a DP
// function charging (sqlfuncs.Charging) needs the lock too. Another process
// holding the lock means this one does not, so it is waiting for it. Call the
// returned function when the statement ends.
func watchLock(ctx context.Context, w io.Writer, path string, writing bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(lockWaitDelay)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			charging := sqlfuncs.Charging()
			if writing || charging {
				if pid := writeLockHolder(path); pid > 0 {
					limit := "10 s" // the busy timeout of ext.DSN
					if charging {
						limit = "30 s" // the ledger connection's
					}
					fmt.Fprintf(w, "dpsql: waiting for the write lock on %s, which process %d holds (dpsql gives up after %s; Ctrl-C stops now)\n", path, pid, limit)
					return
				}
			}
			t.Reset(200 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// readOnlyStatement reports whether stmt plainly only reads (SELECT, VALUES,
// EXPLAIN); anything else may write.
func readOnlyStatement(stmt string) bool {
	f := strings.Fields(strings.ToUpper(stmt))
	return len(f) > 0 && (f[0] == "SELECT" || f[0] == "VALUES" || f[0] == "EXPLAIN")
}

// writeLockHolder returns the id of another process holding the WAL write
// lock of the database at path (a POSIX lock on byte 120 of its -shm file,
// where SQLite's unix VFS keeps it), read from /proc/locks; 0 if none is
// found or the platform does not say.
func writeLockHolder(path string) int {
	dev, ino, ok := fileID(path + "-shm")
	if !ok {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	return lockHolderIn(string(b), dev, ino, os.Getpid())
}

// lockHolderIn finds in the text of /proc/locks a POSIX WRITE lock on the
// file (dev as "maj:min" in hex, ino) covering byte 120, held by a process
// other than self.
func lockHolderIn(locks, dev string, ino uint64, self int) int {
	id := fmt.Sprintf("%s:%d", dev, ino)
	for _, line := range strings.Split(locks, "\n") {
		f := strings.Fields(line)
		// 1: POSIX  ADVISORY  WRITE 9979 fe:00:9979302 120 120
		if len(f) < 8 || f[1] != "POSIX" || f[3] != "WRITE" || f[5] != id {
			continue
		}
		var pid int
		var lo, hi int64
		if _, err := fmt.Sscan(f[4], &pid); err != nil || pid == self || pid <= 0 {
			continue
		}
		if _, err := fmt.Sscan(f[6], &lo); err != nil {
			continue
		}
		if f[7] == "EOF" {
			hi = 1 << 62
		} else if _, err := fmt.Sscan(f[7], &hi); err != nil {
			continue
		}
		if lo <= 120 && 120 <= hi {
			return pid
		}
	}
	return 0
}
