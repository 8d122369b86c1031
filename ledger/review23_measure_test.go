package ledger

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dpsql/dpsql/mechanism"
)

// review23: rows, bytes and time per charge of a run of subsampled charges
// (a checkpoint after each) against a run of Laplace ones (one after every
// 16), in one scope of a new file.
//
//	DPSQL_REVIEW23_N=1000 go test ./ledger -run Review23Measure -v
func TestReview23Measure(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DPSQL_REVIEW23_N"))
	if n == 0 {
		t.Skip("DPSQL_REVIEW23_N is not set")
	}
	ctx := context.Background()
	for _, kind := range []string{"laplace", "subsampled"} {
		l, db, path := newLedger(t, mustBudget(t, "default", 20, 0, 1e-5))
		start := time.Now()
		for i := range n {
			f := float64(i % 97)
			m := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.01 * (1 + 0.001*f)}
			if kind == "subsampled" {
				m = mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01 + 1e-5*f, Sigma: 1 + 0.01*f, Steps: 10}
			}
			if _, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: m, Details: map[string]any{mechanism.KeyNoiseTV: 0x1p-115}, Query: "SELECT 1"}, nil); err != nil {
				t.Fatalf("%s charge %d: %v", kind, i, err)
			}
		}
		el := time.Since(start)
		var rows, ckpts, paramBytes, blob int64
		db.QueryRow(`SELECT count(*), sum(kind = 'checkpoint'), sum(length(params)) FROM dp_ledger`).Scan(&rows, &ckpts, &paramBytes)
		db.QueryRow(`SELECT coalesce(length(pld), 0) FROM dp_scope_state WHERE scope = 'default'`).Scan(&blob)
		var ckptParams int64
		db.QueryRow(`SELECT coalesce(sum(length(params)), 0) FROM dp_ledger WHERE kind = 'checkpoint'`).Scan(&ckptParams)
		db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		st, _ := os.Stat(path)
		t.Logf("%s x%d: %.2f ms/charge (wall, shared machine), rows %d (checkpoints %d), file %d bytes (%.0f/charge), checkpoint params %d bytes (%.0f/checkpoint), kept composition %d bytes",
			kind, n, el.Seconds()*1e3/float64(n), rows, ckpts, st.Size(), float64(st.Size())/float64(n), ckptParams, float64(ckptParams)/float64(max(ckpts, 1)), blob)
	}
}

// review23: the same with many scopes: every checkpoint records every scope
// and rewrites every scope's kept composition, so a subsampled charge in
// one scope costs what all of them hold.
//
//	DPSQL_REVIEW23_SCOPES=30 go test ./ledger -run Review23MeasureScopes -v
func TestReview23MeasureScopes(t *testing.T) {
	ns, _ := strconv.Atoi(os.Getenv("DPSQL_REVIEW23_SCOPES"))
	if ns == 0 {
		t.Skip("DPSQL_REVIEW23_SCOPES is not set")
	}
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 20, 0, 1e-5))
	lap := func(i int) mechanism.Mechanism {
		return mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.01 * (1 + 0.001*float64(i%97))}
	}
	for s := range ns {
		name := "s" + strconv.Itoa(s)
		if err := l.Init(ctx, mustBudget(t, name, 20, 0, 1e-5)); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			if _, err := l.Charge(ctx, Charge{Scope: name, Mechanism: lap(i + s), Query: "SELECT 1"}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	var blobs int64
	db.QueryRow(`SELECT coalesce(sum(length(pld)), 0) FROM dp_scope_state`).Scan(&blobs)
	for _, kind := range []string{"laplace", "subsampled", "laplace", "subsampled"} {
		const n = 40
		start := time.Now()
		var before, ckptBytes int64
		db.QueryRow(`SELECT max(id) FROM dp_ledger`).Scan(&before)
		for i := range n {
			m := lap(i)
			if kind == "subsampled" {
				m = mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1 + 0.01*float64(i), Steps: 1}
			}
			if _, err := l.Charge(ctx, Charge{Scope: "s0", Mechanism: m, Details: map[string]any{mechanism.KeyNoiseTV: 0x1p-115}, Query: "SELECT 1"}, nil); err != nil {
				t.Fatalf("%s charge %d: %v", kind, i, err)
			}
		}
		el := time.Since(start)
		var ckpts int64
		db.QueryRow(`SELECT count(*), coalesce(sum(length(params)), 0) FROM dp_ledger WHERE kind = 'checkpoint' AND id > ?`, before).Scan(&ckpts, &ckptBytes)
		t.Logf("%d scopes (kept compositions %d bytes in all), %d %s charges in one: %.2f ms/charge (wall, shared machine), %d checkpoints of %.0f bytes each",
			ns+1, blobs, n, kind, el.Seconds()*1e3/n, ckpts, float64(ckptBytes)/float64(max(ckpts, 1)))
	}
}
