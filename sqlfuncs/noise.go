package sqlfuncs

import (
	"errors"
	"math"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Scalar noise beyond Gaussian: dp_laplace, dp_tlaplace and dp_optnoise. Each
// checks its arguments, calibrates the grid law (package release), charges
// the ledger with the mechanism its continuous law describes at sensitivity
// S + grid step, and only then draws the noise.

// dpLaplace implements dp_laplace(x, sensitivity, epsilon): x plus rounded
// Laplace noise of scale (sensitivity + grid)/epsilon, charged as the Laplace
// mechanism (epsilon, 0)-DP at sensitivity + grid.
func (c *Conn) dpLaplace(a *args) (any, error) {
	sens, eps := a.num("sensitivity", 0), a.num("epsilon", 0)
	l, err := release.LaplaceFor(sens, eps)
	if err != nil {
		return nil, err
	}
	m := mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: eps, Sensitivity: l.Sensitivity, Sigma: l.Scale}
	return c.chargeLaplace("dp_laplace", a.num("x", 0), l, m, mechanism.Laplace{Grid: l.Grid, SensitivityRequested: sens})
}

// dpTLaplace implements dp_tlaplace(x, sensitivity, epsilon, delta): x plus
// rounded truncated Laplace noise (scale (sensitivity + grid)/epsilon,
// support from delta), charged by its closed-form PLD.
func (c *Conn) dpTLaplace(a *args) (any, error) {
	sens, eps, delta := a.num("sensitivity", 0), a.num("epsilon", 0), a.num("delta", 0)
	l, err := release.TruncatedLaplaceFor(sens, eps, delta)
	if err != nil {
		return nil, err
	}
	m := mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Epsilon: eps, Delta: l.Delta,
		Sensitivity: l.Sensitivity, Sigma: l.Scale, Support: l.Support}
	return c.chargeLaplace("dp_tlaplace", a.num("x", 0), l, m, mechanism.Laplace{Grid: l.Grid, SensitivityRequested: sens, DeltaRequested: delta})
}

func (c *Conn) chargeLaplace(fn string, x float64, l release.LaplaceGrid, m mechanism.Mechanism, rec mechanism.Laplace) (any, error) {
	if _, err := c.Charge(fn, m, rec, nil); err != nil {
		return nil, err
	}
	y := c.noise.AddLaplace(x, l)
	if math.IsInf(y, 0) {
		return nil, errors.New("the noisy value overflowed")
	}
	return y, nil
}
