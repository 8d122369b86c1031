package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The catalogue of objects is what this code writes: a fresh file, the
// version-0 and version-1 fixtures and their upgrades all match it, and
// every dp_ object they hold is in it.
func TestObjectsAreWhatDpsqlWrites(t *testing.T) {
	ctx := context.Background()
	fresh := restingLedger(t, "b")
	v0 := filepath.Join(t.TempDir(), "v0.db")
	copyFile(t, "testdata/ledger_v0.db", v0)
	upgraded := filepath.Join(t.TempDir(), "upgraded.db")
	copyFile(t, "testdata/ledger_v0.db", upgraded)
	if err := chargeFile(t, upgraded); err != nil { // upgrades the file, then charges
		t.Fatal(err)
	}
	v1 := filepath.Join(t.TempDir(), "v1.db")
	copyFile(t, "testdata/ledger_v1.db", v1)
	upgraded1 := filepath.Join(t.TempDir(), "upgraded1.db")
	copyFile(t, "testdata/ledger_v1.db", upgraded1)
	if err := chargeFile(t, upgraded1); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, o := range append(append(append(ledgerObjects(SchemaVersion), ledgerObjects(1)...), ledgerObjects(0)...), otherObjects...) {
		known[o.name] = true
	}
	for _, tc := range []struct {
		path string
		v    int
	}{{fresh, SchemaVersion}, {v0, 0}, {upgraded, SchemaVersion}, {v1, 1}, {upgraded1, SchemaVersion}} {
		db, err := sql.Open("sqlite3", "file:"+tc.path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		v, _, err := schemaVersion(ctx, db)
		if err != nil || v != tc.v {
			t.Errorf("%s: version %d, %v; want %d", tc.path, v, err, tc.v)
		}
		if _, err := checkObjects(ctx, db, v); err != nil {
			t.Errorf("%s: %v", tc.path, err)
		}
		file, err := readMaster(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for name := range file {
			if strings.HasPrefix(name, "dp_") || strings.HasPrefix(name, "sqlite_autoindex_dp_") {
				if !known[name] {
					t.Errorf("%s: %s is not in the catalogue", tc.path, name)
				}
			}
		}
		db.Close()
	}
}

// Each version-1 release's status view verifies in a version-1 file, and
// the next charge upgrades the file: this version's view, user_version 2.
// The same view in a file that says version 2, or version 2's view in a
// file that says version 1, is refused by Verify (naming the view) and by a
// charge, which then changes nothing.
func TestVersion1ViewsAreUpgraded(t *testing.T) {
	for i, old := range v1StatusViews {
		path := restingLedger(t)
		sqlOn(t, path, `DROP VIEW dp_budget_status`, old, `PRAGMA user_version = 1`)
		if err := verifyFile(path); err != nil {
			t.Fatalf("version-1 view %d: Verify says %v", i, err)
		}
		if err := chargeFile(t, path); err != nil {
			t.Fatalf("version-1 view %d: charge: %v", i, err)
		}
		if v, view := versionAndView(t, path); v != SchemaVersion || view != stored(statusViewSQL) {
			t.Errorf("version-1 view %d: after a charge, version %d and the view\n%s", i, v, view)
		}

		claims2 := restingLedger(t)
		sqlOn(t, claims2, `DROP VIEW dp_budget_status`, old)
		refusedNamingView(t, claims2, fmt.Sprintf("version 2 with version-1 view %d", i))
	}
	claims1 := restingLedger(t)
	sqlOn(t, claims1, `PRAGMA user_version = 1`)
	refusedNamingView(t, claims1, "version 1 with version 2's view")
}

// refusedNamingView checks that Verify fails on path naming the status
// view, and that a charge is refused and changes nothing Verify vouches for
// (the version, the objects, the rows; the charge may have switched the file
// to WAL mode before it looked).
func refusedNamingView(t *testing.T, path, what string) {
	t.Helper()
	if err := verifyFile(path); err == nil || !strings.Contains(err.Error(), "view dp_budget_status was replaced") {
		t.Errorf("%s: Verify says %v, want it to name view dp_budget_status", what, err)
	}
	before, _, err := logicalDump(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := chargeFile(t, path); err == nil || !strings.Contains(err.Error(), "view dp_budget_status was replaced") {
		t.Errorf("%s: a charge says %v, want a refusal naming view dp_budget_status", what, err)
	}
	if after, _, err := logicalDump(path); err != nil || after != before {
		t.Errorf("%s: the refused charge changed the file (%v)", what, err)
	}
}

// versionAndView returns path's user_version and dp_budget_status's SQL.
func versionAndView(t *testing.T, path string) (int, string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	var view string
	if err := db.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), coalesce((SELECT sql FROM sqlite_master WHERE name = 'dp_budget_status'), '')`).Scan(&v, &view); err != nil {
		t.Fatal(err)
	}
	return v, view
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
