package accountant

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkChargeMixedLedger is one charge against a scope that already holds
// 1,000 mixed entries (Gaussian and subsampled Gaussian): the whole ledger
// transaction, with the budget check extending the cached composition.
func BenchmarkChargeMixedLedger(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	l, err := OpenLedger(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Init(ctx, Budget{Scope: "default", Mu: 1e6, Delta: 1e-5}); err != nil {
		b.Fatal(err)
	}
	sub := Charge{Scope: "default", Mechanism: Mechanism{Kind: KindSubsampledGaussian, Q: 0.01, Sigma: 2, Steps: 10}}
	for i := 0; i < 1000; i++ {
		c := sub
		if i%2 == 0 {
			c = Charge{Scope: "default", Mechanism: Mechanism{Kind: KindGaussian, Mu: 0.01}}
		}
		if _, err := l.Charge(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := l.Charge(ctx, sub, nil); err != nil {
			b.Fatal(err)
		}
	}
}
