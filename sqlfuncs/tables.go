// Tables: the source tables a per-row release reads whole, and the release
// tables releases create and fill.

package sqlfuncs

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// queryConn runs a query on the connection itself (from inside a running
// statement: SQLite allows nested statements) and calls row for each result
// row: int64, float64, string, []byte or nil for NULL. The values passed to
// row are only valid during the call ([]byte ones point into SQLite's
// memory).
func (c *Conn) queryConn(query string, args []driver.Value, row func(vals []driver.Value) error) error {
	return c.db.Query(query, args, row)
}

// tableExists reports whether the main schema holds an object of this name
// (any case), as outputTable checks again inside the release's transaction.
func (c *Conn) tableExists(name string) (bool, error) {
	var n int64
	err := c.queryConn(`SELECT count(*) FROM main.sqlite_master WHERE lower(name) = ?`, []driver.Value{strings.ToLower(name)}, func(v []driver.Value) error {
		n, _ = v[0].(int64)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("checking the name %q: %w", name, err)
	}
	return n > 0, nil
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// sourceTable is a base table of the main schema that a per-row release
// reads whole.
type sourceTable struct {
	name            string // as stored in the schema
	rowid           string // an unshadowed name of the rowid: rowid, _rowid_ or oid
	features, label string // column names as stored
}

// baseTable checks that name is an ordinary base table of the main schema
// (not a view, a virtual table, a temporary table, a table of an attached
// database, a WITHOUT ROWID table, nor a dpsql or SQLite internal table) that
// has the two columns, and returns it.
func (c *Conn) baseTable(fn, name, features, label string) (*sourceTable, error) {
	low := strings.ToLower(name)
	if strings.HasPrefix(low, "dp_") || strings.HasPrefix(low, "sqlite_") {
		return nil, fmt.Errorf("%s: %q is a dpsql or SQLite internal table", fn, name)
	}
	var typ, stored, ddl string
	found := false
	err := c.queryConn(`SELECT type, name, coalesce(sql, '') FROM main.sqlite_master WHERE lower(name) = ? AND type IN ('table', 'view')`, []driver.Value{low}, func(v []driver.Value) error {
		found = true
		typ, _ = v[0].(string)
		stored, _ = v[1].(string)
		ddl, _ = v[2].(string)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: looking up table %q: %w", fn, name, err)
	}
	if !found {
		var temp bool
		_ = c.queryConn(`SELECT 1 FROM temp.sqlite_master WHERE lower(name) = ?`, []driver.Value{low}, func([]driver.Value) error { temp = true; return nil })
		if temp {
			return nil, fmt.Errorf("%s: %q is a temporary table or view; per-row releases read base tables of the main schema only", fn, name)
		}
		return nil, fmt.Errorf("%s: no table %q in the main schema (give the name of a base table; schema-qualified names and attached databases are not accepted)", fn, name)
	}
	up := strings.ToUpper(ddl)
	switch {
	case typ == "view":
		return nil, fmt.Errorf("%s: %q is a view; per-row releases read whole base tables only (a view can filter, join or reorder the rows: copy what you mean to release into a table)", fn, name)
	case strings.HasPrefix(strings.TrimSpace(up), "CREATE VIRTUAL"):
		return nil, fmt.Errorf("%s: %q is a virtual table; per-row releases read base tables only", fn, name)
	case strings.Contains(up, "WITHOUT ROWID"):
		return nil, fmt.Errorf("%s: %q is a WITHOUT ROWID table; per-row releases need the rowid to link and order the rows", fn, name)
	}
	src := &sourceTable{name: stored}
	cols := map[string]string{}
	err = c.queryConn(`SELECT name FROM pragma_table_xinfo(?, 'main')`, []driver.Value{stored}, func(v []driver.Value) error {
		if s, ok := v[0].(string); ok {
			cols[strings.ToLower(s)] = s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: reading the columns of %q: %w", fn, name, err)
	}
	for _, col := range []struct {
		opt, want string
		dst       *string
	}{{"features", features, &src.features}, {"label", label, &src.label}} {
		s, ok := cols[strings.ToLower(col.want)]
		if !ok {
			return nil, fmt.Errorf("%s: table %q has no column %q (option %q names the column of the %s)", fn, name, col.want, col.opt, col.opt)
		}
		*col.dst = s
	}
	for _, alias := range []string{"rowid", "_rowid_", "oid"} {
		if _, shadowed := cols[alias]; !shadowed {
			src.rowid = alias
			break
		}
	}
	if src.rowid == "" {
		return nil, fmt.Errorf("%s: table %q has columns named rowid, _rowid_ and oid, which hide its rowid", fn, name)
	}
	return src, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// CheckTableName checks the name of a table dpsql creates (a release's
// "into", dpsql import's TABLE): a plain identifier of letters, digits and _,
// not starting with a digit, at most 128 characters, and not starting with
// dp_ or sqlite_ (reserved for the ledger and for SQLite).
func CheckTableName(name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("%q is not a plain table name: use letters, digits and _, not starting with a digit (at most 128 characters)", name)
	}
	if low := strings.ToLower(name); strings.HasPrefix(low, "dp_") || strings.HasPrefix(low, "sqlite_") {
		return fmt.Errorf("%q: table names starting with dp_ or sqlite_ are reserved", name)
	}
	return nil
}

// outputTable checks the name of a release table: a plain identifier, not a
// dpsql or SQLite internal name, and not an existing table or view.
func outputTable(fn string, tx *sql.Tx, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%s: option \"into\" (the name of the new release table) is required", fn)
	}
	if err := CheckTableName(name); err != nil {
		return "", fmt.Errorf("%s: into: %w", fn, err)
	}
	low := strings.ToLower(name)
	if tx != nil {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE lower(name) = ?`, low).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			return "", fmt.Errorf("%s: table %q already exists; releases never overwrite, choose another \"into\"", fn, name)
		}
	}
	return `"` + name + `"`, nil
}

// Progress, when set, is told how far a long release has got (done of total
// rows). The dpsql command line uses it for its progress bar.
var (
	progressMu sync.Mutex
	progress   func(fn string, done, total int)
)

// SetProgress installs a progress callback for long releases (nil removes it).
func SetProgress(f func(fn string, done, total int)) {
	progressMu.Lock()
	progress = f
	progressMu.Unlock()
}

func report(fn string, done, total int) {
	progressMu.Lock()
	f := progress
	progressMu.Unlock()
	if f != nil {
		f(fn, done, total)
	}
}

// batchInsert writes the rows of a release table through one prepared
// single-row INSERT, reused for every row. (It replaced INSERTs of 64 rows
// each: SQLite opens a statement journal for a multi-row INSERT inside a
// transaction, and that journal copied every page of a 188 MB release to a
// temporary file.) Blob arguments may be reused by the caller once add
// returns: SQLite copies bound blobs.
type batchInsert struct {
	tx   *sql.Tx
	sql  string
	stmt *sql.Stmt
	rows int
}

// interruptRows is how often (in rows) a release's writes look for an
// interrupt of their statement.
const interruptRows = 1024

func newBatchInsert(tx *sql.Tx, quotedTable string, cols ...string) *batchInsert {
	return &batchInsert{tx: tx, sql: `INSERT INTO ` + quotedTable + ` (` + strings.Join(cols, ", ") + `) VALUES (` +
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + `)`}
}

// add writes one row; it fails with errWriteInterrupted when the statement
// writing the release is interrupted (checked every interruptRows rows).
func (b *batchInsert) add(vals ...any) error {
	if b.rows++; b.rows%interruptRows == 0 && writeInterrupted(b.tx) {
		return errWriteInterrupted
	}
	if b.stmt == nil {
		var err error
		if b.stmt, err = b.tx.Prepare(b.sql); err != nil {
			return err
		}
	}
	_, err := b.stmt.Exec(vals...)
	return err
}

// flush releases the statement.
func (b *batchInsert) flush() error {
	if b.stmt == nil {
		return nil
	}
	return b.stmt.Close()
}
