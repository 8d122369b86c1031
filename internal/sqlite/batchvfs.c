// dpsql_batch: a VFS shim over another VFS (the default, unix) that turns a
// connection's runs of small file operations into few large ones. SQLite
// writes a WAL frame as two writes (its 24-byte header, then the page), and a
// checkpoint copies a frame with a read of the -wal file and a write of the
// database file; a release of 60,000 rows into a file of SQLite's default
// 4 KiB pages made 120,000 writes to the -wal file, then 60,000 reads of it
// and 60,000 writes to the database file at the checkpoint. Here consecutive
// appends to the -wal file are gathered into writes of up to DPSQL_BATCH
// bytes, and reads of the -wal or database file that follow each other (a
// checkpoint's walk through the frames, a scan of a table whose pages lie in
// order) are served from one read ahead of DPSQL_AHEAD bytes. Writes to the
// database file are passed on as they come. See batchvfs.go.
//
// Correctness rests on these rules.
//   - A write held back must never be needed by anyone before SQLite has
//     heard whether it succeeded. SQLite publishes a commit's frames in the
//     wal-index (shared memory, with a barrier between the header's two
//     copies) right after writing them, with no call whose failure it checks
//     in between unless it syncs: so the write of a commit frame (a frame
//     header whose "database size" field is not zero, and the page after
//     it) writes every gathered byte at once and returns that write's error,
//     and SQLite fails the commit as it would have without the shim. What is
//     still gathered at any other moment belongs to frames no commit has
//     published yet.
//   - Writes to the database file are not gathered: a checkpoint that copies
//     only part of the WAL records its frames as copied right after its last
//     write, with no call in between whose failure SQLite checks (3.54), so a
//     write held back there and lost (disk full) would be lost to every
//     reader after it.
//   - Gathered bytes reach the file before any other operation on it (read,
//     sync, size, lock, file control, memory map) and before any operation
//     on the connection's wal-index (reached through the database file:
//     barrier, lock, map, unmap), and a write that does not continue the
//     gathered run is written after them, so the file sees SQLite's writes
//     in SQLite's order and every sync covers what SQLite wrote before it.
//     Bytes that could not be written stay gathered and are tried again at
//     the next such operation, which fails while they cannot be written;
//     only when the write transaction ends (its lock on the wal-index is
//     released), when they can belong to no commit, are they dropped. A lock
//     is always released, whatever the writing of gathered bytes returned.
//   - A read ahead serves only the bytes of a read that follows the previous
//     one, and is forgotten at any write or truncation of the file and at
//     any lock operation on the file or the wal-index: a transaction starts
//     and ends with one, and within it neither the frames a connection may
//     read (a WAL restart waits for every reader) nor the pages it reads
//     from the database file (a checkpoint copies only frames every reader
//     has, whose pages those readers read from the -wal file, and waits for
//     a reader of the database file alone) are rewritten.
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#define DPSQL_API dpsql_api
#include "dpsqlapi.h"

// DPSQL_BATCH is the most bytes gathered: under 128 KiB, since the unix
// VFS writes at most the low 17 bits of a length in one call (its
// seekAndWrite masks it with 0x1ffff) and fails a write whose remainder
// masks to 0, as 1 MiB would.
#define DPSQL_BATCH ((1 << 17) - 1)

// DPSQL_AHEAD is how much of a file one read ahead reads.
#define DPSQL_AHEAD (1 << 18)

// The WAL's layout (https://sqlite.org/fileformat2.html#walformat): a
// 32-byte header, then frames of a 24-byte header and a page; bytes 4-7 of
// a frame header are the database's size in pages after a commit, in its
// commit frame, and zero in every other frame.
#define WAL_HDRSIZE 32
#define WAL_FRAME_HDRSIZE 24

// WAL_WRITE_LOCK is the wal-index lock a write transaction holds (wal.c).
#define WAL_WRITE_LOCK 0

