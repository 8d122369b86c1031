package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// A charge's cost must not grow with the ledger's history (issue 23, part
// 3): a process that opens a file and makes one charge should cost at most
// twice as much on a file of 10^5 ledger rows as on a fresh one.
// BenchmarkOneChargeProcess is that process without the process: a ledger
// connection opened afresh (nothing in memory), one charge, closed.
//
//	go test ./ledger -run '^$' -bench OneChargeProcess -benchtime 5x

// historyFile writes a file whose scope "default" holds n charges (a
// Laplace one every laplaceEvery, 0 for none, the others Gaussian with
// their samplers' error), as dpsql would have written them, and returns its
// path. The rows go in in
// one transaction (a charge each would take minutes); the derived state is
// then computed from the chain and written as a charge writes it.
func historyFile(b *testing.B, n, laplaceEvery int) string { return historyFileT(b, n, laplaceEvery) }

func historyFileT(b testing.TB, n, laplaceEvery int) string {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), fmt.Sprintf("history%d-%d.db", n, laplaceEvery))
	l, err := OpenLedger(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Init(ctx, accountant.Budget{Scope: "default", Mu: 50, Delta: 1e-5}); err != nil {
		b.Fatal(err)
	}
	if err := ReleaseLedger(path); err != nil {
		b.Fatal(err)
	}
	if n == 0 {
		return path
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	gauss := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.001}
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.001}
	for i := range n {
		m, details := gauss, map[string]any{"dim": 1, "noise_tv": 0x1p-125}
		if laplaceEvery > 0 && i%laplaceEvery == laplaceEvery-1 {
			m, details = lap, map[string]any{"grid": 1.0 / 1024, "sensitivity_requested": 1}
		}
		for k, v := range m.Fields() {
			details[k] = v
		}
		params, _ := json.Marshal(details)
		if _, err := appendRow(ctx, tx, Row{Kind: EventCharge, Scope: "default", Mechanism: m.Kind, Mu: m.GDPMu(), Params: string(params), Query: "SELECT dp_gaussian(x, 1, 0.001) FROM t"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := writeHistoryState(ctx, db); err != nil {
		b.Fatal(err)
	}
	return path
}

// writeHistoryState writes the derived state of a file whose rows were
// appended directly: dp_scope_state and a checkpoint as the last charge
// would have left them.
func writeHistoryState(ctx context.Context, db *sql.DB) error {
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		return err
	}
	fs, err := computeState(rows, nil)
	if err != nil {
		return err
	}
	if err := writeStates(ctx, db, fs, "default", accountant.FileScope); err != nil {
		return err
	}
	// The last charge would have written a checkpoint: charges write one
	// at least every 256 rows (checkpoint.go).
	_, err = writeCheckpoint(ctx, db, fs, "default")
	return err
}

func BenchmarkOneChargeProcess(b *testing.B) {
	ctx := context.Background()
	c := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.001}, Details: mechanism.Gaussian{Dim: 1, NoiseTV: 0x1p-125}}
	for _, h := range []struct{ n, laplaceEvery int }{{0, 0}, {100000, 0}, {100000, 10}} {
		name := fmt.Sprintf("rows=%d", h.n)
		if h.laplaceEvery > 0 {
			name += fmt.Sprintf("/laplace_every=%d", h.laplaceEvery)
		}
		b.Run(name, func(b *testing.B) {
			path := historyFile(b, h.n, h.laplaceEvery)
			b.ResetTimer()
			c0 := processCPU()
			for b.Loop() {
				l, err := OpenLedger(path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Charge(ctx, c, nil); err != nil {
					b.Fatal(err)
				}
				if err := ReleaseLedger(path); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((processCPU()-c0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
