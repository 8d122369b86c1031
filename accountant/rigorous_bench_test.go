package accountant

import (
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// BenchmarkSpendOfCold composes a scope of 1,000 mixed entries (Gaussian and
// subsampled Gaussian, alternating), as the ledger does when it recomputes
// a scope's state, with the PLD memo emptied, as in a fresh process (the
// ledger's BenchmarkRecomputeState is the whole recomputation, memo warm).
func BenchmarkSpendOfCold(b *testing.B) {
	ms := make([]mechanism.Mechanism, 1000)
	for i := range ms {
		ms[i] = mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 2, Steps: 10}
		if i%2 == 0 {
			ms[i] = mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.01}
		}
	}
	for b.Loop() {
		rigMemo.Clear()
		if _, err := SpendOf("default", mechanism.AddRemove, ms); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCertifiedEpsilon is the root search alone on a scope of 100
// composite entries with a gaussian_inf part, its PLD already folded:
// "bracket" as charges run it, "search" the blind search it replaced.
func BenchmarkCertifiedEpsilon(b *testing.B) {
	var comp Composition
	var err error
	m := mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{{Kind: mechanism.KindGaussianInf, Mu: 0.02, Delta: 1e-10}, {Kind: mechanism.KindGaussian, Mu: 0.02}}}
	for i := 0; i < 100; i++ {
		if comp, err = comp.Add(m); err != nil {
			b.Fatal(err)
		}
	}
	if comp, err = comp.folded(); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func(Composition, float64, float64) (float64, error)
	}{{"bracket", certifiedEpsilonBracket}, {"search", certifiedEpsilonSearch}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.f(comp, 1e-5, 1e-10); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
