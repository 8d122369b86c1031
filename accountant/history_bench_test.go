package accountant

import (
	"context"
	"flag"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dpsql/dpsql/internal/chargemix"
	"github.com/dpsql/dpsql/mechanism"
)

// A charge's cost must not grow with the scope's history (issue 23, part 3).
// BenchmarkChargeHistory prices a long run of charges of mixed kinds in one
// scope exactly as Ledger.Charge decides them (the scope's check and the
// file's total, then the state each accepted charge leaves and what the
// scope can still charge after it, which the charge records), without the
// SQLite transaction, and reports the mean cost of the first and of the last
// 1,000 charges (ms/charge) and their ratio. Run it once per size:
//
//	go test ./accountant -run '^$' -bench 'ChargeHistory/charges=10000' -benchtime 1x
//
// Every charge's parameters differ a little from the previous ones (a
// deterministic sequence), as a curator's calls do, so that nothing is
// carried by memos keyed by content.

// historyCharge is one charge of the workload: its mechanism and the
// samplers' total-variation bound its details record.
type historyCharge struct {
	m  mechanism.Mechanism
	tv float64
}

// historyWorkload returns n charges of the mixed workload (package
// chargemix, which the ledger's end-to-end benchmark charges too).
func historyWorkload(tb testing.TB, n int) []historyCharge {
	tb.Helper()
	w, err := chargemix.Workload(n)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]historyCharge, n)
	for i, c := range w {
		out[i] = historyCharge{c.Mechanism, c.NoiseTV}
	}
	return out
}

// historyScope is a scope and the file's uncapped total as package ledger
// keeps them in memory, without the SQL.
type historyScope struct {
	scope, total           Budget
	scopeSpend, totalSpend Spend
	room                   bool // compute Room after each charge
}

func newHistoryScope() *historyScope {
	return &historyScope{
		scope: Budget{Scope: "default", Mu: 20, Delta: 1e-5, Neighbours: mechanism.AddRemove},
		total: Budget{Scope: "*", Mu: math.Inf(1), Delta: 1e-5, Neighbours: mechanism.AddRemove},
	}
}

// charge decides c in the scope and the total and keeps the new spends, as
// a ledger charge does.
func (h *historyScope) charge(c historyCharge) (Checked, error) {
	st, err := Decide(h.scope, h.scopeSpend, c.m, c.tv)
	if err != nil {
		return st, err
	}
	tot, err := Decide(h.total, h.totalSpend, c.m, c.tv)
	if err != nil {
		return st, err
	}
	h.scopeSpend = h.scopeSpend.With(st)
	h.totalSpend = h.totalSpend.With(tot)
	// What the scope can still charge, which the charge records (the
	// total without a cap has no limit: Room answers at once).
	if h.room {
		if _, err := Room(context.Background(), h.scope, h.scopeSpend, 0x1p-125); err != nil {
			return st, err
		}
	}
	return st, nil
}

// historyRoom makes BenchmarkChargeHistory price the room each charge
// records (-historyroom=false: the decision alone, as before issue 23's
// part 2, for comparison).
var historyRoom = flag.Bool("historyroom", true, "BenchmarkChargeHistory: compute what remains after each charge, as a ledger charge does")

// historyCap bounds one run of BenchmarkChargeHistory: a history whose
// charges grow costlier stops there and reports how far it got.
var historyCap = flag.Duration("historycap", 20*time.Minute, "BenchmarkChargeHistory: stop a run after this long")

func BenchmarkChargeHistory(b *testing.B) {
	for _, n := range []int{1000, 2000, 10000} {
		b.Run(fmt.Sprintf("charges=%d", n), func(b *testing.B) {
			work := historyWorkload(b, n)
			for b.Loop() {
				b.StopTimer()
				freshProcessMemos()
				h := newHistoryScope()
				h.room = *historyRoom
				b.StartTimer()
				// Process CPU time per block of 100 charges (the machine
				// is shared: wall time would count the others' work).
				const block = 100
				var cpu []time.Duration
				var last Checked
				start, c0 := time.Now(), processCPU()
				done := 0
				for i, c := range work {
					st, err := h.charge(c)
					if err != nil {
						b.Fatalf("charge %d (%s): %v", i, c.m.Kind, err)
					}
					last, done = st, i+1
					if done%block == 0 {
						c1 := processCPU()
						cpu = append(cpu, c1-c0)
						c0 = c1
						b.Logf("charges %5d-%5d: %.3f ms CPU/charge, epsilon %.4f", done-block+1, done, (cpu[len(cpu)-1]).Seconds()*1e3/block, st.Epsilon)
						if time.Since(start) > *historyCap {
							break
						}
					}
				}
				k := min(10, len(cpu)/2) // blocks in the first and last 1,000
				first, end := meanMs(cpu[:k])/block, meanMs(cpu[len(cpu)-k:])/block
				b.ReportMetric(float64(done), "charges-done")
				b.ReportMetric(first, "first1k-cpu-ms/charge")
				b.ReportMetric(end, "last1k-cpu-ms/charge")
				b.ReportMetric(end/first, "last/first")
				b.ReportMetric(last.Epsilon, "epsilon-after")
			}
		})
	}
}

func meanMs(ds []time.Duration) float64 {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s.Seconds() * 1e3 / float64(len(ds))
}

// freshProcessMemos empties the process-wide memos, as in a fresh process.
func freshProcessMemos() {
	resetRigMemos()
	rigMemo.Clear()
	certified.Clear()
}
