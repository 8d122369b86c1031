// Package diskfull makes the process's SQLite fail its writes as on a full
// disk, for tests of what dpsql does when a write cannot be made. It replaces
// the write system calls of SQLite's unix VFS (pwrite64, pwrite and write,
// through sqlite3_vfs.xSetSystemCall) with ones that, once [Fill] has run,
// write at most a given number of bytes more and then fail with ENOSPC, as
// Linux does when a file system fills: a write that does not fit is cut short,
// the next one fails. Every VFS stacked over unix (dpsql's batch VFS among
// them) sees those failures where SQLite's own code would.
package diskfull

/*
#cgo CFLAGS: -I${SRCDIR}/../../../third_party/sqlite -I${SRCDIR}/..
#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>
#define DPSQL_API diskfull_api
#include "dpsqlapi.h"
DPSQL_API_DEFINE;

typedef ssize_t (*pwrite_t)(int, const void *, size_t, off_t);
typedef ssize_t (*write_t)(int, const void *, size_t);

static int64_t diskfull_room = -1; // bytes that still fit; -1: no limit
static long diskfull_failed;
static sqlite3_syscall_ptr real_pwrite64, real_pwrite, real_write;

// diskfull_fit returns how many of n bytes may be written: all of them with
// no limit, else at most the room left (which it takes), or -1 (ENOSPC).
static ssize_t diskfull_fit(size_t n) {
	int64_t room = __atomic_load_n(&diskfull_room, __ATOMIC_ACQUIRE);
	for (;;) {
		if (room < 0) return (ssize_t)n;
		if (room == 0) {
			__atomic_add_fetch(&diskfull_failed, 1, __ATOMIC_ACQ_REL);
			errno = ENOSPC;
			return -1;
		}
		int64_t take = (int64_t)n < room ? (int64_t)n : room;
		if (__atomic_compare_exchange_n(&diskfull_room, &room, room - take, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			return (ssize_t)take;
		}
	}
}

static ssize_t diskfull_pwrite64(int fd, const void *b, size_t n, off_t off) {
	ssize_t k = diskfull_fit(n);
	return k < 0 ? -1 : ((pwrite_t)real_pwrite64)(fd, b, (size_t)k, off);
}
static ssize_t diskfull_pwrite(int fd, const void *b, size_t n, off_t off) {
	ssize_t k = diskfull_fit(n);
	return k < 0 ? -1 : ((pwrite_t)real_pwrite)(fd, b, (size_t)k, off);
}
static ssize_t diskfull_write(int fd, const void *b, size_t n) {
	ssize_t k = diskfull_fit(n);
	return k < 0 ? -1 : ((write_t)real_write)(fd, b, (size_t)k);
}

// diskfull_install puts the calls in place in the unix VFS of the table's
// SQLite: 0, or 1 when it has no unix VFS or refuses a call.
static int diskfull_install(const sqlite3_api_routines *api) {
	if (!diskfull_api) diskfull_api = api;
	if (real_write) return 0;
	sqlite3_vfs *u = sqlite3_vfs_find("unix");
	if (!u || u->iVersion < 3) return 1;
	real_pwrite64 = u->xGetSystemCall(u, "pwrite64");
	real_pwrite = u->xGetSystemCall(u, "pwrite");
	real_write = u->xGetSystemCall(u, "write");
	if (!real_write) return 1;
	if (real_pwrite64 && u->xSetSystemCall(u, "pwrite64", (sqlite3_syscall_ptr)diskfull_pwrite64)) return 1;
	if (real_pwrite && u->xSetSystemCall(u, "pwrite", (sqlite3_syscall_ptr)diskfull_pwrite)) return 1;
	if (u->xSetSystemCall(u, "write", (sqlite3_syscall_ptr)diskfull_write)) return 1;
	return 0;
}

static void diskfull_set(int64_t room) { __atomic_store_n(&diskfull_room, room, __ATOMIC_RELEASE); }
static long diskfull_failures(void) { return __atomic_load_n(&diskfull_failed, __ATOMIC_ACQUIRE); }
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dpsql/dpsql/internal/sqlite/linked"
)

var mu sync.Mutex

// Install puts the failing write calls in place in the unix VFS of the
// SQLite go-sqlite3 links (package linked's table); they write everything
// until [Fill]. Installing again does nothing.
func Install() error {
	api, err := linked.API()
	if err != nil {
		return fmt.Errorf("diskfull: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if C.diskfull_install((*C.sqlite3_api_routines)(api)) != 0 {
		return errors.New("diskfull: SQLite's unix VFS refused the replacement write calls")
	}
	return nil
}

// Fill lets room more bytes be written, then makes every write fail with
// ENOSPC until [Empty].
func Fill(room int64) { C.diskfull_set(C.int64_t(room)) }

// Empty lifts the limit: writes succeed again.
func Empty() { C.diskfull_set(-1) }

// Failures counts the writes that failed with ENOSPC since the process
// started.
func Failures() int { return int(C.diskfull_failures()) }
