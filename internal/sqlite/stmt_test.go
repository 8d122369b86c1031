package sqlite_test

import (
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/internal/sqlite/linked"
)

// open opens a connection to a new file through the table of the SQLite
// go-sqlite3 links.
func open(t *testing.T) sqlite.Conn {
	t.Helper()
	api, err := linked.API()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.db")
	c, err := sqlite.Open(api, path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenURI|sqlite.OpenFullMutex, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got := c.Filename(); got != path {
		t.Errorf("Filename = %q, want %q", got, path)
	}
	return c
}

func run(t *testing.T, c sqlite.Conn, query string, args ...driver.Value) {
	t.Helper()
	if err := c.Query(query, args, func([]driver.Value) error { return nil }); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Query binds every type a statement takes, reads every type SQLite returns
// (BLOBs pointing into SQLite's memory, an empty one non-nil), and reports
// SQLite's message alone, unwrapping to the *Error with its code.
func TestQuery(t *testing.T) {
	c := open(t)
	run(t, c, `CREATE TABLE v(i INTEGER PRIMARY KEY, x)`)
	in := []driver.Value{nil, int64(-7), 1.5, "héllo\x00", []byte{0, 1, 255}, []byte{}, true}
	for i, v := range in {
		run(t, c, `INSERT INTO v VALUES (?, ?)`, int64(i), v)
	}
	want := []driver.Value{nil, int64(-7), 1.5, "héllo\x00", []byte{0, 1, 255}, []byte{}, int64(1)}
	var got []driver.Value
	err := c.Query(`SELECT x FROM v ORDER BY i`, nil, func(vals []driver.Value) error {
		if b, ok := vals[0].([]byte); ok {
			got = append(got, append([]byte{}, b...)) // valid during the call only
			return nil
		}
		got = append(got, vals[0])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if gb, ok := got[i].([]byte); ok {
			if wb, ok := want[i].([]byte); !ok || string(gb) != string(wb) || gb == nil {
				t.Errorf("row %d = %#v, want %#v", i, got[i], want[i])
			}
		} else if got[i] != want[i] {
			t.Errorf("row %d = %#v, want %#v", i, got[i], want[i])
		}
	}
	err = c.Query(`SELECT * FROM missing`, nil, func([]driver.Value) error { return nil })
	var se *sqlite.Error
	if err == nil || err.Error() != "no such table: missing" || !errors.As(err, &se) || se.Code != 1 {
		t.Errorf("query of a missing table: %v (%#v)", err, se)
	}
	stop := errors.New("stop")
	if err := c.Query(`SELECT 1 UNION ALL SELECT 2`, nil, func([]driver.Value) error { return stop }); err != stop {
		t.Errorf("the row callback's error: got %v", err)
	}
	if err := c.Query(` -- nothing `, nil, func([]driver.Value) error { t.Error("a row"); return nil }); err != nil {
		t.Errorf("a comment alone: %v", err)
	}
	if err := c.Query(`SELECT ?`, []driver.Value{struct{}{}}, func([]driver.Value) error { return nil }); err == nil || !strings.Contains(err.Error(), "cannot bind") {
		t.Errorf("binding a struct: %v", err)
	}
}

// Prepare skips empty statements and returns the text after the one it
// prepared; a Conn of no connection fails instead of crashing.
func TestPrepare(t *testing.T) {
	c := open(t)
	s, rest, err := c.Prepare(";; /* c */ SELECT 1; SELECT 2")
	if err != nil || s == nil || strings.TrimSpace(rest) != "SELECT 2" {
		t.Fatalf("Prepare = %v, %q, %v", s, rest, err)
	}
	s.Finalize()
	s.Finalize() // again: nothing
	if s, _, err := c.Prepare(" ; -- x"); s != nil || err != nil {
		t.Errorf("Prepare of no statement = %v, %v", s, err)
	}
	var none sqlite.Conn
	if _, _, err := none.Prepare("SELECT 1"); err == nil {
		t.Error("Prepare on no connection succeeded")
	}
	if none.Interrupted() || none.Autocommit() || none.Filename() != "" {
		t.Error("a Conn of no connection reports state")
	}
}
