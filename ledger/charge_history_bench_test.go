package ledger

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/internal/chargemix"
	"github.com/dpsql/dpsql/mechanism"
)

// BenchmarkLedgerChargeHistory is issue 23's goal end to end: 10^4 charges
// of mixed kinds (package chargemix) in one scope of a new file, each
// through Ledger.Charge (its IMMEDIATE transaction, the chain's head, the
// scope's and the file's checks, the room it records in dp_scope_state,
// the row, the checkpoints, the commit), and the mean CPU cost of the first
// and the last 1,000 charges (ms/charge) and their ratio. The accountant's
// BenchmarkChargeHistory is the same pricing without the SQL.
//
//	go test ./ledger -run '^$' -bench 'LedgerChargeHistory/charges=10000' -benchtime 1x
func BenchmarkLedgerChargeHistory(b *testing.B) {
	for _, n := range []int{2000, 10000} {
		b.Run(fmt.Sprintf("charges=%d", n), func(b *testing.B) {
			work, err := chargemix.Workload(n)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "history.db")
				l, err := OpenLedger(path)
				if err != nil {
					b.Fatal(err)
				}
				budget, err := accountant.NewBudget("default", 20, 0, 1e-5)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Init(ctx, budget); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				const block = 100
				var cpu []time.Duration
				var last Receipt
				start, c0 := time.Now(), processCPU()
				done := 0
				for i, c := range work {
					rc, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: c.Mechanism,
						Details: map[string]any{mechanism.KeyNoiseTV: c.NoiseTV}, Query: "SELECT history"}, nil)
					if err != nil {
						b.Fatalf("charge %d (%s): %v", i, c.Mechanism.Kind, err)
					}
					last, done = rc, i+1
					if done%block == 0 {
						c1 := processCPU()
						cpu = append(cpu, c1-c0)
						c0 = c1
						b.Logf("charges %5d-%5d: %.3f ms CPU/charge, epsilon %.4f, remaining mu %.6f", done-block+1, done,
							cpu[len(cpu)-1].Seconds()*1e3/block, rc.Epsilon, rc.MuRemaining)
						if time.Since(start) > *ledgerHistoryCap {
							break
						}
					}
				}
				b.StopTimer()
				if err := ReleaseLedger(path); err != nil {
					b.Fatal(err)
				}
				k := min(10, len(cpu)/2) // blocks in the first and last 1,000
				first, end := meanCPUms(cpu[:k])/block, meanCPUms(cpu[len(cpu)-k:])/block
				b.ReportMetric(float64(done), "charges-done")
				b.ReportMetric(first, "first1k-cpu-ms/charge")
				b.ReportMetric(end, "last1k-cpu-ms/charge")
				b.ReportMetric(end/first, "last/first")
				b.ReportMetric(last.Epsilon, "epsilon-after")
				b.StartTimer()
			}
		})
	}
}

// ledgerHistoryCap bounds one run of BenchmarkLedgerChargeHistory.
var ledgerHistoryCap = flag.Duration("ledgerhistorycap", 20*time.Minute, "BenchmarkLedgerChargeHistory: stop a run after this long")

func meanCPUms(ds []time.Duration) float64 {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s.Seconds() * 1e3 / float64(len(ds))
}
