package hostsql

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
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
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
	if v := sqlite.TableVersion(cfg.API); v < minVersion {
		return nil, fmt.Errorf("hostsql: SQLite %s is too old: the driver needs 3.8.7 or later", sqlite.VersionName(v))
	}
	if !sqlite.TableThreadsafe(cfg.API) {
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

// Driver returns a [Driver] over the connector's table and VFS.
func (c *Connector) Driver() driver.Driver { return &Driver{API: c.cfg.API, VFS: c.cfg.VFS} }

// Connect opens a connection.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := &c.cfg
	db, err := sqlite.Open(cfg.API, cfg.Name, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenURI|sqlite.OpenFullMutex, cfg.VFS)
	if err != nil {
		return nil, fmt.Errorf("hostsql: opening %s: %w", cfg.Name, err)
	}
	cn := &conn{db: db, txlock: cfg.TxLock}
	if err := cn.setup(ctx, cfg); err != nil {
		cn.Close()
		return nil, err
	}
	return cn, nil
}

// setup applies cfg's settings to a new connection.
func (c *conn) setup(ctx context.Context, cfg *Config) error {
	if err := c.db.SetBusyTimeout(int(cfg.BusyTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("hostsql: setting the busy timeout: %w", err)
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

// conn is one SQLite connection; database/sql uses it from one goroutine at
// a time.
type conn struct {
	db        sqlite.Conn // the zero Conn once closed
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
	if !c.db.Valid() {
		return nil
	}
	db := c.db
	c.db = sqlite.Conn{}
	if err := db.Close(); err != nil {
		return fmt.Errorf("hostsql: closing: %w", err)
	}
	return nil
}

// Ping reports whether the connection is open.
func (c *conn) Ping(ctx context.Context) error {
	if !c.db.Valid() {
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
func (c *conn) IsValid() bool { return c.db.Autocommit() }

// Begin starts a transaction with the configured lock.
func (c *conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

// BeginTx starts a transaction: BEGIN DEFERRED, IMMEDIATE or EXCLUSIVE as
// configured (_txlock), or, for a read-only one, BEGIN DEFERRED with
// PRAGMA query_only until it ends. SQLite's isolation is serializable: other
// levels are refused.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if !c.db.Valid() {
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
	if err != nil && t.c.db.Valid() && !t.c.db.Autocommit() {
		t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	}
	return err
}

// Rollback rolls back (nothing to do when SQLite already did).
func (t *tx) Rollback() error {
	defer t.c.endReadOnly()
	if !t.c.db.Valid() {
		return driver.ErrBadConn
	}
	if t.c.db.Autocommit() {
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
	db := c.db
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			db.Interrupt()
		case <-done:
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// stepError is the error of a failed step: the context's when it was the
// context that interrupted it.
func (c *conn) stepError(ctx context.Context, rc int) error {
	if ctx.Err() != nil && rc&0xff == int(ErrInterrupt) {
		return ctx.Err()
	}
	return c.db.Error(rc)
}

// prepareNext prepares the first statement of query, skipping empty ones
// (blank text, comments, lone semicolons); s is nil when there is none.
// rest is the text after it.
func (c *conn) prepareNext(query string) (s *sqlite.Stmt, rest string, err error) {
	s, rest, err = c.db.Prepare(query)
	var se *sqlite.Error
	if err != nil && !errors.As(err, &se) {
		err = fmt.Errorf("hostsql: %w", err)
	}
	return s, rest, err
}

// prepareFirst prepares the first statement of query, which must have one,
// on an open connection; rest is the text after it.
func (c *conn) prepareFirst(query string) (s *sqlite.Stmt, rest string, err error) {
	if !c.db.Valid() {
		return nil, "", driver.ErrBadConn
	}
	s, rest, err = c.prepareNext(query)
	if err == nil && s == nil {
		err = fmt.Errorf("hostsql: no statement in %q", query)
	}
	return s, rest, err
}

// Prepare prepares one statement.
func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext prepares one statement; text after it other than blanks,
// comments and semicolons is an error.
func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, rest, err := c.prepareFirst(query)
	if err != nil {
		return nil, err
	}
	if more, _, err := c.prepareNext(rest); more != nil || err != nil {
		s.Finalize()
		if more != nil {
			more.Finalize()
		}
		return nil, fmt.Errorf("hostsql: Prepare takes one statement, and %q has more after the first", query)
	}
	return &stmt{c: c, s: s}, nil
}

// ExecContext runs every statement of query, each taking its share of args
// (go-sqlite3 does the same).
func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if !c.db.Valid() {
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
	s, rest, err := c.prepareFirst(query)
	if err != nil {
		return nil, err
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
			next.Finalize()
			return nil, err
		}
		args, s, rest = args[n:], next, after
	}
}

type stmt struct {
	c    *conn
	s    *sqlite.Stmt
	busy bool // rows are reading it
}

var (
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)
)

func (s *stmt) Close() error {
	s.s.Finalize() // it would repeat the last step's error, already reported
	return nil
}

func (s *stmt) NumInput() int { return s.s.NumInput() }

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
	s.s.Reset()
	s.s.ClearBindings()
	pos := 0
	for _, a := range args {
		var idx int
		if a.Name != "" {
			for _, p := range []string{":", "@", "$"} {
				if idx = s.s.ParamIndex(p + a.Name); idx > 0 {
					break
				}
			}
			if idx == 0 {
				return fmt.Errorf("hostsql: the statement has no parameter named %s", a.Name)
			}
		} else {
			pos++
			idx = pos
		}
		if err := s.s.Bind(idx, a.Value); err != nil {
			return fmt.Errorf("hostsql: %w", err)
		}
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
		row, rc := s.s.Step()
		switch {
		case row:
			continue
		case sqlite.Done(rc):
			r := result{id: s.c.db.LastInsertRowid(), n: s.c.db.Changes()}
			s.s.Reset()
			return r, nil
		default:
			err := s.c.stepError(ctx, rc)
			s.s.Reset()
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
	cols := make([]string, s.s.ColumnCount())
	for i := range cols {
		cols[i] = s.s.ColumnName(i)
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
	if r.s.s.Finalized() {
		return ""
	}
	return strings.ToUpper(r.s.s.ColumnDecltype(i))
}

func (r *rows) Close() error {
	if r.s == nil {
		return nil
	}
	r.stop()
	r.s.busy = false
	if r.owned {
		r.s.Close()
	} else if !r.s.s.Finalized() {
		r.s.s.Reset()
	}
	r.s = nil
	return nil
}

func (r *rows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	row, rc := r.s.s.Step()
	switch {
	case row:
	case sqlite.Done(rc):
		r.done = true
		return io.EOF
	default:
		r.done = true
		return r.s.c.stepError(r.ctx, rc)
	}
	r.s.s.Row(dest, true)
	return nil
}

// VFSName returns the name of the VFS the main database of the connection db
// (a sqlite3*) is opened through, asked with SQLITE_FCNTL_VFS_POINTER: a
// second connection opened through it locks the file as db's does.
func VFSName(api, db unsafe.Pointer) (string, error) {
	name, err := sqlite.NewConn(api, db).VFSName()
	if err != nil {
		return "", fmt.Errorf("hostsql: %w", err)
	}
	return name, nil
}

// Filename returns the file name of the main database of the connection db
// (a sqlite3*): "" for an in-memory or temporary database.
func Filename(api, db unsafe.Pointer) string { return sqlite.NewConn(api, db).Filename() }
