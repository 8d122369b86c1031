package ledger

import (
	"context"
	"database/sql"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
)

// copyFixture copies testdata/ledger_v0.db, written by the schema-version-0
// code, into a temporary directory.
func copyFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ledger_v0.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v0.db")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ReleaseLedger(path) })
	return path
}

// A file written by the first release verifies as it is, is upgraded in place
// by the first charge, keeps its old rows' hashes, and verifies afterwards.
func TestUpgradeVersion0File(t *testing.T) {
	ctx := context.Background()
	path := copyFixture(t)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, has, err := schemaVersion(ctx, db); err != nil || v != 0 || !has {
		t.Fatalf("fixture: schema version %d, ledger %v, %v", v, has, err)
	}
	if n, err := Verify(ctx, db); err != nil || n != 6 {
		t.Fatalf("version-0 file: Verify = %d, %v", n, err)
	}
	before, err := ReadStatuses(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	// Before the upgrade, the ledger's own figures agree with the old file's,
	// except that the room for one more Gaussian call is now the true one
	// (never more than the old sqrt(budget^2 - spent^2) in a Gaussian scope;
	// the old figure was 0 after a Laplace entry) and that scope rows,
	// which holds a replace-one entry, is accounted as a replace-one scope.
	for _, old := range before {
		got, err := l.Remaining(ctx, old.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if !old.EpsilonRigorous.Valid && got.MuRemaining > old.MuRemaining {
			t.Errorf("scope %s: room %v above the old figure %v", old.Scope, got.MuRemaining, old.MuRemaining)
		}
		got.MuRemaining, got.Neighbours = old.MuRemaining, old.Neighbours
		if !sameStatus(got, old) {
			t.Errorf("scope %s: recomputed %+v, the old file says %+v", old.Scope, got, old)
		}
	}
	if _, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.1}}, nil); err != nil {
		t.Fatalf("first charge (upgrades the file): %v", err)
	}
	if v, _, _ := schemaVersion(ctx, db); v != SchemaVersion {
		t.Fatalf("after the charge: schema version %d, want %d", v, SchemaVersion)
	}
	r, err := VerifyAt(ctx, db, nil)
	if err != nil {
		t.Fatalf("upgraded file: %v", err)
	}
	// The old charges include a subsampled one, which no checkpoint covers
	// yet: the first charge writes one after its row (replayWeight).
	if r.Rows != 11 || r.Charges != 7 || r.Budgets != 3 || r.Checkpoints != 1 || r.Scopes != 4 { // 3 scopes and the file's total
		t.Errorf("upgraded file: %+v, want 6 old charges, 3 migrated budget events, 1 new charge and the checkpoint after it", r)
	}
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		wantForm := 1
		if row.ID <= 6 {
			wantForm = 0
		}
		if row.Form != wantForm {
			t.Errorf("row %d: form %d, want %d", row.ID, row.Form, wantForm)
		}
	}
	// Budgets came over unchanged, now as chain events; a scope that held a
	// replace-one entry became a replace-one scope.
	for _, old := range before {
		b, err := LoadBudget(ctx, db, old.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if b.Mu != old.MuBudget || b.Delta != old.Delta || b.Epsilon != old.EpsilonBudget.Float64 {
			t.Errorf("scope %s: budget event %+v, old dp_budget %+v", old.Scope, b, old)
		}
		want := mechanism.AddRemove
		if old.Scope == "rows" {
			want = mechanism.ReplaceOne
		}
		if b.Neighbours != want {
			t.Errorf("scope %s: neighbours %q, want %q", old.Scope, b.Neighbours, want)
		}
	}
	after, err := ReadStatuses(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range before {
		for _, now := range after {
			if now.Scope == old.Scope && now.Scope != "default" && !sameStatus(now, old) {
				t.Errorf("scope %s changed by the upgrade: %+v, was %+v", now.Scope, now, old)
			}
		}
	}
	// The file's total: every charge, in replace-one terms (scope rows is).
	if tot := after[len(after)-1]; len(after) != 4 || tot.Scope != accountant.FileScope || tot.Entries != 7 || tot.Neighbours != mechanism.ReplaceOne ||
		!tot.EpsilonRigorous.Valid || !math.IsInf(tot.MuBudget, 1) {
		t.Errorf("statuses after the upgrade: %+v", after)
	}
}

// agreesOrEarlier reports whether two rigorous epsilons agree as Verify
// accepts them (exactly, or within an earlier rule's distance).
func agreesOrEarlier(a, b float64) bool {
	exact, earlier := rigorousAgrees(a, b)
	return exact || earlier
}

// sameStatus compares figures as Verify does, but for mu_remaining: the
// upgrade records what can still be charged (accountant.Room: in a scope
// that became replace-one, half the add/remove room), where version 0
// recorded the GDP remainder.
func sameStatus(a, b Status) bool {
	rig := a.EpsilonRigorous.Valid == b.EpsilonRigorous.Valid &&
		(!a.EpsilonRigorous.Valid || agreesOrEarlier(a.EpsilonRigorous.Float64, b.EpsilonRigorous.Float64))
	return a.Scope == b.Scope && a.MuBudget == b.MuBudget && a.Delta == b.Delta && a.Entries == b.Entries &&
		close(a.MuSpent, b.MuSpent, 1e-9) &&
		(close(a.EpsilonSpent, b.EpsilonSpent, 1e-9) || math.IsInf(a.EpsilonSpent, 1) && math.IsInf(b.EpsilonSpent, 1)) && rig
}

// close reports whether a and b agree to a relative tol (equal infinities agree).
func close(a, b, tol float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}
