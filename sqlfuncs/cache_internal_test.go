package sqlfuncs

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// TestRaiseCache checks the page cache a release is written with: about
// pageSize²/7 bytes, at most maxReleaseCacheKiB, never below the
// connection's own, and the connection's setting back once the release is
// written.
func TestRaiseCache(t *testing.T) {
	for _, tc := range []struct {
		pageSize int
		cache    int // the connection's cache_size
		during   int // want, during the release
	}{
		{16384, -2000, -37449},    // 16384²/7 bytes
		{4096, -2000, -2340},      // just above SQLite's default
		{65536, -2000, -65536},    // capped
		{16384, -100000, -100000}, // already larger: left alone
		{16384, 500, -37449},      // 500 pages of 16 KiB = 8000 KiB
		{16384, 4000, 4000},       // 4000 pages = 64000 KiB: left alone
	} {
		t.Run(fmt.Sprintf("%d/%d", tc.pageSize, tc.cache), func(t *testing.T) {
			db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "c.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for _, q := range []string{fmt.Sprintf(`PRAGMA page_size = %d`, tc.pageSize), `CREATE TABLE t(x)`, fmt.Sprintf(`PRAGMA cache_size = %d`, tc.cache)} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			restore, err := raiseCache(tx)
			if err != nil {
				t.Fatal(err)
			}
			var during, after int
			if err := tx.QueryRow(`PRAGMA cache_size`).Scan(&during); err != nil {
				t.Fatal(err)
			}
			restore()
			if err := tx.QueryRow(`PRAGMA cache_size`).Scan(&after); err != nil {
				t.Fatal(err)
			}
			if during != tc.during || after != tc.cache {
				t.Errorf("cache_size %d during the release and %d after, want %d and %d", during, after, tc.during, tc.cache)
			}
		})
	}
}
