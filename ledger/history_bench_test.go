package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.001}
	return historyFileOf(b, n, laplaceEvery, func(int) (mechanism.Mechanism, map[string]any) {
		return lap, map[string]any{"grid": 1.0 / 1024, "sensitivity_requested": 1}
	})
}

// historyFileOf is historyFileT with every laplaceEvery-th charge made by
// other (its mechanism and details, given its index).
func historyFileOf(b testing.TB, n, laplaceEvery int, other func(i int) (mechanism.Mechanism, map[string]any)) string {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), fmt.Sprintf("history%d-%d.db", n, laplaceEvery))
	if n > 0 && laplaceEvery > 0 {
		m, _ := other(laplaceEvery - 1)
		path = filepath.Join(b.TempDir(), fmt.Sprintf("history%d-%d-%s.db", n, laplaceEvery, m.Kind))
	}
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
	for i := range n {
		m, details := gauss, map[string]any{"dim": 1, "noise_tv": 0x1p-125}
		if laplaceEvery > 0 && i%laplaceEvery == laplaceEvery-1 {
			m, details = other(i)
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

// TestWriteHistoryFiles writes, when DPSQL_HISTORY_DIR names a directory,
// the files the one-charge-process figures of docs/benchmarks.md are taken
// on (a whole process: the memos of a benchmark's loop would hide what a
// new process replays): fresh.db, gauss1e5.db (10^5 Gaussian charges),
// lap1e5.db (every tenth a Laplace one) and sub1e3.db (1,000 charges, every
// tenth subsampled as dp_avgmix's and dp_select_topm's are, 1,000 steps, no
// two alike), subtail16.db, subtail4.db and subtail1.db (sub1e3.db and 15
// more subsampled charges: no checkpoint after them, as the rule before
// replayWeight left it; one after every fourth, as the rule of a subsampled
// charge counting 4 left it; one after each, as today's).
//
//	DPSQL_HISTORY_DIR=/tmp/h go test ./ledger -run TestWriteHistoryFiles -v
func TestWriteHistoryFiles(t *testing.T) {
	dir := os.Getenv("DPSQL_HISTORY_DIR")
	if dir == "" {
		t.Skip("DPSQL_HISTORY_DIR is not set")
	}
	sub := func(i int) (mechanism.Mechanism, map[string]any) {
		f := float64(i % 97)
		return mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01 + 1e-5*f, Sigma: 1 + 0.01*f, Steps: 1000}, map[string]any{"noise_tv": 0x1p-115}
	}
	// A tail of 15 subsampled charges after the last checkpoint (as the
	// rule before replayWeight left it: one every 16 others), and the same
	// tail with a checkpoint after every fourth (a subsampled charge
	// counting 4) or after each (today's rule).
	tail := func(every int) string {
		path := historyFileOf(t, 1000, 10, sub)
		if err := appendSubsampledTail(path, 15, every, sub); err != nil {
			t.Fatal(err)
		}
		return path
	}
	files := map[string]func() string{
		"fresh.db":     func() string { return historyFileT(t, 0, 0) },
		"gauss1e5.db":  func() string { return historyFileT(t, 100000, 0) },
		"lap1e5.db":    func() string { return historyFileT(t, 100000, 10) },
		"sub1e3.db":    func() string { return historyFileOf(t, 1000, 10, sub) },
		"subtail16.db": func() string { return tail(16) },
		"subtail4.db":  func() string { return tail(4) },
		"subtail1.db":  func() string { return tail(1) },
	}
	// DPSQL_HISTORY_ONLY=a.db,b.db writes only those (the 10^5-row files
	// take minutes).
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("DPSQL_HISTORY_ONLY"), ",") {
		if n != "" {
			only[n] = true
		}
	}
	for name, make := range files {
		if len(only) > 0 && !only[name] {
			continue
		}
		path := make()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// appendSubsampledTail appends n charges made by sub (indexes 10000 on) to
// the file's scope "default", a checkpoint after every every-th, and writes
// the derived state as the last charge would leave it.
func appendSubsampledTail(path string, n, every int, sub func(int) (mechanism.Mechanism, map[string]any)) error {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		return err
	}
	defer db.Close()
	for i := range n {
		m, details := sub(10000 + i)
		for k, v := range m.Fields() {
			details[k] = v
		}
		params, _ := json.Marshal(details)
		if _, err := appendRow(ctx, db, Row{Kind: EventCharge, Scope: "default", Mechanism: m.Kind, Mu: m.GDPMu(), Params: string(params), Query: "SELECT dp_avgmix(...)"}); err != nil {
			return err
		}
		if (i+1)%every == 0 || i == n-1 {
			rows, err := ReadLedger(ctx, db)
			if err != nil {
				return err
			}
			fs, err := computeState(rows, nil)
			if err != nil {
				return err
			}
			// The figures as a charge writes them (keeping the last
			// checkpoint's compositions in pld), then the checkpoint.
			for _, name := range []string{"default", accountant.FileScope} {
				sc, _ := fs.scope(name)
				st, err := sc.status(name)
				if err != nil {
					return err
				}
				var rig any
				if st.EpsilonRigorous.Valid {
					rig = st.EpsilonRigorous.Float64
				}
				if _, err := db.ExecContext(ctx, `UPDATE dp_scope_state SET through_id = ?, mu_spent = ?, mu_remaining = ?, epsilon_spent = ?, epsilon_rigorous = ? WHERE scope = ?`,
					sc.lastID, st.MuSpent, st.MuRemaining, st.EpsilonSpent, rig, name); err != nil {
					return err
				}
			}
			if (i+1)%every == 0 {
				if _, err := writeCheckpoint(ctx, db, fs, "default"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
