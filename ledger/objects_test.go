package ledger

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The catalogue of objects is what this code writes: a fresh file, the
// version-0 fixture and its upgrade all match it, and every dp_ object
// they hold is in it.
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
	known := map[string]bool{}
	for _, o := range append(append(ledgerObjects(SchemaVersion), ledgerObjects(0)...), otherObjects...) {
		known[o.name] = true
	}
	for _, tc := range []struct {
		path string
		v    int
	}{{fresh, SchemaVersion}, {v0, 0}, {upgraded, SchemaVersion}} {
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

// An earlier version-1 release's status view verifies, and the next charge
// replaces it with this version's; any other view is refused.
func TestOlderStatusViewIsUpgraded(t *testing.T) {
	for i, old := range olderStatusViews {
		path := restingLedger(t)
		sqlOn(t, path, `DROP VIEW dp_budget_status`, old)
		if err := verifyFile(path); err != nil {
			t.Fatalf("older view %d: Verify says %v", i, err)
		}
		if err := chargeFile(t, path); err != nil {
			t.Fatalf("older view %d: charge: %v", i, err)
		}
		db, _ := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		var got string
		db.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'dp_budget_status'`).Scan(&got)
		db.Close()
		if got != stored(statusViewSQL) {
			t.Errorf("older view %d: after a charge the view is\n%s", i, got)
		}
	}
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
