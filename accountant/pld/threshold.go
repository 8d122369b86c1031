package pld

import (
	"fmt"
	"math"
)

// GaussianMuInf returns a PLD that dominates a mechanism which is a mu-GDP
// Gaussian except on an event of probability at most delta, on which it may
// reveal anything: private partition selection by a Gaussian threshold
// ("Differentially private partition selection", Desfontaines, Voss, Gipson,
// Mandayam 2020, arXiv:2006.03684), where a group held only by the person who
// is added or removed appears with probability at most delta.
//
// With the person present the output is, with probability at least 1-delta,
// the Gaussian part (and otherwise anything); without the person it is always
// the Gaussian part. The privacy loss in the direction "person present" is
// therefore at most the Gaussian loss on the first event and +infinity on the
// second; in the other direction it is the Gaussian loss plus -log(1-delta),
// the mass the present side loses to the second event. Both directions are
// dominated by the Gaussian PLD shifted up by -log(1-delta), rounded up to
// whole grid steps, with delta added at +infinity: moving mass to larger
// losses and adding mass keep the upper-measure property.
func (c Config) GaussianMuInf(mu, delta float64) (*PLD, error) {
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("pld: gaussian with mass at infinity needs delta in (0, 1), got %v", delta)
	}
	g, err := c.GaussianMu(mu)
	if err != nil {
		return nil, err
	}
	shift := int(math.Ceil(-math.Log1p(-delta) / g.h))
	out := &PLD{h: g.h, tail: g.tail, maxBins: g.maxBins, rem: g.rem.clone()}
	out.rem.lo += shift
	out.rem.inf += delta
	return out, nil
}
