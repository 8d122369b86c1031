package accountant

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// spendAfter returns the spend of scope b after entries ms (each with the
// sampler error tv), as a ledger keeps it.
func spendAfter(t testing.TB, b Budget, ms []mechanism.Mechanism, tv float64) Spend {
	t.Helper()
	var s Spend
	for i, m := range ms {
		c, err := Decide(b, s, m, tv)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		s = s.With(c)
	}
	return s
}

// roomHolds checks that a Gaussian of mu room is accepted and one of
// room(1 + 3e-4) refused (Room is precise to 1e-4 on a mixed scope).
func roomHolds(t *testing.T, b Budget, s Spend, tv, room float64) {
	t.Helper()
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	if _, err := Decide(b, s, g(room), tv); err != nil {
		t.Errorf("room %v: a Gaussian of that mu is refused: %v", room, err)
	}
	if _, err := Decide(b, s, g(room*(1+3e-4)), tv); !IsBudgetExceeded(err) {
		t.Errorf("room %v: a Gaussian of 1.0003 times it is not refused (%v)", room, err)
	}
}

func TestRoom(t *testing.T) {
	tv := release.NoiseTVOf(1)
	gauss := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.3}
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.2}
	for _, tc := range []struct {
		name string
		b    Budget
		ms   []mechanism.Mechanism
		tv   float64
	}{
		{"gaussian", Budget{Scope: "s", Mu: 1, Delta: 1e-5}, []mechanism.Mechanism{gauss, gauss}, 0},
		{"gaussian, samplers", Budget{Scope: "s", Mu: 1, Delta: 1e-5}, []mechanism.Mechanism{gauss, gauss}, tv},
		// The scope of mu 10^6: the samplers' error caps it near
		// epsilon 75, whatever its mu (the old search answered 0).
		{"mu 1e6, samplers", Budget{Scope: "s", Mu: 1e6, Delta: 1e-5}, []mechanism.Mechanism{gauss}, tv},
		{"mixed", Budget{Scope: "s", Mu: 2, Delta: 1e-5}, []mechanism.Mechanism{gauss, lap, gauss}, tv},
		{"mixed, no samplers", Budget{Scope: "s", Mu: 2, Delta: 1e-5}, []mechanism.Mechanism{lap, gauss}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spendAfter(t, tc.b, tc.ms, tc.tv)
			room, err := Room(context.Background(), tc.b, s, tc.tv)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("room %.9g", room)
			if !(room > 0) {
				t.Fatalf("room %v", room)
			}
			roomHolds(t, tc.b, s, tc.tv, room)
		})
	}
	// Spent to the last drop: nothing fits.
	b := Budget{Scope: "s", Mu: 0.5, Delta: 1e-5}
	s := spendAfter(t, b, []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.5}}, 0)
	if room, err := Room(context.Background(), b, s, 0); err != nil || room != 0 {
		t.Errorf("spent budget: room %v, %v", room, err)
	}
	// No cap: no limit.
	if room, _ := Room(context.Background(), Budget{Scope: FileScope, Mu: math.Inf(1), Delta: 1e-5}, s, 0); !math.IsInf(room, 1) {
		t.Errorf("uncapped: room %v", room)
	}
	// The GDP room of a scope of Gaussians is sqrt(budget^2 - spent^2).
	b = Budget{Scope: "s", Mu: 1, Delta: 1e-5}
	s = spendAfter(t, b, []mechanism.Mechanism{gauss, gauss}, 0)
	if room, _ := Room(context.Background(), b, s, 0); math.Abs(room-math.Sqrt(1-0.18)) > 1e-6 {
		t.Errorf("gaussian room %v, want %v", room, math.Sqrt(1-0.18))
	}
}

// A stopped search returns a mu that fits, and the context's error.
func TestRoomStops(t *testing.T) {
	b := Budget{Scope: "s", Mu: 2, Delta: 1e-5}
	s := spendAfter(t, b, []mechanism.Mechanism{{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.3}}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	room, err := Room(ctx, b, s, 0)
	if err == nil || room < 0 {
		t.Fatalf("cancelled: room %v, %v", room, err)
	}
	if room > 0 {
		roomHolds(t, b, s, 0, room)
	}
}

func TestSamplerCap(t *testing.T) {
	if c := SamplerCap(1e-5, release.NoiseTVOf(1)); !(c > 74 && c < 76) {
		t.Errorf("cap after one value %v, want about 75", c)
	}
	if c := SamplerCap(1e-5, release.NoiseTVOf(1000)); !(c > 67 && c < 69) {
		t.Errorf("cap after a thousand values %v, want about 68", c)
	}
	if !math.IsInf(SamplerCap(1e-5, 0), 1) || SamplerCap(1e-5, 1e-5) != 0 {
		t.Error("cap without samplers, or with their error at delta")
	}
}

// BenchmarkRoom is Room on the scope BenchmarkChargeHistory leaves after
// n mixed charges, its memos emptied: what dp_budget_remaining computes in a
// new process (once per chain head), and what each charge records.
//
//	go test ./accountant -run '^$' -bench Room -benchtime 10x
func BenchmarkRoom(b *testing.B) {
	for _, n := range []int{100, 2000, 10000} {
		b.Run(fmt.Sprintf("charges=%d", n), func(b *testing.B) {
			h := newHistoryScope()
			for i, c := range historyWorkload(b, n) {
				if _, err := h.charge(c); err != nil {
					b.Fatalf("charge %d: %v", i, err)
				}
			}
			tv := release.NoiseTVOf(1)
			c0 := processCPU() // the machine is shared: CPU time, not wall
			for b.Loop() {
				resetRigMemos()
				certified.Clear()
				if _, err := Room(context.Background(), h.scope, h.scopeSpend, tv); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((processCPU()-c0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
