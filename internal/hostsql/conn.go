package hostsql

/*
#cgo CFLAGS: -I${SRCDIR}/../../third_party/sqlite
#include "hostsql.h"
*/
import "C"

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Driver opens connections through an API table; register it with
// sql.Register under a name of the program's choosing, or use a [Connector].
type Driver struct {
	API unsafe.Pointer // const sqlite3_api_routines*
	VFS string         // the VFS to open files through ("" for the default)
}

// Open opens a connection for the DSN (see [ParseDSN]).
func (d *Driver) Open(dsn string) (driver.Conn, error) {
	c, err := d.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

// OpenConnector parses the DSN (see [ParseDSN]) once for every connection.
func (d *Driver) OpenConnector(dsn string) (driver.Connector, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.API, cfg.VFS = d.API, d.VFS
	return NewConnector(cfg)
}

// Connector opens connections with one [Config]; sql.OpenDB takes it.
type Connector struct{ cfg Config }

// NewConnector checks that cfg's API table can serve the driver: present,
// of SQLite 3.8.7 or later, and built thread-safe (Go calls it from several
// threads).
func NewConnector(cfg Config) (*Connector, error) {
	if cfg.API == nil {
		return nil, errors.New("hostsql: no SQLite API table")
	}
	api := apiOf(cfg.API)
	if v := int(C.dpsql_hs_libversion(api)); v < minVersion {
		return nil, fmt.Errorf("hostsql: SQLite %s is too old: the driver needs 3.8.7 or later", versionString(v))
	}
	if C.dpsql_hs_threadsafe(api) == 0 {
		return nil, errors.New("hostsql: this SQLite is built without thread safety (SQLITE_THREADSAFE=0), and Go calls it from several threads: use a SQLite built thread-safe")
	}
	switch cfg.TxLock {
	case "", "deferred", "immediate", "exclusive":
	default:
		return nil, fmt.Errorf("hostsql: TxLock %q: want deferred, immediate or exclusive", cfg.TxLock)
	}
	if cfg.BusyTimeout < 0 || cfg.BusyTimeout.Milliseconds() > math.MaxInt32 {
		return nil, fmt.Errorf("hostsql: BusyTimeout %v out of range", cfg.BusyTimeout)
	}
	if err := checkName(cfg.Name); err != nil {
		return nil, err
	}
	return &Connector{cfg: cfg}, nil
}

func versionString(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// Driver returns a [Driver] over the connector's table and VFS.
func (c *Connector) Driver() driver.Driver { return &Driver{API: c.cfg.API, VFS: c.cfg.VFS} }

// Connect opens a connection.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := &c.cfg
	api := apiOf(cfg.API)
	name := cstr(cfg.Name)
	defer cfree(name)
	var vfs *C.char
	if cfg.VFS != "" {
		vfs = cstr(cfg.VFS)
		defer cfree(vfs)
	}
	var db *C.sqlite3
	rc := C.dpsql_hs_open(api, name, &db, C.SQLITE_OPEN_READWRITE|C.SQLITE_OPEN_CREATE|C.SQLITE_OPEN_URI|C.SQLITE_OPEN_FULLMUTEX, vfs)
	if rc != C.SQLITE_OK {
		var err error
		if db != nil {
			err = errorOf(api, db, rc)
			C.dpsql_hs_close(api, db)
		} else {
			err = &Error{Code: int(rc) & 0xff, ExtendedCode: int(rc), Msg: C.GoString(C.dpsql_hs_errstr(api, rc))}
		}
		return nil, fmt.Errorf("hostsql: opening %s: %w", cfg.Name, err)
	}
	cn := &conn{api: api, db: db, txlock: cfg.TxLock}
	if err := cn.setup(ctx, cfg); err != nil {
		cn.Close()
		return nil, err
	}
	return cn, nil
}

// setup applies cfg's settings to a new connection.
func (c *conn) setup(ctx context.Context, cfg *Config) error {
	C.dpsql_hs_extended_result_codes(c.api, c.db)
	if rc := C.dpsql_hs_busy_timeout(c.api, c.db, C.int(cfg.BusyTimeout.Milliseconds())); rc != C.SQLITE_OK {
		return fmt.Errorf("hostsql: setting the busy timeout: %w", errorOf(c.api, c.db, rc))
	}
	var pragmas []string
	if cfg.ForeignKeys != nil {
		pragmas = append(pragmas, map[bool]string{true: "foreign_keys = ON", false: "foreign_keys = OFF"}[*cfg.ForeignKeys])
	}
	if cfg.JournalMode != "" {
		pragmas = append(pragmas, "journal_mode = "+cfg.JournalMode)
	}
	if cfg.Synchronous != "" {
		pragmas = append(pragmas, "synchronous = "+cfg.Synchronous)
	}
	for _, p := range pragmas {
		if _, err := c.ExecContext(ctx, "PRAGMA "+p, nil); err != nil {
			return fmt.Errorf("hostsql: PRAGMA %s on %s: %w", p, cfg.Name, err)
		}
	}
	if cfg.RequireWAL {
		mode, err := c.journalMode(ctx)
		if err != nil {
			return fmt.Errorf("hostsql: reading the journal mode of %s: %w", cfg.Name, err)
		}
		if mode != "wal" {
			return fmt.Errorf("%s is in journal mode %q: %w: switch it once with PRAGMA journal_mode=WAL (the mode stays with the file)", displayName(cfg.Name), mode, ErrNotWAL)
		}
	}
	return nil
}

func (c *conn) journalMode(ctx context.Context) (string, error) {
	rows, err := c.QueryContext(ctx, "PRAGMA journal_mode", nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return "", err
	}
	s, _ := v[0].(string)
	return strings.ToLower(s), nil
}

// displayName is the file a database name opens: a file: URI without its
// scheme and parameters.
func displayName(name string) string {
	if rest, ok := strings.CutPrefix(name, "file:"); ok {
		rest, _, _ = strings.Cut(rest, "?")
		if p, err := url.PathUnescape(rest); err == nil {
			return p
		}
		return rest
	}
	return name
}

// errorOf is the *Error for rc from db.
func errorOf(api capi, db *C.sqlite3, rc C.int) error {
	e := &Error{Code: int(rc) & 0xff, ExtendedCode: int(rc)}
	if db != nil {
		e.Msg = C.GoString(C.dpsql_hs_errmsg(api, db))
		if x := int(C.dpsql_hs_extended_errcode(api, db)); x&0xff == e.Code {
			e.ExtendedCode = x
		}
	}
	if e.Msg == "" || e.Msg == "not an error" {
		e.Msg = C.GoString(C.dpsql_hs_errstr(api, rc))
	}
	return e
}

// conn is one SQLite connection; database/sql uses it from one goroutine at
// a time.
type conn struct {
	api       capi
	db        *C.sqlite3
	txlock    string
	readOnlyT bool // a read-only transaction set query_only
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
)

// Close closes the connection (close_v2: statements still open are
// finalized when they are closed).
func (c *conn) Close() error {
	if c.db == nil {
		return nil
	}
	rc := C.dpsql_hs_close(c.api, c.db)
	db := c.db
	c.db = nil
	if rc != C.SQLITE_OK {
		return fmt.Errorf("hostsql: closing: %w", errorOf(c.api, db, rc))
	}
	return nil
}

// Ping reports whether the connection is open.
func (c *conn) Ping(ctx context.Context) error {
	if c.db == nil {
		return driver.ErrBadConn
	}
	return nil
}

// ResetSession refuses a connection left inside a transaction.
func (c *conn) ResetSession(ctx context.Context) error {
	if !c.IsValid() {
		return driver.ErrBadConn
	}
	return nil
}

// IsValid reports whether the connection is open and outside a transaction.
func (c *conn) IsValid() bool { return c.db != nil && C.dpsql_hs_get_autocommit(c.api, c.db) != 0 }

// Begin starts a transaction with the configured lock.
func (c *conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

// BeginTx starts a transaction: BEGIN DEFERRED, IMMEDIATE or EXCLUSIVE as
// configured (_txlock), or, for a read-only one, BEGIN DEFERRED with
// PRAGMA query_only until it ends. SQLite's isolation is serializable: other
// levels are refused.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.db == nil {
		return nil, driver.ErrBadConn
	}
	switch opts.Isolation {
	case driver.IsolationLevel(0), driver.IsolationLevel(8): // default, serializable (sql.LevelSerializable)
	default:
		return nil, fmt.Errorf("hostsql: isolation level %d is not SQLite's: leave it at the default (serializable)", opts.Isolation)
	}
	begin := "BEGIN"
	if c.txlock != "" {
		begin = "BEGIN " + strings.ToUpper(c.txlock)
	}
	if opts.ReadOnly {
		if _, err := c.ExecContext(ctx, "PRAGMA query_only = ON", nil); err != nil {
			return nil, err
		}
		c.readOnlyT = true
		begin = "BEGIN DEFERRED"
	}
	if _, err := c.ExecContext(ctx, begin, nil); err != nil {
		c.endReadOnly()
		return nil, err
	}
	return &tx{c}, nil
}

