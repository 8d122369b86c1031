package accountant

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
)

func gridMechanism(w []uint64, shifts int) Mechanism {
	ws, sha := EncodeGridWeights(w)
	return Mechanism{Kind: KindOptNoise, Weights: ws, WeightsSHA256: sha, Shifts: shifts}
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

func TestNoiseKindsAccounting(t *testing.T) {
	a := math.Log1p(math.Expm1(1)/(2*1e-5)) * (1 + 1e-6) // delta(eps) is flat above eps: give it room
	tl := Mechanism{Kind: KindTruncatedLaplace, Sensitivity: 1, Sigma: 1, Support: a, Epsilon: 1}
	if e, err := RigorousEpsilon([]Mechanism{tl}, 1e-5); err != nil || e < 0.999 || e > 1.005 {
		t.Errorf("truncated laplace (1, 1e-5): epsilon %v, %v", e, err)
	}
	// Two of them compose (grouped as one entry of 2 steps), and differ from
	// a truncated Laplace of another support (not grouped with it).
	two, _ := RigorousEpsilon([]Mechanism{tl, tl}, 1e-4)
	tl2 := tl
	tl2.Support = 2 * a
	mixed, _ := RigorousEpsilon([]Mechanism{tl, tl2}, 1e-4)
	if !(two > 1.5 && two <= 2.01) || !(mixed < two) {
		t.Errorf("composition: two equal %v, with a wider support %v", two, mixed)
	}
	// Uniform weights on 100 intervals, shifts up to 2: delta = 2/100 at any epsilon.
	g := gridMechanism(uniformWeights(100), 2)
	if d, err := RigorousDelta([]Mechanism{g}, 2); err != nil || d < 0.02 || d > 0.02+1e-6 {
		t.Errorf("optnoise uniform: delta(2) = %v, %v", d, err)
	}
	// And it composes with a Gaussian entry, not as a Gaussian.
	if d, err := RigorousDelta([]Mechanism{g, {Kind: KindGaussian, Mu: 1}}, 1); err != nil || d < 0.02+0.12 {
		t.Errorf("optnoise + gaussian: delta(1) = %v, %v", d, err)
	}
}

func TestNoiseKindsValidate(t *testing.T) {
	good := gridMechanism(uniformWeights(10), 1)
	bad := []struct {
		m    Mechanism
		want string
	}{
		{Mechanism{Kind: KindTruncatedLaplace, Sensitivity: 1, Sigma: 1}, "support"},
		{Mechanism{Kind: KindTruncatedLaplace, Sensitivity: 2, Sigma: 1, Support: 1}, "exceeds the support"},
		{Mechanism{Kind: KindTruncatedLaplace, Sensitivity: 1, Sigma: math.Inf(1), Support: 2}, "positive and finite"},
		{func() Mechanism { m := good; m.Shifts = 0; return m }(), "shifts"},
		{func() Mechanism { m := good; m.WeightsSHA256 = strings.Repeat("0", 64); return m }(), "do not match"},
		{func() Mechanism { m := good; m.Weights = "!!"; return m }(), "base64"},
		{func() Mechanism { w := uniformWeights(10); w[3]++; return gridMechanism(w, 1) }(), "sum to 2^63"},
		{func() Mechanism { m := good; m.Neighbours = ReplaceOne; return m }(), "add_remove"},
	}
	for _, c := range bad {
		if err := c.m.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.m, err, c.want)
		}
	}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
	// A JSON round trip (as in a ledger row) keeps the weights exactly.
	m, err := ParseMechanism([]byte(mustJSON(t, good.Fields())))
	if err != nil || m.Weights != good.Weights {
		t.Errorf("round trip: %v", err)
	}
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
	b, _ := NewBudget("s", 0, 10, 0.01)
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
	forged, _ := EncodeGridWeights(w)
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

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParseNoiseMechanism feeds arbitrary optnoise descriptions (as dp_cost
// or a ledger row would carry them) to the decoder: errors, never panics,
// and accepted weights always sum to 2^32 and match their hash.
func FuzzParseNoiseMechanism(f *testing.F) {
	good := gridMechanism(uniformWeights(4), 1)
	f.Add(good.Weights, good.WeightsSHA256, 1)
	f.Add("AAAA", good.WeightsSHA256, 2)
	f.Add("", "", 0)
	f.Fuzz(func(t *testing.T, weights, sha string, shifts int) {
		m := Mechanism{Kind: KindOptNoise, Weights: weights, WeightsSHA256: sha, Shifts: shifts}
		if m.Validate() != nil {
			return
		}
		w, err := m.GridWeights()
		if err != nil {
			t.Fatalf("valid mechanism with undecodable weights: %v", err)
		}
		var s uint64
		for _, v := range w {
			s += v
		}
		if s != 1<<63 {
			t.Fatalf("accepted weights sum to %d", s)
		}
	})
}

// Package mechanism validates optnoise shifts against its own copy of the
// PLD accountant's bound.
func TestMaxGridShiftsAgree(t *testing.T) {
	if mechanism.MaxGridShifts != pld.MaxGridShifts {
		t.Errorf("mechanism.MaxGridShifts = %d, pld.MaxGridShifts = %d", mechanism.MaxGridShifts, pld.MaxGridShifts)
	}
}
