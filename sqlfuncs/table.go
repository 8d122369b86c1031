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
