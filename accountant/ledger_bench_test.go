package accountant

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant/pld"
)

// mixedLedger returns a ledger whose scope holds 1,000 mixed entries
// (Gaussian and subsampled Gaussian, alternating).
func mixedLedger(b *testing.B) *Ledger {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	l, err := OpenLedger(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ReleaseLedger(path) })
	if err := l.Init(ctx, Budget{Scope: "default", Mu: 1e6, Delta: 1e-5}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		c := benchSub
		if i%2 == 0 {
			c = Charge{Scope: "default", Mechanism: Mechanism{Kind: KindGaussian, Mu: 0.01}}
		}
		if _, err := l.Charge(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

var benchSub = Charge{Scope: "default", Mechanism: Mechanism{Kind: KindSubsampledGaussian, Q: 0.01, Sigma: 2, Steps: 10}}

// BenchmarkChargeMixedLedger is one charge against a scope that already holds
// 1,000 mixed entries: the whole ledger transaction. "memo": this process made
// the last charge, so the budget check extends its in-memory composition;
// "recompute": the head moved (as after another process's charge), so the
// check first re-reads dp_ledger, checks the whole chain and recomposes every
// scope.
func BenchmarkChargeMixedLedger(b *testing.B) {
	ctx := context.Background()
	l := mixedLedger(b)
	b.Run("memo", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Charge(ctx, benchSub, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recompute", func(b *testing.B) {
		for b.Loop() {
			l.remember(nil)
			if _, err := l.Charge(ctx, benchSub, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRecomputeState is the recomputation alone: read 1,000 mixed
// entries from dp_ledger, check the chain, compose the scope.
func BenchmarkRecomputeState(b *testing.B) {
	ctx := context.Background()
	l := mixedLedger(b)
	for b.Loop() {
		l.remember(nil)
		if _, err := l.state(ctx, l.db); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecomputeStateCold is BenchmarkRecomputeState with the PLD memo
// emptied too, as in a fresh process.
func BenchmarkRecomputeStateCold(b *testing.B) {
	ctx := context.Background()
	l := mixedLedger(b)
	for b.Loop() {
		l.remember(nil)
		rigMemo.mu.Lock()
		rigMemo.m, rigMemo.order, rigMemo.bins = map[rigMemoKey]*pld.PLD{}, nil, 0
		rigMemo.mu.Unlock()
		if _, err := l.state(ctx, l.db); err != nil {
			b.Fatal(err)
		}
	}
}