func (c *conn) endReadOnly() {
	if c.readOnlyT {
		c.readOnlyT = false
		if _, err := c.ExecContext(context.Background(), "PRAGMA query_only = OFF", nil); err != nil {
			c.Close() // never hand the pool a read-only connection
		}
	}
}

type tx struct{ c *conn }

// Commit commits; when COMMIT fails and the transaction is still open (a
// lock it could not get), it is rolled back, so that the connection is
// usable again.
func (t *tx) Commit() error {
	defer t.c.endReadOnly()
	_, err := t.c.ExecContext(context.Background(), "COMMIT", nil)
	if err != nil && t.c.db != nil && C.dpsql_hs_get_autocommit(t.c.api, t.c.db) == 0 {
		t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	}
	return err
}

// Rollback rolls back (nothing to do when SQLite already did).
func (t *tx) Rollback() error {
	defer t.c.endReadOnly()
	if t.c.db == nil {
		return driver.ErrBadConn
	}
	if C.dpsql_hs_get_autocommit(t.c.api, t.c.db) != 0 {
		return nil
	}
	_, err := t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

// watch interrupts the connection's statement when ctx is done, until the
// returned stop is called.
func (c *conn) watch(ctx context.Context) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	api, db := c.api, c.db
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			C.dpsql_hs_interrupt(api, db)
		case <-done:
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// stepError is the error of a failed step: the context's when it was the
// context that interrupted it.
func (c *conn) stepError(ctx context.Context, rc C.int) error {
	if ctx.Err() != nil && int(rc)&0xff == int(ErrInterrupt) {
		return ctx.Err()
	}
	return errorOf(c.api, c.db, rc)
}

// prepareNext prepares the first statement of query, skipping empty ones
// (blank text, comments, lone semicolons); s is nil when there is none.
// rest is the text after it.
func (c *conn) prepareNext(query string) (s *C.sqlite3_stmt, rest string, err error) {
	for len(query) > 0 {
		if len(query) > math.MaxInt32 {
			return nil, "", errors.New("hostsql: statement text longer than 2 GiB")
		}
		var tail C.int
		p := (*C.char)(unsafe.Pointer(unsafe.StringData(query)))
		rc := C.dpsql_hs_prepare(c.api, c.db, p, C.int(len(query)), &s, &tail)
		if rc != C.SQLITE_OK {
			return nil, "", errorOf(c.api, c.db, rc)
		}
		rest = query[int(tail):]
		if s != nil {
			return s, rest, nil
		}
		if int(tail) == 0 {
			break
		}
		query = rest
	}
	return nil, "", nil
}

// PrepareContext prepares one statement.
func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext prepares one statement; text after it other than blanks,
// comments and semicolons is an error.
func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.db == nil {
		return nil, driver.ErrBadConn
	}
	s, rest, err := c.prepareNext(query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("hostsql: no statement in %q", query)
	}
	if more, _, err := c.prepareNext(rest); more != nil || err != nil {
		C.dpsql_hs_finalize(c.api, s)
		if more != nil {
			C.dpsql_hs_finalize(c.api, more)
		}
		return nil, fmt.Errorf("hostsql: Prepare takes one statement, and %q has more after the first", query)
	}
	return &stmt{c: c, s: s}, nil
}

