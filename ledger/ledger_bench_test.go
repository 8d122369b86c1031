package ledger

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/mechanism"
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
	if err := l.Init(ctx, accountant.Budget{Scope: "default", Mu: 1e6, Delta: 1e-5}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		c := benchSub
		if i%2 == 0 {
			c = Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.01}}
		}
		if _, err := l.Charge(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

var benchSub = Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 2, Steps: 10}}

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

// noisyLedger returns a ledger whose scope "default" holds 100 entries like
// c (with their noise_tv), the file's total capped when capped is set.
func noisyLedger(b *testing.B, c Charge, capped bool) *Ledger {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	l, err := OpenLedger(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ReleaseLedger(path) })
	if err := l.Init(ctx, accountant.Budget{Scope: "default", Mu: 1e3, Delta: 1e-5}); err != nil {
		b.Fatal(err)
	}
	if capped {
		if err := l.Init(ctx, accountant.Budget{Scope: accountant.FileScope, Mu: 1e3, Delta: 1e-5}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		if _, err := l.Charge(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkChargeNoiseTV is one whole charge whose details carry a sampler
// error (noise_tv > 0) against a scope already holding 100 such entries, as
// protected-mode statements make them: a composite with a gaussian_inf part,
// and a Laplace release; the file's total uncapped and capped.
func BenchmarkChargeNoiseTV(b *testing.B) {
	ctx := context.Background()
	// Each case's figures differ a little from the others' so that no case
	// finds its PLDs in the memos an earlier one filled.
	for i, tc := range []struct {
		name string
		m    func(x float64) mechanism.Mechanism
	}{
		{"composite", func(x float64) mechanism.Mechanism {
			return mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{{Kind: mechanism.KindGaussianInf, Mu: x, Delta: 1e-10}, {Kind: mechanism.KindGaussian, Mu: x}}}
		}},
		{"laplace", func(x float64) mechanism.Mechanism {
			return mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: x / 2}
		}},
	} {
		for j, capped := range []bool{false, true} {
			name := tc.name + "/uncapped"
			if capped {
				name = tc.name + "/capped"
			}
			b.Run(name, func(b *testing.B) {
				m := tc.m(0.02 + 0.001*float64(2*i+j))
				c := Charge{Scope: "default", Mechanism: m, Details: map[string]any{"noise_tv": 1e-12}}
				l := noisyLedger(b, c, capped)
				b.ResetTimer()
				for b.Loop() {
					if _, err := l.Charge(ctx, c, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkChargeGaussian is one whole charge of a Gaussian release to a
// scope of 100 such entries, this process's memo current (the common case):
// the transaction, the cheap checks, the GDP decision, the row, the commit.
// It is the charge whose fixed costs weigh most.
func BenchmarkChargeGaussian(b *testing.B) {
	ctx := context.Background()
	c := Charge{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.001}}
	l := noisyLedger(b, c, false)
	for b.Loop() {
		if _, err := l.Charge(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
}
