package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// testdata/ledger_v2.db is a ledger written by the schema-version-2 code
// that introduced the version (the recipe of ledger_v1.db less one charge: a
// row of every mechanism kind in three add/remove scopes, no checkpoint yet),
// and testdata/ledger_v2.json
// the figures that code computed from it. The version-1 fixtures stay: they
// are what files of version 1 hold. When a later version comes, this file is
// what a version-2 file holds: it must keep verifying, reading unchanged and
// re-accounting to these figures. Regenerate (only on purpose, never after
// SchemaVersion moved past 2) with
//
//	DPSQL_WRITE_LEDGER_V2_FIXTURE=1 go test ./ledger -run TestLedgerV2Fixture
const (
	fixtureV2        = "ledger_v2.db"
	fixtureV2Figures = "testdata/ledger_v2.json"
)

func TestLedgerV2Fixture(t *testing.T) {
	ctx := context.Background()
	if os.Getenv("DPSQL_WRITE_LEDGER_V2_FIXTURE") == "1" {
		if SchemaVersion != 2 {
			t.Fatalf("the version-2 fixture is written by version-2 code; this is version %d", SchemaVersion)
		}
		tmp := filepath.Join(t.TempDir(), "w.db")
		budgets, all := fixtureFiles["ledger_v1.db"](t)
		var charges []Charge
		for _, c := range all {
			// Without the eps scope's subsampled charge: no checkpoint
			// when it was written (their kept compositions are half a
			// megabyte, and were changing that day).
			if c.Scope != "eps" || c.Mechanism.Kind != mechanism.KindSubsampledGaussian {
				charges = append(charges, c)
			}
		}
		writeLedgerFixture(t, tmp, budgets, charges)
		db, err := sql.Open("sqlite3", tmp)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join("testdata", fixtureV2)
		os.Remove(dst)
		if _, err := db.Exec(`VACUUM INTO ?`, dst); err != nil {
			t.Fatal(err)
		}
		db.Close()
		b, _ := json.MarshalIndent(fixtureFiguresOf(t, copyV1Fixture(t, fixtureV2)), "", "  ")
		if err := os.WriteFile(fixtureV2Figures, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := copyV1Fixture(t, fixtureV2)
	if v, view := versionAndView(t, path); v != 2 || view != stored(statusViewSQL) {
		t.Fatalf("%s: version %d and the view\n%s", fixtureV2, v, view)
	}
	// Read as it is: verified (a figure recorded by an earlier search or
	// rule passes with a note), its statuses read, not a byte changed.
	before := fileBytes(t, path)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyAt(ctx, db, nil)
	if err != nil || rep.Version != 2 || rep.Charges != 11 || rep.Checkpoints != 0 {
		t.Errorf("Verify: %+v, %v; want version 2, 11 charges, no checkpoint", rep, err)
	}
	for _, n := range rep.Notes {
		t.Logf("Verify's note: %s", n)
	}
	if _, err := ReadStatuses(ctx, db, ""); err != nil {
		t.Error(err)
	}
	db.Close()
	if !testing.Short() {
		var want fixtureGolden
		b, err := os.ReadFile(fixtureV2Figures)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got := fixtureFiguresOf(t, path)
		same := func(x, y jsonFloat) bool {
			a, b := float64(x), float64(y)
			return a == b || math.IsInf(a, 1) && math.IsInf(b, 1) || math.Abs(a-b) <= 1e-9*math.Abs(b)
		}
		if len(got.Scopes) != len(want.Scopes) || len(got.Rows) != len(want.Rows) {
			t.Fatalf("read as %d scopes, %d rows; written with %d, %d", len(got.Scopes), len(got.Rows), len(want.Scopes), len(want.Rows))
		}
		for scope, w := range want.Scopes {
			// What can still be charged is a search, to a relative 1e-4 on
			// mixed scopes (accountant.Room), which may move within that.
			g := got.Scopes[scope]
			room := same(g.MuRemaining, w.MuRemaining) || math.Abs(float64(g.MuRemaining)/float64(w.MuRemaining)-1) <= 2e-4
			if !same(g.MuSpent, w.MuSpent) || !same(g.EpsilonSpent, w.EpsilonSpent) || !room || g.Entries != w.Entries {
				t.Errorf("scope %q re-accounts as %+v, was %+v", scope, g, w)
			}
		}
		for i, w := range want.Rows {
			if g := got.Rows[i]; g.ID != w.ID || g.Kind != w.Kind || !same(g.GDPMu, w.GDPMu) || !same(g.Epsilon, w.Epsilon) {
				t.Errorf("row re-accounts as %+v, was %+v", g, w)
			}
		}
	}
	if !equalBytes(fileBytes(t, path), before) {
		t.Error("reading the version-2 fixture changed it")
	}
	// A charge keeps it at version 2.
	if err := chargeFile(t, path); err != nil {
		t.Fatal(err)
	}
	if v, _ := versionAndView(t, path); v != 2 {
		t.Errorf("after a charge: version %d", v)
	}
	if err := verifyFile(path); err != nil {
		t.Error(err)
	}
}

func equalBytes(a, b []byte) bool { return string(a) == string(b) }