// ExecContext runs every statement of query, each taking its share of args
// (go-sqlite3 does the same).
func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.db == nil {
		return nil, driver.ErrBadConn
	}
	var res driver.Result = result{}
	for {
		s, rest, err := c.prepareNext(query)
		if err != nil {
			return nil, err
		}
		if s == nil {
			break
		}
		st := &stmt{c: c, s: s}
		n := st.NumInput()
		if n > len(args) {
			st.Close()
			return nil, fmt.Errorf("hostsql: %d arguments given, the statements need at least %d", len(args), n)
		}
		res, err = st.ExecContext(ctx, args[:n])
		st.Close()
		if err != nil {
			return nil, err
		}
		args, query = args[n:], rest
	}
	if len(args) > 0 {
		return nil, fmt.Errorf("hostsql: %d arguments more than the statements take", len(args))
	}
	return res, nil
}

// QueryContext runs every statement of query but the last, each taking its
// share of args, and returns the rows of the last.
func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.db == nil {
		return nil, driver.ErrBadConn
	}
	s, rest, err := c.prepareNext(query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("hostsql: no statement in %q", query)
	}
	for {
		st := &stmt{c: c, s: s}
		n := st.NumInput()
		if n > len(args) {
			st.Close()
			return nil, fmt.Errorf("hostsql: %d arguments given, the statements need at least %d", len(args), n)
		}
		next, after, err := c.prepareNext(rest)
		if err != nil {
			st.Close()
			return nil, err
		}
		if next == nil {
			if len(args) > n {
				st.Close()
				return nil, fmt.Errorf("hostsql: %d arguments more than the statements take", len(args)-n)
			}
			r, err := st.QueryContext(ctx, args)
			if err != nil {
				st.Close()
				return nil, err
			}
			r.(*rows).owned = true
			return r, nil
		}
		_, err = st.ExecContext(ctx, args[:n])
		st.Close()
		if err != nil {
			C.dpsql_hs_finalize(c.api, next)
			return nil, err
		}
		args, s, rest = args[n:], next, after
	}
}

