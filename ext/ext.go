// Package ext registers dpsql into SQLite for Go programs: importing it adds a
// database/sql driver named "sqlite3_dp" (go-sqlite3 with every dpsql function
// on each connection, registered by a ConnectHook), and [Open] opens a database
// file ready for DP queries in one call.
//
//	db, err := ext.Open("analysis.db")
//	db.QueryRow(`SELECT dp_gaussian(count(*), 1, 0.5) FROM patients`)
//
// The DSN is go-sqlite3's, plus two parameters of dpsql's own: dp_scope=NAME
// sets the budget scope the connection charges (default "default"), and
// dp_role=analyst makes every connection an analyst connection of protected
// mode (package protect; [OpenAnalyst]): protected tables only through
// SELECT WITH DIFFERENTIAL_PRIVACY, the scope fixed.
package ext

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/dpsql/dpsql/ledger"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// DriverName is the database/sql driver name dpsql registers.
const DriverName = "sqlite3_dp"

func init() { sql.Register(DriverName, &Driver{}) }

// Driver is go-sqlite3's driver with dpsql's functions on every connection.
type Driver struct{}

// Open opens a connection; see the package doc for the DSN.
func (Driver) Open(dsn string) (driver.Conn, error) {
	dsn, scope, err := splitScope(dsn)
	if err != nil {
		return nil, err
	}
	dsn, analyst, err := splitRole(dsn)
	if err != nil {
		return nil, err
	}
	dsn = withBatchVFS(dsn)
	d := &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		api, h, err := handleOf(c)
		if err != nil {
			return err
		}
		handles.Store(c, hostHandle{api, h})
		fc, err := sqlfuncs.Register(api, h, scope)
		if err != nil {
			handles.Delete(c)
			return err
		}
		if analyst {
			fc.ConfineScope() // its own scope only, in every function
		}
		// Analyst connections have them too, for their authorizer to refuse
		// by name.
		return registerOwnerFuncs(h, c.GetFilename("main"))
	}}
	c, err := d.Open(dsn)
	if err != nil {
		return nil, err
	}
	sc := c.(*sqlite3.SQLiteConn)
	if analyst {
		ac, err := protect.NewAnalystConn(sc, scope, func() error { return forget(sc) })
		if err != nil {
			forget(sc)
			sc.Close()
			return nil, err
		}
		return ac, nil
	}
	return &conn{sc}, nil
}

// forget drops the state dpsql keeps for a connection about to close: its
// sqlfuncs state and its entry in handles.
func forget(sc *sqlite3.SQLiteConn) error {
	v, ok := handles.LoadAndDelete(sc)
	if !ok {
		return nil
	}
	return sqlfuncs.Forget(v.(hostHandle).db)
}

// checkpointStarted, if set (by a test), is called when a closing connection
// starts its checkpoint of a large WAL (checkpointBeforeClose), just before
// SQLite's checkpoint runs.
var checkpointStarted func()

// conn forgets dpsql's per-connection state when the connection closes, and
// checkpoints a large WAL before it does (checkpointBeforeClose).
type conn struct{ *sqlite3.SQLiteConn }

func (c *conn) Close() error {
	checkpointBeforeClose(c.SQLiteConn)
	ferr := forget(c.SQLiteConn) // closes the ledger's connection, if this was the last to the file
	if err := c.SQLiteConn.Close(); err != nil {
		return err
	}
	return ferr
}

// splitScope removes the dp_scope parameter from a DSN.
func splitScope(dsn string) (string, string, error) {
	i := strings.IndexByte(dsn, '?')
	if i < 0 {
		return dsn, "", nil
	}
	q, err := url.ParseQuery(dsn[i+1:])
	if err != nil {
		return "", "", fmt.Errorf("dpsql: bad DSN parameters %q: %w", dsn[i+1:], err)
	}
	scope := q.Get("dp_scope")
	q.Del("dp_scope")
	rest := dsn[:i]
	if len(q) > 0 {
		rest += "?" + q.Encode()
	}
	return rest, scope, nil
}