typedef struct dpsql_bfile dpsql_bfile;
struct dpsql_bfile {
	sqlite3_file base;
	sqlite3_file *real;     // the parent VFS's file, right after this struct
	int wal;                // a -wal file: appends are gathered
	int commit;             // a -wal file: a commit frame's header was written; write through until the wal-index is touched
	const char *db_name;    // a main database: its name as SQLite passed it (identifies the connection's files)
	dpsql_bfile *wal_file;  // a main database: its connection's -wal file, when open
	dpsql_bfile *main_file; // a -wal file: its connection's main database file
	dpsql_bfile *next;      // open main database files (dpsql_bmains)
	char *buf;              // the gathered bytes (DPSQL_BATCH)
	int n;
	sqlite3_int64 at;       // their offset in the file
	char *ahead;            // the bytes read ahead (DPSQL_AHEAD), or NULL
	int nahead;             // how many are valid (0: none)
	sqlite3_int64 ahead_at; // their offset
	sqlite3_int64 last_end; // where the last read ended
};

static sqlite3_vfs dpsql_bvfs;
static sqlite3_vfs *dpsql_bparent;
static pthread_mutex_t dpsql_bmu = PTHREAD_MUTEX_INITIALIZER;
static dpsql_bfile *dpsql_bmains;

#define REAL(f) (((dpsql_bfile *)(f))->real)

// dpsql_bflush writes the gathered bytes of a -wal file; those it could not
// write stay gathered (a write SQLite was told had succeeded is never lost).
static int dpsql_bflush(dpsql_bfile *p) {
	if (!p || p->n == 0) return SQLITE_OK;
	int rc = p->real->pMethods->xWrite(p->real, p->buf, p->n, p->at);
	if (rc == SQLITE_OK) p->n = 0;
	return rc;
}

// dpsql_bwal is the -wal file of the connection whose database file is f,
// or NULL.
static dpsql_bfile *dpsql_bwal(sqlite3_file *f) {
	pthread_mutex_lock(&dpsql_bmu);
	dpsql_bfile *w = ((dpsql_bfile *)f)->wal_file;
	pthread_mutex_unlock(&dpsql_bmu);
	return w;
}

// dpsql_bflush_wal flushes the -wal file of the connection whose database
// file is f, before an operation on its wal-index; with forget, it also
// drops both files' reads ahead.
static int dpsql_bflush_wal(sqlite3_file *f, int forget) {
	dpsql_bfile *p = (dpsql_bfile *)f;
	dpsql_bfile *w = dpsql_bwal(f);
	if (forget) {
		p->nahead = 0;
		if (w) w->nahead = 0;
	}
	int rc = dpsql_bflush(w);
	if (w && rc == SQLITE_OK) w->commit = 0;
	return rc;
}

static int dpsql_bclose(sqlite3_file *f) {
	dpsql_bfile *p = (dpsql_bfile *)f;
	int rc = dpsql_bflush(p);
	pthread_mutex_lock(&dpsql_bmu);
	if (p->wal && p->main_file && p->main_file->wal_file == p) p->main_file->wal_file = 0;
	if (p->db_name) {
		for (dpsql_bfile **q = &dpsql_bmains; *q; q = &(*q)->next) {
			if (*q == p) { *q = p->next; break; }
		}
		if (p->wal_file) p->wal_file->main_file = 0;
	}
	pthread_mutex_unlock(&dpsql_bmu);
	int rc2 = p->real->pMethods->xClose(p->real);
	free(p->buf);
	free(p->ahead);
	p->buf = p->ahead = 0;
	p->n = 0;
	return rc != SQLITE_OK ? rc : rc2;
}

static int dpsql_bread(sqlite3_file *f, void *z, int n, sqlite3_int64 at) {
	dpsql_bfile *p = (dpsql_bfile *)f;
	int rc = dpsql_bflush(p);
	if (rc != SQLITE_OK) return rc;
	if (!p->ahead) return p->real->pMethods->xRead(p->real, z, n, at);
	sqlite3_int64 last = p->last_end;
	p->last_end = at + n;
	if (p->nahead > 0 && at >= p->ahead_at && at + n <= p->ahead_at + p->nahead) {
		memcpy(z, p->ahead + (at - p->ahead_at), n);
		return SQLITE_OK;
	}
	// Read ahead only for a read that follows the last one (at most a frame
	// header between them) and is smaller than the read ahead.
	p->nahead = 0;
	if (at < last || at - last > 64 || n > DPSQL_AHEAD / 4) return p->real->pMethods->xRead(p->real, z, n, at);
	sqlite3_int64 size;
	rc = p->real->pMethods->xFileSize(p->real, &size);
	if (rc != SQLITE_OK || at + n > size) return p->real->pMethods->xRead(p->real, z, n, at);
	int want = size - at < DPSQL_AHEAD ? (int)(size - at) : DPSQL_AHEAD;
	rc = p->real->pMethods->xRead(p->real, p->ahead, want, at);
	if (rc != SQLITE_OK) return p->real->pMethods->xRead(p->real, z, n, at);
	p->ahead_at = at;
	p->nahead = want;
	memcpy(z, p->ahead, n);
	return SQLITE_OK;
}

