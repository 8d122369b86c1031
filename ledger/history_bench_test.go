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

// historyFile writes a file whose scope "default" holds n charges (nine
// Gaussian for one Laplace, the Gaussians with their samplers' error), as
// dpsql would have written them, and returns its path. The rows go in in
// one transaction (a charge each would take minutes); the derived state is
// then computed from the chain and written as a charge writes it.
func historyFile(b *testing.B, n int) string {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), fmt.Sprintf("history%d.db", n))
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
		if i%10 == 9 {
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
// appended directly: dp_scope_state as the last charge would have left it.
func writeHistoryState(ctx context.Context, db *sql.DB) error {
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		return err
	}
	fs, err := computeState(rows, nil)
	if err != nil {
		return err
	}
	return writeStates(ctx, db, fs, "default", accountant.FileScope)
}

func BenchmarkOneChargeProcess(b *testing.B) {
	ctx := context.Background()
	c := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.001}, Details: mechanism.Gaussian{Dim: 1, NoiseTV: 0x1p-125}}
	for _, n := range []int{0, 100000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			path := historyFile(b, n)
			b.ResetTimer()
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
		})
	}
}
