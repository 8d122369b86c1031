package ext_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
)

// TestOpenReadOnly checks that a read-only connection reads, refuses every
// write, cannot charge (it has no dpsql functions: a charge would write
// through the ledger's own connection), leaves a rollback-journal file in that mode, and
// reports a missing file instead of creating it.
func TestOpenReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a b&c.db") // the name is escaped into the DSN
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
	if _, err := plain.ExecContext(t.Context(), `PRAGMA journal_mode = DELETE; CREATE TABLE t(x); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	plain.Close()

	db, err := ext.OpenReadOnly(t.Context(), path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("reading: %d, %v", n, err)
	}
	for _, c := range []struct{ q, want string }{
		{`INSERT INTO t VALUES (2)`, "readonly"},
		{`SELECT gdp_spend(0.1)`, "no such function"},
	} {
		if _, err := db.ExecContext(t.Context(), c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on a read-only connection: %v, want an error saying %q", c.q, err, c.want)
		}
	}
	db.ExecContext(t.Context(), `PRAGMA journal_mode = WAL`) // a read-only connection cannot switch
	var mode string
	if err := db.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "delete" {
		t.Errorf("journal mode after reading: %q, %v; want delete", mode, err)
	}

	missing := filepath.Join(t.TempDir(), "missing.db")
	if _, err := ext.OpenReadOnly(t.Context(), missing, false); err == nil {
		t.Error("OpenReadOnly of a missing file succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("OpenReadOnly created %s: %v", missing, err)
	}
}