type stmt struct {
	c    *conn
	s    *C.sqlite3_stmt
	busy bool // rows are reading it
}

var (
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)
)

func (s *stmt) Close() error {
	if s.s == nil {
		return nil
	}
	rc := C.dpsql_hs_finalize(s.c.api, s.s)
	s.s = nil
	_ = rc // finalize repeats the last step's error, already reported
	return nil
}

func (s *stmt) NumInput() int { return int(C.dpsql_hs_bind_count(s.c.api, s.s)) }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

// bind resets the statement and binds args: by name (:name, @name or $name)
// when an argument has one, else by position.
func (s *stmt) bind(args []driver.NamedValue) error {
	api := s.c.api
	C.dpsql_hs_reset(api, s.s)
	C.dpsql_hs_clear_bindings(api, s.s)
	pos := 0
	for _, a := range args {
		var idx C.int
		if a.Name != "" {
			for _, p := range []string{":", "@", "$"} {
				n := cstr(p + a.Name)
				idx = C.dpsql_hs_bind_index(api, s.s, n)
				cfree(n)
				if idx > 0 {
					break
				}
			}
			if idx == 0 {
				return fmt.Errorf("hostsql: the statement has no parameter named %s", a.Name)
			}
		} else {
			pos++
			idx = C.int(pos)
		}
		if err := s.bindOne(idx, a.Value); err != nil {
			return err
		}
	}
	return nil
}

// timeFormat is how a time.Time argument is stored (go-sqlite3's first
// format, which SQLite's date functions read).
const timeFormat = "2006-01-02 15:04:05.999999999-07:00"

func (s *stmt) bindOne(i C.int, v driver.Value) error {
	api := s.c.api
	var rc C.int
	switch x := v.(type) {
	case nil:
		rc = C.dpsql_hs_bind_null(api, s.s, i)
	case int64:
		rc = C.dpsql_hs_bind_int64(api, s.s, i, C.sqlite3_int64(x))
	case float64:
		rc = C.dpsql_hs_bind_double(api, s.s, i, C.double(x))
	case bool:
		b := C.sqlite3_int64(0)
		if x {
			b = 1
		}
		rc = C.dpsql_hs_bind_int64(api, s.s, i, b)
	case string:
		rc = C.dpsql_hs_bind_text(api, s.s, i, (*C.char)(unsafe.Pointer(unsafe.StringData(x))), C.sqlite3_int64(len(x)))
	case []byte:
		if x == nil {
			rc = C.dpsql_hs_bind_null(api, s.s, i)
		} else {
			rc = C.dpsql_hs_bind_blob(api, s.s, i, unsafe.Pointer(unsafe.SliceData(x)), C.sqlite3_int64(len(x)))
		}
	case time.Time:
		t := x.Format(timeFormat)
		rc = C.dpsql_hs_bind_text(api, s.s, i, (*C.char)(unsafe.Pointer(unsafe.StringData(t))), C.sqlite3_int64(len(t)))
	default:
		return fmt.Errorf("hostsql: cannot bind argument %d of type %T (want nil, int64, float64, bool, string, []byte or time.Time)", int(i), v)
	}
	if rc != C.SQLITE_OK {
		return fmt.Errorf("hostsql: binding argument %d: %w", int(i), errorOf(api, s.c.db, rc))
	}
	return nil
}

type result struct{ id, n int64 }