// dpsql_bcommit_header reports whether a write of n bytes at at to a -wal
// file is the header of a commit frame.
static int dpsql_bcommit_header(const void *z, int n, sqlite3_int64 at) {
	const unsigned char *b = z;
	return n == WAL_FRAME_HDRSIZE && at >= WAL_HDRSIZE && (b[4] | b[5] | b[6] | b[7]) != 0;
}

static int dpsql_bwrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 at) {
	dpsql_bfile *p = (dpsql_bfile *)f;
	p->nahead = 0;
	int rc;
	if (!p->wal) {
		rc = dpsql_bflush(p);
		if (rc != SQLITE_OK) return rc;
		return p->real->pMethods->xWrite(p->real, z, n, at);
	}
	if (dpsql_bcommit_header(z, n, at)) p->commit = 1;
	if (p->n > 0 && at == p->at + p->n && p->n + n <= DPSQL_BATCH) {
		memcpy(p->buf + p->n, z, n);
		p->n += n;
	} else {
		rc = dpsql_bflush(p);
		if (rc != SQLITE_OK) return rc;
		if (n >= DPSQL_BATCH) return p->real->pMethods->xWrite(p->real, z, n, at);
		memcpy(p->buf, z, n);
		p->n = n;
		p->at = at;
	}
	// From a commit frame's page on, every write reaches the file before it
	// returns, with its error: SQLite publishes the commit next.
	if (p->commit && !(n == WAL_FRAME_HDRSIZE && at >= WAL_HDRSIZE)) return dpsql_bflush(p);
	return SQLITE_OK;
}

#define FLUSH_THEN(call) \
	int rc = dpsql_bflush((dpsql_bfile *)f); \
	if (rc != SQLITE_OK) return rc; \
	return call

// A truncation drops the gathered bytes it would cut off.
static int dpsql_btruncate(sqlite3_file *f, sqlite3_int64 size) {
	dpsql_bfile *p = (dpsql_bfile *)f;
	p->nahead = 0;
	if (p->n > 0 && p->at >= size) p->n = 0;
	if (p->n > 0 && p->at + p->n > size) p->n = (int)(size - p->at);
	FLUSH_THEN(REAL(f)->pMethods->xTruncate(REAL(f), size));
}
static int dpsql_bsync(sqlite3_file *f, int flags) { FLUSH_THEN(REAL(f)->pMethods->xSync(REAL(f), flags)); }
static int dpsql_bsize(sqlite3_file *f, sqlite3_int64 *size) { FLUSH_THEN(REAL(f)->pMethods->xFileSize(REAL(f), size)); }
static int dpsql_block(sqlite3_file *f, int lock) {
	((dpsql_bfile *)f)->nahead = 0;
	FLUSH_THEN(REAL(f)->pMethods->xLock(REAL(f), lock));
}
static int dpsql_bunlock(sqlite3_file *f, int lock) {
	((dpsql_bfile *)f)->nahead = 0;
	int rc = dpsql_bflush((dpsql_bfile *)f);
	int rc2 = REAL(f)->pMethods->xUnlock(REAL(f), lock); // whatever the flush returned
	return rc != SQLITE_OK ? rc : rc2;
}
static int dpsql_breserved(sqlite3_file *f, int *out) { FLUSH_THEN(REAL(f)->pMethods->xCheckReservedLock(REAL(f), out)); }
static int dpsql_bcontrol(sqlite3_file *f, int op, void *arg) {
	FLUSH_THEN(REAL(f)->pMethods->xFileControl(REAL(f), op, arg));
}
static int dpsql_bsector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int dpsql_bcaps(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }

// The wal-index is reached through the database file: flush its
// connection's -wal file first.
static int dpsql_bshm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp) {
	int rc = dpsql_bflush_wal(f, 0);
	if (rc != SQLITE_OK) return rc;
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, pp);
}
static int dpsql_bshm_lock(sqlite3_file *f, int off, int n, int flags) {
	int rc = dpsql_bflush_wal(f, 1);
	if (!(flags & SQLITE_SHM_UNLOCK)) {
		if (rc != SQLITE_OK) return rc;
		return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
	}
	// The end of a write transaction: what is still gathered belongs to
	// frames it did not commit (a commit writes its own), and is dropped if
	// it cannot be written. A lock is released whatever the flush returned.
	dpsql_bfile *w = dpsql_bwal(f);
	if (w && rc != SQLITE_OK && off <= WAL_WRITE_LOCK && WAL_WRITE_LOCK < off + n) {
		w->n = 0;
		w->commit = 0;
	}
	int rc2 = REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
	return rc2 != SQLITE_OK ? rc2 : rc;
}
static void dpsql_bshm_barrier(sqlite3_file *f) {
	// A commit's frames are written by then (dpsql_bwrite); bytes that
	// cannot be written here stay gathered, and their error shows at the
	// -wal file's next operation.
	dpsql_bflush_wal(f, 0);
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int dpsql_bshm_unmap(sqlite3_file *f, int del) {
	int rc = dpsql_bflush_wal(f, 1);
	int rc2 = REAL(f)->pMethods->xShmUnmap(REAL(f), del); // whatever the flush returned
	return rc != SQLITE_OK ? rc : rc2;
}
static int dpsql_bfetch(sqlite3_file *f, sqlite3_int64 at, int n, void **pp) {
	FLUSH_THEN(REAL(f)->pMethods->xFetch(REAL(f), at, n, pp));
}
static int dpsql_bunfetch(sqlite3_file *f, sqlite3_int64 at, void *p) {
	return REAL(f)->pMethods->xUnfetch(REAL(f), at, p);
}

static const sqlite3_io_methods dpsql_bio = {
	3, dpsql_bclose, dpsql_bread, dpsql_bwrite, dpsql_btruncate, dpsql_bsync, dpsql_bsize,
	dpsql_block, dpsql_bunlock, dpsql_breserved, dpsql_bcontrol, dpsql_bsector, dpsql_bcaps,
	dpsql_bshm_map, dpsql_bshm_lock, dpsql_bshm_barrier, dpsql_bshm_unmap, dpsql_bfetch, dpsql_bunfetch,
};

static int dpsql_bopen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
	dpsql_bfile *p = (dpsql_bfile *)f;
	memset(p, 0, sizeof(*p));
	p->real = (sqlite3_file *)&p[1];
	int rc = dpsql_bparent->xOpen(dpsql_bparent, name, p->real, flags, out);
	if (rc != SQLITE_OK) {
		// SQLite calls xClose only if pMethods is set: leave it NULL, and
		// close the parent's file if it needs it.
		if (p->real->pMethods) p->real->pMethods->xClose(p->real);
		return rc;
	}
	// Only a parent file with every method (version 3, as unix's) is
	// wrapped whole; anything else, and any file but a -wal or main
	// database, gathers nothing.
	if (p->real->pMethods->iVersion >= 3 && name) {
		if (flags & SQLITE_OPEN_MAIN_DB) {
			p->db_name = name;
			p->ahead = malloc(DPSQL_AHEAD);
			pthread_mutex_lock(&dpsql_bmu);
			p->next = dpsql_bmains;
			dpsql_bmains = p;
			pthread_mutex_unlock(&dpsql_bmu);
		} else if (flags & SQLITE_OPEN_WAL) {
			const char *db = sqlite3_filename_database(name);
			pthread_mutex_lock(&dpsql_bmu);
			for (dpsql_bfile *m = dpsql_bmains; m; m = m->next) {
				if (m->db_name == db && !m->wal_file) {
					m->wal_file = p;
					p->main_file = m;
					break;
				}
			}
			pthread_mutex_unlock(&dpsql_bmu);
			// Without its database file to flush it at the wal-index,
			// the -wal file gathers nothing.
			if (p->main_file) {
				p->buf = malloc(DPSQL_BATCH);
				p->ahead = malloc(DPSQL_AHEAD);
				p->wal = p->buf != 0;
				if (!p->wal) { free(p->ahead); p->ahead = 0; }
			}
		}
	}
	p->base.pMethods = &dpsql_bio;
	return SQLITE_OK;
}

