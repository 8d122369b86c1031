package sqlite

/*
#include <stdlib.h>
int dpsql_register_batch_vfs(const char *name);
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// BatchVFS is the name of the VFS shim (batchvfs.c) that gathers a
// connection's appends to its -wal file into writes of up to 128 KiB and
// reads ahead through the -wal and database files: SQLite writes each WAL
// frame as two writes, its 24-byte header and its page, and a checkpoint
// copies a frame with one read and one write, so a 188 MB release into a
// file of SQLite's default 4 KiB pages made 120,000 write calls and 60,000
// reads more than the same release into a file of 64 KiB pages. Writes to
// the database file are passed on as they come.
//
// What SQLite and other connections, in this process or another, see of the
// files is what they would see without the shim, and every failure SQLite
// would hear of it hears of: a commit frame's write writes every gathered
// byte and returns that write's error (SQLite publishes the commit right
// after it); the gathered bytes reach the file before SQLite reads, syncs,
// sizes, truncates, locks, controls or closes it and before any operation on
// the connection's wal-index; bytes that could not be written are tried
// again, never dropped, until the write transaction they belong to ends
// uncommitted; a read ahead is forgotten at every write and lock. Open a
// connection through it with the URI parameter vfs=dpsql_batch, after
// [RegisterBatchVFS].
const BatchVFS = "dpsql_batch"

var (
	batchMu         sync.Mutex
	batchRegistered bool
)

// RegisterBatchVFS registers [BatchVFS] over the default VFS of the
// process's SQLite ([SetAPI] must have run); once it is registered, calling
// it again does nothing. It needs SQLite 3.31 or later
// (sqlite3_filename_database).
func RegisterBatchVFS() error {
	batchMu.Lock()
	defer batchMu.Unlock()
	if batchRegistered {
		return nil
	}
	if processTable() == nil {
		return fmt.Errorf("registering the %s VFS: no SQLite API table set", BatchVFS)
	}
	name := C.CString(BatchVFS) // kept: SQLite holds the name while the VFS is registered
	if rc := C.dpsql_register_batch_vfs(name); rc != 0 {
		C.free(unsafe.Pointer(name))
		return fmt.Errorf("registering the %s VFS: SQLite error %d", BatchVFS, int(rc))
	}
	batchRegistered = true
	return nil
}
