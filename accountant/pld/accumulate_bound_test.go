package pld

import (
	"math"
	"testing"
)

// AccumulateDeltaBound is at or above what Accumulate's composition says at
// every epsilon tried, and close to it (within 2e-4 relative and a small
// absolute slack): on symmetric and asymmetric operands, narrow ones
// (direct convolution) and wide ones (FFT), with and without the fit to a
// coarser grid, and across grids (align).
func TestAccumulateDeltaBound(t *testing.T) {
	must := func(p *PLD, err error) *PLD {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fine := Config{Interval: 1.0 / 1024}
	lap := must(fine.Laplace(1, 4))
	sub := must(fine.SubsampledGaussian(0.05, 1.2))
	lapSeries := lap
	for range 12 {
		lapSeries = must(lapSeries.Accumulate(must(fine.Laplace(1, 3+0.1*float64(lapSeries.rem.lo%7))), 1<<14))
	}
	mixed := must(lapSeries.Accumulate(must(sub.SelfCompose(20)), 1<<14))
	cases := 0
	for _, p := range []*PLD{lap, lapSeries, mixed} {
		for _, mu := range []float64{0.05, 0.4, 2, 6} {
			for _, h := range []float64{p.h, 2 * p.h} {
				g := must(Config{Interval: h, MaxBins: 1 << 14}.GaussianMu(mu))
				for _, maxBins := range []int{256, 1 << 14, DefaultMaxBins} {
					c := must(p.Accumulate(g, maxBins))
					for _, eps := range []float64{0, 0.3, 1, 2.5, 7.77, 20} {
						want, err := c.Delta(eps)
						if err != nil {
							t.Fatal(err)
						}
						got, ok := p.AccumulateDeltaBound(g, maxBins, eps)
						if !ok {
							t.Errorf("mu %v h %v bins %d eps %v: no bound", mu, h, maxBins, eps)
							continue
						}
						cases++
						if want >= 1 {
							continue // Delta caps at 1
						}
						if !(got >= want) {
							t.Errorf("mu %v h %v bins %d eps %v: bound %.17g below the composition's %.17g", mu, h, maxBins, eps, got, want)
						}
						tol := 2e-4
						if maxBins == 256 {
							tol = 1e-2 // the bound interpolates on the grid the untrimmed width needs
						}
						if got > want*(1+tol)+1e-10 {
							t.Errorf("mu %v h %v bins %d eps %v: bound %.6g far above the composition's %.6g", mu, h, maxBins, eps, got, want)
						}
					}
				}
			}
		}
	}
	if cases < 100 {
		t.Fatalf("%d cases", cases)
	}
	if _, ok := lap.AccumulateDeltaBound(lap, 1<<14, math.Inf(1)); ok {
		t.Error("a bound at eps +Inf")
	}
}
