package ledger

import (
	"context"
	"database/sql"
	"testing"
)

// TestVerifyEarlierRuleFigures: a file whose dp_scope_state was written by
// the accountant that composed scopes by groups of identical entries
// verifies under today's rule (entry by entry, on a bounded grid), whose
// figure for the same entries differs by the discretisation only (here
// recomputed 1.2562065 against the recorded 1.2562020: above it by 4e-6,
// which the tolerance of 1e-6 from before refused).
func TestVerifyEarlierRuleFigures(t *testing.T) {
	db, err := sql.Open("sqlite3", copyV1Fixture(t, "ledger_v1_mixed.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := Verify(context.Background(), db)
	if err != nil {
		t.Fatalf("after %d rows: %v", n, err)
	}
	if n != 46 {
		t.Errorf("%d rows verified, want 46", n)
	}
}
