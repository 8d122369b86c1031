package ledger

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// gridMechanism returns an optnoise entry of weights w.
func gridMechanism(w []uint64, shifts int) mechanism.Mechanism {
	ws, sha := mechanism.EncodeGridWeights(w)
	return mechanism.Mechanism{Kind: mechanism.KindOptNoise, Weights: ws, WeightsSHA256: sha, Shifts: shifts}
}

// uniformWeights splits 2^63 over n intervals.
func uniformWeights(n int) []uint64 {
	w := make([]uint64, n)
	var sum uint64
	for i := range w {
		w[i] = (1 << 63) / uint64(n)
		sum += w[i]
	}
	w[0] += 1<<63 - sum
	return w
}

// TestVerifyNoisePayload is the audit of a file owner who rewrites a row's
// weights and recomputes the whole hash chain: the chain checks out, but the
// weights no longer match their SHA-256 and audit verification says so.
func TestVerifyNoisePayload(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseLedger(path)
	b, _ := accountant.NewBudget("s", 0, 10, 0.01)
	if err := l.Init(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, Charge{Scope: "s", Mechanism: gridMechanism(uniformWeights(1000), 1)}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := sql.Open("sqlite3", path)
	defer db.Close()
	if n, err := Verify(ctx, db); err != nil || n != 2 { // the budget event and the charge
		t.Fatalf("verify: %d, %v", n, err)
	}
	// Forge: other weights under the old SHA-256, chain rehashed.
	rows, _ := ReadLedger(ctx, db)
	r := rows[len(rows)-1] // the charge
	w := uniformWeights(1000)
	w[0], w[1] = w[0]+w[1], 0
	forged, _ := mechanism.EncodeGridWeights(w)
	r.Params = strings.Replace(r.Params, gridMechanism(uniformWeights(1000), 1).Weights, forged, 1)
	r.Hash = r.ComputeHash()
	if _, err := db.Exec(`DROP TRIGGER dp_ledger_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE dp_ledger SET params = ?, hash = ? WHERE id = ?`, r.Params, r.Hash, r.ID); err != nil {
		t.Fatal(err)
	}
	// The owner puts the trigger back exactly, so only the weights can tell.
	if _, err := db.Exec("CREATE TRIGGER dp_ledger_no_update BEFORE UPDATE ON dp_ledger\nBEGIN SELECT RAISE(ABORT, 'dp_ledger is append-only: rows cannot be updated'); END"); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, db); err == nil || !strings.Contains(err.Error(), "weights_sha256") {
		t.Errorf("verify of forged weights: %v", err)
	}
}
