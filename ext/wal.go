package ext

import (
	"context"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strings"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// Opening a file never switches its journal mode ([DSN] leaves it as it
// is): a statement that only reads leaves the file as it was. A statement
// that calls a charging function (sqlfuncs.ChargingFunctions) needs WAL mode,
// for its charges commit through the ledger's connection while it reads:
// just before it runs, a file in another mode is switched, and the switch
// said once (ledger.NoteWAL). A charge that finds the file in another mode
// all the same (a charging function behind a view, say) is refused with the
// way to switch it.

var chargingCall = regexp.MustCompile(`(?i)\b(` + strings.Join(sqlfuncs.ChargingFunctions, "|") + `)\s*\(`)

// creatingCall matches the charging functions that create a ledger.
var creatingCall = regexp.MustCompile(`(?i)\b(dp_init|dp_init_epsilon)\s*\(`)

// beforeStatement switches the file to WAL mode if query calls a charging
// function and the file is in another mode. It does nothing inside a
// transaction (where a charge is refused anyway) and reports nothing: a
// switch that fails leaves the charge to refuse, with the reason.
func (c *conn) beforeStatement(query string) {
	if !chargingCall.MatchString(query) || !c.SQLiteConn.AutoCommit() {
		return
	}
	path := c.SQLiteConn.GetFilename("main")
	if path == "" || pragmaValue(c.SQLiteConn, "PRAGMA journal_mode") == "wal" {
		return
	}
	// A charge that will be refused without a write (a newer dpsql's file,
	// objects not dpsql's, no ledger to charge) leaves the file as it is:
	// the statement's charge then refuses with the same error. Its budget
	// is decided only once the statement runs, after the switch.
	if ledger.CheckBeforeWAL(context.Background(), path, creatingCall.MatchString(query)) != nil {
		return
	}
	// Without waiting for readers (SQLite switches only when none reads):
	// the charge then refuses, saying why.
	timeout := pragmaValue(c.SQLiteConn, "PRAGMA busy_timeout")
	pragmaValue(c.SQLiteConn, "PRAGMA busy_timeout = 0")
	switched := pragmaValue(c.SQLiteConn, "PRAGMA journal_mode = WAL") == "wal"
	if timeout != "" {
		pragmaValue(c.SQLiteConn, "PRAGMA busy_timeout = "+timeout)
	}
	if switched {
		ledger.NoteWAL(path)
	}
}

// pragmaValue returns the first value of a PRAGMA, lower case ("" on error).
func pragmaValue(c driver.QueryerContext, pragma string) string {
	rows, err := c.QueryContext(context.Background(), pragma, nil)
	if err != nil {
		return ""
	}
	defer rows.Close()
	v := make([]driver.Value, len(rows.Columns()))
	if len(v) == 0 || rows.Next(v) != nil {
		return ""
	}
	if b, ok := v[0].([]byte); ok {
		return strings.ToLower(string(b))
	}
	return strings.ToLower(fmt.Sprint(v[0]))
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.beforeStatement(query)
	return c.SQLiteConn.PrepareContext(ctx, query)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.beforeStatement(query)
	return c.SQLiteConn.QueryContext(ctx, query, args)
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.beforeStatement(query)
	return c.SQLiteConn.ExecContext(ctx, query, args)
}
