package accountant

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
)

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

func TestNoiseKindsAccounting(t *testing.T) {
	a := math.Log1p(math.Expm1(1)/(2*1e-5)) * (1 + 1e-6) // delta(eps) is flat above eps: give it room
	tl := mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 1, Sigma: 1, Support: a, Epsilon: 1}
	if e, err := RigorousEpsilon([]mechanism.Mechanism{tl}, 1e-5); err != nil || e < 0.999 || e > 1.005 {
		t.Errorf("truncated laplace (1, 1e-5): epsilon %v, %v", e, err)
	}
	// Two of them compose (grouped as one entry of 2 steps), and differ from
	// a truncated Laplace of another support (not grouped with it).
	two, _ := RigorousEpsilon([]mechanism.Mechanism{tl, tl}, 1e-4)
	tl2 := tl
	tl2.Support = 2 * a
	mixed, _ := RigorousEpsilon([]mechanism.Mechanism{tl, tl2}, 1e-4)
	if !(two > 1.5 && two <= 2.01) || !(mixed < two) {
		t.Errorf("composition: two equal %v, with a wider support %v", two, mixed)
	}
	// Uniform weights on 100 intervals, shifts up to 2: delta = 2/100 at any epsilon.
	g := gridMechanism(uniformWeights(100), 2)
	if d, err := RigorousDelta([]mechanism.Mechanism{g}, 2); err != nil || d < 0.02 || d > 0.02+1e-6 {
		t.Errorf("optnoise uniform: delta(2) = %v, %v", d, err)
	}
	// And it composes with a Gaussian entry, not as a Gaussian.
	if d, err := RigorousDelta([]mechanism.Mechanism{g, {Kind: mechanism.KindGaussian, Mu: 1}}, 1); err != nil || d < 0.02+0.12 {
		t.Errorf("optnoise + gaussian: delta(1) = %v, %v", d, err)
	}
}

func TestNoiseKindsValidate(t *testing.T) {
	good := gridMechanism(uniformWeights(10), 1)
	bad := []struct {
		m    mechanism.Mechanism
		want string
	}{
		{mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 1, Sigma: 1}, "support"},
		{mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 2, Sigma: 1, Support: 1}, "exceeds the support"},
		{mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 1, Sigma: math.Inf(1), Support: 2}, "positive and finite"},
		{func() mechanism.Mechanism { m := good; m.Shifts = 0; return m }(), "shifts"},
		{func() mechanism.Mechanism { m := good; m.WeightsSHA256 = strings.Repeat("0", 64); return m }(), "do not match"},
		{func() mechanism.Mechanism { m := good; m.Weights = "!!"; return m }(), "base64"},
		{func() mechanism.Mechanism { w := uniformWeights(10); w[3]++; return gridMechanism(w, 1) }(), "sum to 2^63"},
		{func() mechanism.Mechanism { m := good; m.Neighbours = mechanism.ReplaceOne; return m }(), "add_remove"},
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
	m, err := mechanism.Parse([]byte(mustJSON(t, good.Fields())))
	if err != nil || m.Weights != good.Weights {
		t.Errorf("round trip: %v", err)
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
		m := mechanism.Mechanism{Kind: mechanism.KindOptNoise, Weights: weights, WeightsSHA256: sha, Shifts: shifts}
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
