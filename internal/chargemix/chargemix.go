// Package chargemix is the workload of issue 23's accounting benchmarks: a
// long run of charges of mixed kinds in one scope (Gaussian, Laplace,
// truncated Laplace, optimised noise and protected GROUP BY statements), as
// the accountant's BenchmarkChargeHistory prices them and the ledger's
// BenchmarkLedgerChargeHistory charges them through Ledger.Charge.
package chargemix

import (
	"math"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/optnoise"
)

// Charge is one charge of the workload: its mechanism and the samplers'
// total-variation bound its details record (noise_tv).
type Charge struct {
	Mechanism mechanism.Mechanism
	NoiseTV   float64
}

// Workload returns n charges rotating over Gaussian, Laplace, truncated
// Laplace, optimised noise and a protected GROUP BY (partition selection as
// gaussian_inf, two Gaussian aggregates): in every ten charges two of each
// of the first three, three statements and one optimised noise, scaled so
// that 10^4 of them stay below the samplers' cap at delta 1e-5 (epsilon
// about 33) in a scope of mu 20. Every charge's parameters differ a little
// from the previous ones (a deterministic sequence), as a curator's calls
// do, so that nothing is carried by memos keyed by content.
func Workload(n int) ([]Charge, error) {
	var opt []mechanism.Mechanism
	for _, e := range []float64{0.1, 0.12} {
		p, err := optnoise.Default(e, 1e-9, optnoise.L1)
		if err != nil {
			return nil, err
		}
		d, err := optnoise.Optimise(p)
		if err != nil {
			return nil, err
		}
		g, err := release.NewGridNoise(d.Weights, p.PerUnit, 1)
		if err != nil {
			return nil, err
		}
		ws, sha := mechanism.EncodeGridWeights(d.Weights)
		opt = append(opt, mechanism.Mechanism{Kind: mechanism.KindOptNoise, Epsilon: e, Delta: d.Delta, Sensitivity: g.Scale,
			Weights: ws, WeightsSHA256: sha, Shifts: p.PerUnit})
	}
	out := make([]Charge, n)
	for i := range out {
		// A slowly varying factor in [0.75, 1.25]: no two charges alike.
		f := 1 + 0.25*math.Sin(float64(i)*0.61803)
		var c Charge
		switch [10]int{0, 1, 2, 4, 0, 1, 2, 4, 4, 3}[i%10] {
		case 0:
			c = Charge{mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.04 * f}, release.NoiseTVOf(1)}
		case 1:
			l, err := release.LaplaceFor(1, 0.03*f)
			if err != nil {
				return nil, err
			}
			c.Mechanism = mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: l.Epsilon, Sensitivity: l.Sensitivity, Sigma: l.Scale}
		case 2:
			l, err := release.TruncatedLaplaceFor(1, 0.03*f, 1e-9)
			if err != nil {
				return nil, err
			}
			c.Mechanism = mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Epsilon: l.Epsilon, Delta: l.Delta,
				Sensitivity: l.Sensitivity, Sigma: l.Scale, Support: l.Support}
		case 3:
			c.Mechanism = opt[(i/10)%2]
		case 4:
			c = Charge{mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{
				{Kind: mechanism.KindGaussianInf, Mu: 0.02 * f, Delta: 1e-10},
				{Kind: mechanism.KindGaussian, Mu: 0.02 * f},
				{Kind: mechanism.KindGaussian, Mu: 0.01 * f},
			}}, release.NoiseTVOf(200)}
		}
		out[i] = c
	}
	return out, nil
}
