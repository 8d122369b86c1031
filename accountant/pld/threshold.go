package pld

import (
	"errors"
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
// dominated by the Gaussian loss measure shifted up by s >= -log(1-delta),
// with delta added at +infinity (total mass 1 + delta): moving mass to larger
// losses and adding mass keep the upper-measure property. Its hockey-stick
// curve is delta_G(eps - s) + delta, convex in e^eps like delta_G, and it is
// discretised by connect the dots like any curve: the shift, some 1e-10, costs
// that much of epsilon, where rounding it up to a whole grid step cost a step
// per statement.
func (c Config) GaussianMuInf(mu, delta float64) (*PLD, error) {
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("pld: gaussian with mass at infinity needs delta in (0, 1), got %v", delta)
	}
	if !finitePos(mu) {
		return nil, fmt.Errorf("pld: mu must be positive and finite, got %v", mu)
	}
	return c.shiftedInf(gaussCurve{mu}, delta)
}

// shiftedInf returns the PLD of base's loss measure shifted up by
// -log(1-delta) with delta at +infinity (see GaussianMuInf), discretised by
// connect the dots. base, symmetric, bounds the shifted measure's lower tail,
// which lies above its own.
func (c Config) shiftedInf(base curve, delta float64) (*PLD, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	sc := shiftCurve{c: base, s: -math.Log1p(-delta) * (1 + 4*unitRoundoff), inf: delta}
	for h := c.Interval; ; h *= 2 {
		rem, err := build(sc, base, h, c.Tail, c.MaxBins)
		var wide errTooWide
		if errors.As(err, &wide) && h < 1 {
			continue
		}
		if err != nil {
			return nil, err
		}
		p := &PLD{h: h, tail: c.Tail, maxBins: c.MaxBins, rem: rem}
		return p, p.trim()
	}
}

// shiftCurve is the loss measure of c moved up by s >= 0, plus inf at
// +infinity: delta(eps) = c.delta(eps - s) + inf, total mass 1 + inf.
type shiftCurve struct {
	c      curve
	s, inf float64
}

func (sc shiftCurve) delta(eps float64) (float64, float64) {
	x := eps - sc.s
	v, e := sc.c.delta(x)
	// eps - s is within u |x| of exact, and a hockey-stick curve's slope
	// is at most 1 in magnitude.
	return v + sc.inf, e + 2*unitRoundoff*(math.Abs(x)+v+sc.inf)
}

func (sc shiftCurve) infMass() float64 { return sc.inf }

func (sc shiftCurve) totalMass() float64 { return (1 + sc.inf) * (1 + 2*unitRoundoff) }