func (r result) LastInsertId() (int64, error) { return r.id, nil }
func (r result) RowsAffected() (int64, error) { return r.n, nil }

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if s.busy {
		return nil, errors.New("hostsql: the statement is still being read by open rows: close them first")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.bind(args); err != nil {
		return nil, err
	}
	stop := s.c.watch(ctx)
	defer stop()
	for {
		switch rc := C.dpsql_hs_step(s.c.api, s.s); rc {
		case C.SQLITE_ROW:
			continue
		case C.SQLITE_DONE:
			r := result{id: int64(C.dpsql_hs_last_insert_rowid(s.c.api, s.c.db)), n: int64(C.dpsql_hs_changes(s.c.api, s.c.db))}
			C.dpsql_hs_reset(s.c.api, s.s)
			return r, nil
		default:
			err := s.c.stepError(ctx, rc)
			C.dpsql_hs_reset(s.c.api, s.s)
			return nil, err
		}
	}
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.busy {
		return nil, errors.New("hostsql: the statement is still being read by open rows: close them first")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.bind(args); err != nil {
		return nil, err
	}
	n := int(C.dpsql_hs_column_count(s.c.api, s.s))
	cols := make([]string, n)
	for i := range cols {
		cols[i] = C.GoString(C.dpsql_hs_column_name(s.c.api, s.s, C.int(i)))
	}
	s.busy = true
	return &rows{s: s, ctx: ctx, cols: cols, stop: s.c.watch(ctx)}, nil
}

// rows reads a statement's results; owned rows finalize it when closed.
type rows struct {
	s     *stmt
	ctx   context.Context
	cols  []string
	stop  func()
	owned bool
	done  bool
}

var _ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)

func (r *rows) Columns() []string { return r.cols }

// ColumnTypeDatabaseTypeName is the column's declared type, upper case.
func (r *rows) ColumnTypeDatabaseTypeName(i int) string {
	if r.s.s == nil {
		return ""
	}
	return strings.ToUpper(C.GoString(C.dpsql_hs_column_decltype(r.s.c.api, r.s.s, C.int(i))))
}

func (r *rows) Close() error {
	if r.s == nil {
		return nil
	}
	r.stop()
	r.s.busy = false
	if r.owned {
		r.s.Close()
	} else if r.s.s != nil {
		C.dpsql_hs_reset(r.s.c.api, r.s.s)
	}
	r.s = nil
	return nil
}

func (r *rows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	api, st := r.s.c.api, r.s.s
	switch rc := C.dpsql_hs_step(api, st); rc {
	case C.SQLITE_ROW:
	case C.SQLITE_DONE:
		r.done = true
		return io.EOF
	default:
		r.done = true
		return r.s.c.stepError(r.ctx, rc)
	}
	for i := range dest {
		ci := C.int(i)
		switch C.dpsql_hs_column_type(api, st, ci) {
		case C.SQLITE_INTEGER:
			dest[i] = int64(C.dpsql_hs_column_int64(api, st, ci))
		case C.SQLITE_FLOAT:
			dest[i] = float64(C.dpsql_hs_column_double(api, st, ci))
		case C.SQLITE_TEXT:
			var n C.int
			p := C.dpsql_hs_column_text(api, st, ci, &n)
			dest[i] = C.GoStringN((*C.char)(p), n)
		case C.SQLITE_BLOB:
			var n C.int
			p := C.dpsql_hs_column_blob(api, st, ci, &n)
			if n == 0 {
				dest[i] = []byte{}
			} else {
				dest[i] = C.GoBytes(p, n)
			}
		default:
			dest[i] = nil
		}
	}
	return nil
}

// VFSName returns the name of the VFS the main database of the connection db
// (a sqlite3*) is opened through, asked with SQLITE_FCNTL_VFS_POINTER: a
// second connection opened through it locks the file as db's does.
func VFSName(api, db unsafe.Pointer) (string, error) {
	var rc C.int
	p := C.dpsql_hs_vfs_name(apiOf(api), (*C.sqlite3)(db), &rc)
	if p == nil {
		return "", fmt.Errorf("hostsql: the connection's VFS is unknown (file_control SQLITE_FCNTL_VFS_POINTER: %w)", &Error{Code: int(rc) & 0xff, ExtendedCode: int(rc), Msg: C.GoString(C.dpsql_hs_errstr(apiOf(api), rc))})
	}
	return C.GoString(p), nil
}

// Filename returns the file name of the main database of the connection db
// (a sqlite3*): "" for an in-memory or temporary database.
func Filename(api, db unsafe.Pointer) string {
	return C.GoString(C.dpsql_hs_db_filename(apiOf(api), (*C.sqlite3)(db)))
}
