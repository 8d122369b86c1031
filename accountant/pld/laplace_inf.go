package pld

import (
	"fmt"
)

// LaplaceInf returns a PLD that dominates a mechanism which is Laplace noise
// with sensitivity/scale = epsilon except on an event of probability at most
// delta, on which it may reveal anything: private partition selection by a
// Laplace threshold whose noisy person counts are released (Korolova,
// Kenthapadi, Mishra, Ntoulas, "Releasing search queries and clicks
// privately", WWW 2009; "Differentially private partition selection",
// Desfontaines, Voss, Gipson, Mandayam 2020, arXiv:2006.03684), where the
// groups held only by the person who is added or removed appear with
// probability at most delta together.
//
// The argument is GaussianMuInf's with the Gaussian replaced by the Laplace
// curve: the groups both neighbours hold give the Laplace part, the groups
// only one holds are independent of it and give, with the person present,
// nothing with probability 1-p and anything with probability p <= delta, and
// without the person nothing. Their loss is at most +infinity on the second
// event and 0 on the first in one direction, -log(1-p) <= -log(1-delta) in
// the other; both are dominated by -log(1-delta) with mass 1-delta plus delta
// at +infinity, and composing that with the Laplace PLD shifts it up by
// -log(1-delta) and adds delta at +infinity: the curve delta_L(eps - s) +
// delta, discretised by connect the dots.
func (c Config) LaplaceInf(epsilon, delta float64) (*PLD, error) {
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("pld: laplace with mass at infinity needs delta in (0, 1), got %v", delta)
	}
	if !finitePos(epsilon) {
		return nil, fmt.Errorf("pld: laplace needs a positive finite epsilon, got %v", epsilon)
	}
	// The shift is discretised by connect the dots (see GaussianMuInf):
	// rounding it up to a whole grid step cost a step of epsilon per entry.
	return c.shiftedInf(laplaceCurve{epsilon}, delta)
}