// DSN returns the DSN [Open] uses for a database file: a busy timeout and
// foreign keys on. It leaves the journal mode as the file has it: opening a
// file to read it never changes it. A new file is created in WAL mode (so
// that the ledger's connection can commit while a query reads), and an
// existing one is switched just before its first statement that charges
// (wal.go).
func DSN(path string) string {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "1")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// ReadOnlyDSN returns the DSN [OpenReadOnly] uses to read a database file
// without writing it: SQLite's mode=ro (the file, its journal and its
// directory are never written, and, unlike [DSN], the journal mode is left as
// it is: reading never converts a file to WAL) and a busy timeout. With
// immutable it adds immutable=1: SQLite then takes no locks and reads the
// file as it is on disk, ignoring any -wal file, which is right only when no
// process is writing the file (a copy, read-only media, a file whose -shm is
// missing in a directory the reader cannot write).
func ReadOnlyDSN(path string, immutable bool) string {
	q := url.Values{}
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	q.Set("_busy_timeout", "10000")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// ErrReadOnlyWAL is returned by [OpenReadOnly] for a WAL-mode file that a
// read-only connection cannot read because its -shm file is missing (or
// unusable) and cannot be created, typically in a directory the reader cannot
// write. Opening it with immutable set reads it, if no process writes it and
// it has no -wal file.
var ErrReadOnlyWAL = errors.New("the file is in WAL mode and its -shm file, which a reader needs, is missing and cannot be created here")

// ErrUncheckpointedWAL is returned by [OpenReadOnly] with immutable set when
// the file has a non-empty -wal file: an immutable reader ignores it, and so
// would miss the transactions it holds.
var ErrUncheckpointedWAL = errors.New("the file has a -wal file that may hold committed transactions not yet in the file, which an immutable reader would not see")

// OpenReadOnly opens the database file at path for reading only, with the
// DSN of [ReadOnlyDSN]: nothing is created or written, whoever owns the file
// and its directory. Its connections are go-sqlite3's without dpsql's
// functions, since a charge would write the ledger through a connection of
// its own: what reads a ledger (dp_budget_status, dp_ledger, the accountant's
// verification) needs none of them. It reads the schema
// before returning, so that a file that is not a database, or cannot be read,
// is reported here. A WAL-mode file whose -shm file the reader can neither
// use nor create fails with an error wrapping [ErrReadOnlyWAL] unless
// immutable is set; with immutable set, a file with a non-empty -wal file
// fails with [ErrUncheckpointedWAL].
func OpenReadOnly(ctx context.Context, path string, immutable bool) (*sql.DB, error) {
	if immutable {
		if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
			return nil, fmt.Errorf("opening %s immutable: %w (%s-wal, %d bytes)", path, ErrUncheckpointedWAL, path, st.Size())
		}
	}
	db, err := sql.Open("sqlite3", ReadOnlyDSN(path, immutable)) // go-sqlite3's own driver
	if err != nil {
		return nil, err
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		db.Close()
		var se sqlite3.Error
		if !immutable && errors.As(err, &se) && (se.Code == sqlite3.ErrCantOpen || se.Code == sqlite3.ErrReadonly) && isWAL(path) {
			return nil, fmt.Errorf("opening %s read-only: %w (SQLite: %v)", path, ErrReadOnlyWAL, err)
		}
		return nil, fmt.Errorf("opening %s read-only: %w", path, err)
	}
	return db, nil
}

// isWAL reports whether the database file at path says it is in WAL mode:
// bytes 18 and 19 of its header (the read and write versions) are 2.
func isWAL(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return false
	}
	return h[18] == 2 && h[19] == 2
}

// Open opens the database file at path with the sqlite3_dp driver; its
// connections charge the default scope. It is OpenScope(context.Background(),
// path, "").
func Open(path string) (*sql.DB, error) {
	return OpenScope(context.Background(), path, "")
}

// OpenScope opens the database file at path with the sqlite3_dp driver and
// the DSN of [DSN], its connections charging the budget scope scope (the
// dp_scope parameter; "" means the default scope). It opens one connection
// (PingContext) before returning, so that a file that is not a database, or
// cannot be opened, is reported by OpenScope, which then closes the *sql.DB.
// When the file has a ledger, a named scope must exist in it: a mistyped
// scope fails here (the error wraps [accountant.ErrUnknownScope]), not at the
// first charge. A file without a ledger opens with any scope, which dp_init
// can then create.
func OpenScope(ctx context.Context, path, scope string) (*sql.DB, error) {
	dsn := DSN(path)
	if scope != "" {
		dsn += "&" + url.Values{"dp_scope": {scope}}.Encode()
	}
	if err := prepareFile(path); err != nil {
		return nil, err
	}
	db, err := sql.Open(DriverName, dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if scope != "" {
		if _, err := ledger.LoadBudget(ctx, db, scope); err != nil && !errors.Is(err, ledger.ErrNoLedger) {
			db.Close()
			return nil, fmt.Errorf("opening %s: %w", path, err)
		}
	}
	return db, nil
}
