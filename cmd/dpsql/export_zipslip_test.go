package main

import (
	"archive/zip"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The attack: whoever hands over a file names a column "../../x" (SQLite
// takes any quoted name), so that the .npz export holds an entry that a
// careless unzip writes outside its directory. The export must refuse such a
// column name instead of writing it into the archive.
func TestExportNPZRefusesPathColumnNames(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "slip.db")
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE slip(a INTEGER, "../../evil" INTEGER); INSERT INTO slip VALUES (1, 2)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	out := filepath.Join(dir, "slip.npz")
	r := run(t, "", "export", db, "slip", "--raw", "--out", out)
	if r.code == 0 {
		zr, err := zip.OpenReader(out)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			t.Errorf("the archive holds the entry %q", f.Name)
		}
		return
	}
	if want := `column "../../evil" of slip`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q, want it to name %s", r.stderr, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused export left %s (%v)", out, err)
	}
}
