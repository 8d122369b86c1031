package sqlfuncs

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
)

// queryConn runs a query on the connection itself (from inside a running
// statement: SQLite allows nested statements) and calls row for each result
// row. The values passed to row are only valid during the call.
func (c *Conn) queryConn(query string, args []driver.Value, row func(vals []driver.Value) error) error {
	rs, err := c.sc.Query(query, args)
	if err != nil {
		return err
	}
	defer rs.Close()
	vals := make([]driver.Value, len(rs.Columns()))
	for {
		if err := rs.Next(vals); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := row(vals); err != nil {
			return err
		}
	}
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
