package pld

import (
	"math"
	"math/rand/v2"
	"testing"
)

// review23: AccumulateDeltaBound is at or above Accumulate's composition's
// curve on adversarial operands: mass at +infinity, single-point and
// two-point PLDs (Discrete), heavy and asymmetric tails (subsampled),
// very coarse grids, operands on different grids, and tiny maxBins that
// force the fit to a much coarser grid.
func TestReview23AccumulateDeltaBoundAdversarial(t *testing.T) {
	rng := rand.New(rand.NewPCG(review23Seed, 1))
	mk := func(h float64, i int) *PLD {
		cfg := Config{Interval: h, MaxBins: 1 << 14}
		var p *PLD
		var err error
		switch i % 9 {
		case 0:
			p, err = cfg.GaussianMu(math.Exp(rng.Float64()*8 - 5)) // mu in e^-5..e^3
		case 1:
			p, err = cfg.Laplace(1, math.Exp(rng.Float64()*6-3))
		case 2:
			p, err = cfg.LaplaceInf(math.Exp(rng.Float64()*5-3), math.Exp(-rng.Float64()*20-1))
		case 3: // single point (with infinite losses around it)
			p, err = cfg.Discrete([]float64{1}, 1)
		case 4: // two points, very unequal: heavy, far loss
			p, err = cfg.Discrete([]float64{1, math.Exp(-rng.Float64() * 30)}, 1)
		case 5:
			p, err = cfg.SubsampledGaussian(math.Exp(-rng.Float64()*6), math.Exp(rng.Float64()*3-2))
		case 6:
			p, err = cfg.TruncatedLaplace(1, math.Exp(rng.Float64()*3-2), 1+rng.Float64()*20)
		case 7:
			p, err = cfg.GaussianMu(1e-4 + rng.Float64()*1e-3)
		case 8:
			w := make([]float64, 2+rng.IntN(6))
			for j := range w {
				w[j] = math.Exp(-rng.Float64() * 25)
			}
			p, err = cfg.Discrete(w, 1+rng.IntN(3))
		}
		if err != nil {
			return nil
		}
		return p
	}
	hs := []float64{1.0 / 8192, 1.0 / 1024, 1.0 / 64, 1.0 / 8, 0.25, 0.5}
	cases, worstUnder := 0, 0.0
	for it := 0; it < review23Iters; it++ {
		h := hs[rng.IntN(len(hs))]
		p := mk(h, rng.IntN(9))
		if p == nil {
			continue
		}
		// Compose one or two more to make a composite of mixed kinds.
		for range rng.IntN(3) {
			q := mk(h, rng.IntN(9))
			if q == nil {
				continue
			}
			if r, err := p.Accumulate(q, 1<<14); err == nil {
				p = r
			}
		}
		h2 := h
		if rng.IntN(3) == 0 {
			h2 = hs[rng.IntN(len(hs))]
		}
		o := mk(h2, rng.IntN(9))
		if o == nil {
			continue
		}
		maxBins := []int{16, 17, 33, 100, 256, 1 << 14, DefaultMaxBins}[rng.IntN(7)]
		c, err := p.Accumulate(o, maxBins)
		if err != nil {
			continue
		}
		for _, eps := range append([]float64{0, 1e-6, 0.01, 0.1, 0.5, 1, 2, 3.7, 7, 15, 30, 68}, rng.Float64()*5, float64(rng.IntN(64))*h2, float64(rng.IntN(64))*h*float64(int(1)<<rng.IntN(8))) {
			want, err := c.Delta(eps)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := p.AccumulateDeltaBound(o, maxBins, eps)
			if !ok {
				continue
			}
			cases++
			if want >= 1 {
				continue
			}
			if !(got >= want) {
				if r := 1 - got/want; r > worstUnder {
					worstUnder = r
				}
				t.Errorf("it %d h %v/%v bins %d eps %v: bound %.17g below the composition's %.17g (relative %.3g)", it, h, h2, maxBins, eps, got, want, got/want-1)
			}
		}
	}
	t.Logf("%d cases, worst relative shortfall %.3g", cases, worstUnder)
	if cases < 500 {
		t.Fatalf("%d cases", cases)
	}
}

var review23Iters = 400
var review23Seed uint64 = 23
