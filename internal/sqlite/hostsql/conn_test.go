package hostsql

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/ext"
)

// open opens dsn through the API table of the SQLite go-sqlite3 links (the
// one a loadable extension would get from a host linking that SQLite).
func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	api, err := ext.SQLiteAPI()
	if err != nil {
		t.Fatal(err)
	}
	c, err := (&Driver{API: api}).OpenConnector(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestValuesRoundTrip(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "v.db"))
	if _, err := db.Exec(`CREATE TABLE v(i INTEGER, x)`); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 11, 23, 15, 4, 5, 6, time.UTC)
	for i, tc := range []struct {
		in, want any
	}{
		{nil, nil},
		{int64(-1 << 62), int64(-1 << 62)},
		{3, int64(3)},
		{1.5, 1.5},
		{"", ""},
		{"héllo\x00world", "héllo\x00world"},
		{[]byte{}, []byte{}},
		{[]byte{0, 1, 255}, []byte{0, 1, 255}},
		{[]byte(nil), nil},
		{true, int64(1)},
		{false, int64(0)},
		{when, "2026-11-23 15:04:05.000000006+00:00"},
	} {
		if _, err := db.Exec(`INSERT INTO v VALUES (?, ?)`, i, tc.in); err != nil {
			t.Fatalf("insert %#v: %v", tc.in, err)
		}
		var got any
		if err := db.QueryRow(`SELECT x FROM v WHERE i = ?`, i).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if b, ok := tc.want.([]byte); ok {
			if g, ok := got.([]byte); !ok || !bytes.Equal(g, b) {
				t.Errorf("%#v came back as %#v", tc.in, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%#v came back as %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestStatementsAndArguments(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "s.db"))
	// Several statements in one Exec, each taking its share of the arguments.
	res, err := db.Exec(`CREATE TABLE t(a, b); INSERT INTO t VALUES (?, ?); -- a comment
		INSERT INTO t VALUES (?, 'x');;`, 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 2 {
		t.Errorf("LastInsertId = %d, want 2", id)
	}
	res, err = db.Exec(`UPDATE t SET b = :b WHERE a >= $lo`, sql.Named("lo", 0), sql.Named("b", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Errorf("RowsAffected = %d, want 2", n)
	}
	var n int
	if err := db.QueryRow(`INSERT INTO t VALUES (9, 9); SELECT count(*) FROM t WHERE b = ?`, "y").Scan(&n); err != nil || n != 2 {
		t.Errorf("query after a statement: %d, %v", n, err)
	}
	for _, tc := range []struct {
		q    string
		args []any
		err  string
	}{
		{`SELECT ?`, nil, "need at least 1"},
		{`SELECT 1`, []any{1}, "arguments more than"},
		{`SELECT :a`, []any{sql.Named("b", 1)}, "no parameter named b"},
		{`SELEC 1`, nil, `near "SELEC": syntax error (SQLITE_ERROR)`},
		{`SELECT * FROM missing`, nil, "no such table: missing"},
		{`INSERT INTO t VALUES (?, ?)`, []any{struct{}{}, 1}, "unsupported type"},
	} {
		_, err := db.Exec(tc.q, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Exec(%q, %v) error = %v, want one saying %q", tc.q, tc.args, err, tc.err)
		}
	}
	// A prepared statement, used twice.
	st, err := db.Prepare(`SELECT b FROM t WHERE a = ?`)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, a := range []int{1, 3} {
		var b string
		if err := st.QueryRow(a).Scan(&b); err != nil || b != "y" {
			t.Errorf("prepared query a = %d: %q, %v", a, b, err)
		}
	}
	if _, err := db.Prepare(`SELECT 1; SELECT 2`); err == nil || !strings.Contains(err.Error(), "one statement") {
		t.Errorf("Prepare of two statements: %v", err)
	}
}

func TestConstraintErrorCodes(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "c.db")+"?_foreign_keys=1")
	if _, err := db.Exec(`CREATE TABLE p(k TEXT PRIMARY KEY); CREATE TABLE c(k REFERENCES p(k)); INSERT INTO p VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec(`INSERT INTO p VALUES ('a')`)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrConstraint) || e.ExtendedCode != 1555 || !strings.Contains(e.Msg, "UNIQUE constraint failed: p.k") {
		t.Errorf("duplicate key: %#v", err)
	}
	// _foreign_keys=1 took effect.
	if _, err := db.Exec(`INSERT INTO c VALUES ('zz')`); !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), "FOREIGN KEY constraint failed") {
		t.Errorf("foreign key: %v", err)
	}
}

// BEGIN IMMEDIATE (_txlock=immediate) takes the write lock at BEGIN: a
// second connection's BEGIN waits for it up to its busy timeout, then fails
// with SQLITE_BUSY and SQLite's "database is locked", which the accountant
// reads as a write conflict; within the timeout it gets the lock once the
// first commits.
func TestImmediateTransactionsAndBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	dsn := "file:" + path + "?_txlock=immediate&_journal_mode=WAL&_busy_timeout=200"
	a, b := open(t, dsn), open(t, dsn)
	if _, err := a.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ta, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.BeginTx(ctx, nil)
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("second BEGIN IMMEDIATE returned after %v, before the 200 ms busy timeout", waited)
	}
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("second BEGIN IMMEDIATE: %v, want SQLITE_BUSY, database is locked", err)
	}
	// A reader is not blocked (WAL).
	var n int
	if err := b.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatalf("read during the write transaction: %v", err)
	}
	if _, err := ta.Exec(`INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); ta.Commit() }()
	tb, err := b.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("BEGIN IMMEDIATE after the other committed within the timeout: %v", err)
	}
	if _, err := tb.Exec(`INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if err := tb.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := a.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Errorf("rows after both commits: %d, %v", n, err)
	}
	// A rolled-back transaction leaves nothing.
	tr, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tr.Exec(`INSERT INTO t VALUES (3)`)
	if err := tr.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Errorf("rows after a rollback: %d, %v", n, err)
	}
	// A read-only transaction refuses writes, and the connection writes again after it.
	ro, err := a.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Exec(`INSERT INTO t VALUES (4)`); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write in a read-only transaction: %v", err)
	}
	ro.Rollback()
	if _, err := a.Exec(`INSERT INTO t VALUES (5)`); err != nil {
		t.Errorf("write after the read-only transaction: %v", err)
	}
	if _, err := a.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err == nil {
		t.Error("read committed isolation accepted")
	}
}

// Cancelling the context interrupts a running statement: the query returns
// the context's error promptly and the connection works afterwards.
func TestCancelInterrupts(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "i.db"))
	db.SetMaxOpenConns(1)
	const forever = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`
	for _, viaRows := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		var err error
		if viaRows {
			var rows *sql.Rows
			rows, err = db.QueryContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c WHERE x < 0`)
			if err == nil {
				rows.Next()
				err = rows.Err()
				rows.Close()
			}
		} else {
			_, err = db.ExecContext(ctx, forever)
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rows %v: err = %v, want the context's deadline", viaRows, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("rows %v: interrupted after %v", viaRows, d)
		}
		var one int
		if err := db.QueryRow(`SELECT 1`).Scan(&one); err != nil || one != 1 {
			t.Errorf("connection after an interrupt: %d, %v", one, err)
		}
	}
}

// RequireWAL refuses a file in rollback-journal mode, saying how to switch,
// and opens it once it is in WAL mode.
func TestRequireWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	plain := open(t, path)
	if _, err := plain.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	strict := open(t, path+"?_require_wal=1")
	err := strict.Ping()
	if !errors.Is(err, ErrNotWAL) || !strings.Contains(err.Error(), "PRAGMA journal_mode=WAL") || !strings.Contains(err.Error(), `"delete"`) {
		t.Fatalf("rollback-journal file: %v", err)
	}
	if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
		t.Errorf("the refusal %q would read as a write conflict to the accountant", err)
	}
	if _, err := plain.Exec(`PRAGMA journal_mode=WAL`); err != nil {
		t.Fatal(err)
	}
	if err := strict.Ping(); err != nil {
		t.Fatalf("after PRAGMA journal_mode=WAL: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	api, err := ext.SQLiteAPI()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		cfg Config
		err string
	}{
		{Config{Name: "x.db"}, "no SQLite API table"},
		{Config{API: api, Name: filepath.Join(dir, "x.db"), VFS: "no-such-vfs"}, "no such vfs: no-such-vfs"},
		{Config{API: api, Name: filepath.Join(dir, "missing", "x.db")}, "unable to open database file (SQLITE_CANTOPEN"},
		{Config{API: api, Name: "file:" + filepath.Join(dir, "absent.db") + "?mode=ro"}, "SQLITE_CANTOPEN"},
		{Config{API: api, Name: "x.db", TxLock: "soon"}, "TxLock"},
	} {
		c, err := NewConnector(tc.cfg)
		if err == nil {
			_, err = c.Connect(context.Background())
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: error %v, want one saying %q", tc.cfg, err, tc.err)
		}
	}
}

// VFSName and Filename read a connection's VFS and file through the table:
// a connection opened through the named VFS on the file shares its locks.
func TestVFSNameAndFilename(t *testing.T) {
	api, err := ext.SQLiteAPI()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.db")
	c, err := NewConnector(Config{API: api, Name: "file:" + path + "?vfs=unix-none"})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := c.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	h := dc.(*conn).db
	if got, err := VFSName(api, unsafePointer(h)); err != nil || got != "unix-none" {
		t.Errorf("VFSName = %q, %v, want unix-none", got, err)
	}
	if got := Filename(api, unsafePointer(h)); got != path {
		t.Errorf("Filename = %q, want %q", got, path)
	}
	m, err := NewConnector(Config{API: api, Name: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := m.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if got := Filename(api, unsafePointer(mc.(*conn).db)); got != "" {
		t.Errorf("Filename of :memory: = %q", got)
	}
}