static int dpsql_bdelete(sqlite3_vfs *v, const char *name, int sync) { return dpsql_bparent->xDelete(dpsql_bparent, name, sync); }
static int dpsql_baccess(sqlite3_vfs *v, const char *name, int flags, int *out) { return dpsql_bparent->xAccess(dpsql_bparent, name, flags, out); }
static int dpsql_bfull(sqlite3_vfs *v, const char *name, int n, char *out) { return dpsql_bparent->xFullPathname(dpsql_bparent, name, n, out); }
static void *dpsql_bdlopen(sqlite3_vfs *v, const char *name) { return dpsql_bparent->xDlOpen(dpsql_bparent, name); }
static void dpsql_bdlerror(sqlite3_vfs *v, int n, char *msg) { dpsql_bparent->xDlError(dpsql_bparent, n, msg); }
static void (*dpsql_bdlsym(sqlite3_vfs *v, void *h, const char *sym))(void) { return dpsql_bparent->xDlSym(dpsql_bparent, h, sym); }
static void dpsql_bdlclose(sqlite3_vfs *v, void *h) { dpsql_bparent->xDlClose(dpsql_bparent, h); }
static int dpsql_brandom(sqlite3_vfs *v, int n, char *out) { return dpsql_bparent->xRandomness(dpsql_bparent, n, out); }
static int dpsql_bsleep(sqlite3_vfs *v, int us) { return dpsql_bparent->xSleep(dpsql_bparent, us); }
static int dpsql_btime(sqlite3_vfs *v, double *t) { return dpsql_bparent->xCurrentTime(dpsql_bparent, t); }
static int dpsql_berror(sqlite3_vfs *v, int n, char *msg) {
	return dpsql_bparent->xGetLastError ? dpsql_bparent->xGetLastError(dpsql_bparent, n, msg) : 0;
}
static int dpsql_btime64(sqlite3_vfs *v, sqlite3_int64 *t) { return dpsql_bparent->xCurrentTimeInt64(dpsql_bparent, t); }
static int dpsql_bset_call(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr p) { return dpsql_bparent->xSetSystemCall(dpsql_bparent, name, p); }
static sqlite3_syscall_ptr dpsql_bget_call(sqlite3_vfs *v, const char *name) { return dpsql_bparent->xGetSystemCall(dpsql_bparent, name); }
static const char *dpsql_bnext_call(sqlite3_vfs *v, const char *name) { return dpsql_bparent->xNextSystemCall(dpsql_bparent, name); }

// dpsql_register_batch_vfs registers the shim, named name, over the default
// VFS of the process's table (which must be set, and of SQLite 3.31 or later
// for sqlite3_filename_database); 0 on success or when already registered.
int dpsql_register_batch_vfs(const char *name) {
	if (!sqlite3_api || sqlite3_libversion_number() < 3031000) return SQLITE_ERROR;
	if (sqlite3_vfs_find(name)) return SQLITE_OK;
	sqlite3_vfs *parent = sqlite3_vfs_find(0);
	if (!parent || parent->iVersion < 3) return SQLITE_ERROR;
	dpsql_bparent = parent;
	sqlite3_vfs v = {
		3, (int)sizeof(dpsql_bfile) + parent->szOsFile, parent->mxPathname, 0, name, 0,
		dpsql_bopen, dpsql_bdelete, dpsql_baccess, dpsql_bfull,
		dpsql_bdlopen, dpsql_bdlerror, dpsql_bdlsym, dpsql_bdlclose,
		dpsql_brandom, dpsql_bsleep, dpsql_btime, dpsql_berror, dpsql_btime64,
		dpsql_bset_call, dpsql_bget_call, dpsql_bnext_call,
	};
	dpsql_bvfs = v;
	return sqlite3_vfs_register(&dpsql_bvfs, 0);
}
