package protect

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// keyValues are values that collations and affinities make equal or not.
var keyValues = []string{`'a'`, `'A'`, `'a '`, `'A  '`, `' a'`, `'b'`, `'É'`, `'é'`, `'30'`, `'30.0'`, `' 30'`, `30`, `31`, `30.0`, `30.5`,
	`-0.0`, `1e300`, `9223372036854775807`, `9.2233720368547758e18`, `x'61'`, `x'41'`, `''`}

// For every declared type and collation, the canonical form partitions the
// column's values exactly as SQLite's comparison does (two values are equal
// exactly when their canonical forms are identical), each canonical form is
// equal to its value, and a public key value matches exactly the values
// equal to it once stored in the column (its affinity applied).
func TestCanonicalKeysProperty(t *testing.T) {
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := conn.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	for _, typ := range []string{"", "TEXT", "INTEGER", "REAL", "NUMERIC", "BLOB", "VARCHAR(10)", "DOUBLE", "DATE", "DATETIME", "TIMESTAMP", "BOOLEAN"} {
		for _, coll := range []string{"BINARY", "NOCASE", "RTRIM"} {
			exec(`DROP TABLE IF EXISTS d`)
			exec(`DROP TABLE IF EXISTS p`)
			exec(fmt.Sprintf(`CREATE TABLE d (c %s COLLATE %s)`, typ, coll))
			exec(`CREATE TABLE p (v)`) // public values, as given
			for _, v := range keyValues {
				exec(`INSERT INTO d VALUES (` + v + `)`)
				exec(`INSERT INTO p VALUES (` + v + `)`)
			}
			forms, err := readKeyForms(ctx, conn, "d", []string{"c"})
			if err != nil {
				t.Fatal(err)
			}
			f := forms["c"]
			if f.Collation != coll || f.Affinity != affinityOf(typ) {
				t.Fatalf("%s %s: read %+v", typ, coll, f)
			}
			ca, cb := f.canonical("a.c", false), f.canonical("b.c", false)
			if n := count(fmt.Sprintf(`SELECT count(*) FROM d a, d b WHERE (a.c = b.c) IS NOT (%s = %s AND typeof(%s) = typeof(%s))`, ca, cb, ca, cb)); n != 0 {
				t.Errorf("%s COLLATE %s: %d pairs where the canonical forms disagree with SQLite's comparison", typ, coll, n)
			}
			if n := count(fmt.Sprintf(`SELECT count(*) FROM d a WHERE NOT (a.c = (%s) COLLATE %s)`, ca, coll)); n != 0 {
				t.Errorf("%s COLLATE %s: %d values unequal to their canonical form", typ, coll, n)
			}
			// Read through the Go driver, each canonical form is the value
			// as SQLite stores it: never a time.Time or bool made from
			// the declared type (DATE, BOOLEAN, ...).
			canon := f.canonical("c", false)
			rows, err := conn.QueryContext(ctx, fmt.Sprintf(`SELECT %s, typeof(c), quote(c) FROM (SELECT c FROM d)`, canon))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var v any
				var typeOf, quoted string
				if err := rows.Scan(&v, &typeOf, &quoted); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"text": "string", "integer": "int64", "real": "float64", "blob": "[]uint8"}[typeOf]
				if got := fmt.Sprintf("%T", v); got != want && !(typeOf == "real" && got == "int64") {
					t.Errorf("%s COLLATE %s: the key of %s reads as %s %v, want %s", typ, coll, quoted, got, v, want)
				}
			}
			rows.Close()
			// GROUP BY the canonical form: as many groups as GROUP BY c.
			if g, h := count(`SELECT count(*) FROM (SELECT 1 FROM d GROUP BY c)`), count(fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM d AS a GROUP BY %s)`, ca)); g != h {
				t.Errorf("%s COLLATE %s: %d groups, %d canonical ones", typ, coll, g, h)
			}
			// Public values: stored in a column like c (its affinity
			// applied), they equal exactly the data values whose
			// canonical form is theirs; except text that a numeric
			// affinity would read as a number, which stays text and
			// matches no value of the column (the documented rule:
			// declare the key table's column with the column's type).
			exec(`DROP TABLE IF EXISTS s`)
			exec(fmt.Sprintf(`CREATE TABLE s (v %s COLLATE %s, pv)`, typ, coll))
			exec(`INSERT INTO s SELECT v, v FROM p`)
			pc := f.canonical("s.pv", true)
			same := fmt.Sprintf(`(%s = %s AND typeof(%s) = typeof(%s))`, ca, pc, ca, pc)
			converted := `(typeof(s.pv) = 'text' AND typeof(s.v) <> 'text')`
			if n := count(fmt.Sprintf(`SELECT count(*) FROM d a, s WHERE NOT %s AND (a.c = s.v) IS NOT %s`, converted, same)); n != 0 {
				t.Errorf("%s COLLATE %s: %d pairs where a public value's canonical form disagrees with its comparison once stored", typ, coll, n)
			}
			if n := count(fmt.Sprintf(`SELECT count(*) FROM d a, s WHERE %s AND %s`, converted, same)); n != 0 {
				t.Errorf("%s COLLATE %s: %d data values match a public text the column would read as a number", typ, coll, n)
			}
		}
	}
}

// A GROUP BY on a column of an application's own collation is refused
// before anything is read or charged.
func TestCustomCollationRefused(t *testing.T) {
	const driver = "sqlite3_keys_test_collation"
	sql.Register(driver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		return c.RegisterCollation("backwards", func(a, b string) int { return strings.Compare(b, a) })
	}})
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := sql.Open(driver, "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE c (pid INTEGER, name TEXT COLLATE backwards); INSERT INTO c VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e, _ := testDB(t, 10, Policy{PrivacyUnit: "pid"}, func(ins func(pid, g, x any)) {})
	ctx := context.Background()
	conn, err := e.meta.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := columnCollation(ctx, conn, "t", "g"); err != nil {
		t.Fatal(err)
	}
	// The engine's connection does not know "backwards".
	other, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	oc, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	if _, err := columnCollation(ctx, oc, "c", "name"); !IsRefusal(err) || !strings.Contains(err.Error(), "application's own") {
		t.Errorf("custom collation: %v", err)
	}
	pl := &plan{keys: []string{"name"}}
	if err := pl.setKeyForms(map[string]KeyForm{"name": {Affinity: "TEXT", Collation: "backwards"}}); !IsRefusal(err) {
		t.Errorf("setKeyForms: %v", err)
	}
}
