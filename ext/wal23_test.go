package ext_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
)

// Issue 23 §4: a statement that charges switches a rollback-journal file to
// WAL mode just before it runs, but not when its charge will be refused
// without a write (a newer dpsql's file, a look-alike object): the file's
// bytes stay as they were and no -wal or -shm file is made.
func TestRefusedStatementDoesNotSwitchToWAL(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		setup      []string
	}{
		{"a newer dpsql's file", "written by a newer dpsql", []string{`PRAGMA user_version = 3`}},
		{"a look-alike view", "dp_budget_status", []string{`DROP VIEW dp_budget_status`,
			`CREATE VIEW dp_budget_status AS SELECT 'default' AS scope, 1e9 AS mu_budget, 0 AS mu_spent, 1e9 AS mu_remaining`}},
	} {
		path := filepath.Join(t.TempDir(), "p.db")
		w, err := ext.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.ExecContext(t.Context(), `SELECT dp_init(1.0)`); err != nil {
			t.Fatal(err)
		}
		w.Close()
		plain, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		plain.SetMaxOpenConns(1)
		for _, s := range append([]string{`PRAGMA journal_mode = DELETE`, `CREATE TABLE t(x)`, `INSERT INTO t VALUES (1), (2)`}, tc.setup...) {
			if _, err := plain.ExecContext(t.Context(), s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		plain.Close()
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		db, err := ext.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`SELECT dp_gaussian(count(*), 1, 0.5) FROM t`, `SELECT dp_init_epsilon(1.0, 1e-5, 'other')`} {
			var v any
			if err := db.QueryRowContext(t.Context(), q).Scan(&v); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s says %v, want a refusal naming %q", tc.name, q, err, tc.want)
			}
		}
		for _, closed := range []bool{false, true} {
			if closed {
				db.Close()
			}
			now, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(now, before) {
				t.Errorf("%s (closed %v): the file's bytes changed (header bytes 18-19 %v, were %v)", tc.name, closed, now[18:20], before[18:20])
			}
			for _, ext := range []string{"-wal", "-shm"} {
				if _, err := os.Stat(path + ext); err == nil {
					t.Errorf("%s (closed %v): a %s file exists", tc.name, closed, ext)
				}
			}
		}
	}
}
