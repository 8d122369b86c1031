package sqlfuncs

import (
	"fmt"
	"math"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Scalar noise beyond Gaussian: dp_laplace, dp_tlaplace and dp_optnoise. Each
// checks its arguments, calibrates the grid law (package release), charges
// the ledger with the mechanism its continuous law describes at sensitivity
// S + grid step, and only then draws the noise.

// noiseArgs reads (x, sensitivity, epsilon) and, with withDelta, delta in
// (0, maxDelta).
func noiseArgs(fn string, args []any, withDelta bool, maxDelta float64) (x, sens, eps, delta float64, err error) {
	if x, err = number(fn, "x", args[0]); err != nil {
		return
	}
	if sens, err = positive(fn, "sensitivity", args[1]); err != nil {
		return
	}
	if eps, err = positive(fn, "epsilon", args[2]); err != nil {
		return
	}
	if withDelta {
		if delta, err = number(fn, "delta", args[3]); err != nil {
			return
		}
		if !(delta > 0 && delta < maxDelta) {
			err = argError(fn, "delta", "must lie strictly between 0 and %v, got %v", maxDelta, delta)
		}
	}
	return
}

// dpLaplace implements dp_laplace(x, sensitivity, epsilon): x plus rounded
// Laplace noise of scale (sensitivity + grid)/epsilon, charged as the Laplace
// mechanism (epsilon, 0)-DP at sensitivity + grid.
func (c *Conn) dpLaplace(args ...any) (any, error) {
	const fn = "dp_laplace"
	if err := arity(fn, args, 3, 3, "(x, sensitivity, epsilon)"); err != nil {
		return nil, err
	}
	x, sens, eps, _, err := noiseArgs(fn, args, false, 0)
	if err != nil {
		return nil, err
	}
	l, err := release.LaplaceFor(sens, eps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	m := mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: eps, Sensitivity: l.Sensitivity, Sigma: l.Scale}
	return c.chargeLaplace(fn, x, l, m, mechanism.Laplace{Grid: l.Grid, SensitivityRequested: sens})
}

// dpTLaplace implements dp_tlaplace(x, sensitivity, epsilon, delta): x plus
// rounded truncated Laplace noise (scale (sensitivity + grid)/epsilon,
// support from delta), charged by its closed-form PLD.
func (c *Conn) dpTLaplace(args ...any) (any, error) {
	const fn = "dp_tlaplace"
	if err := arity(fn, args, 4, 4, "(x, sensitivity, epsilon, delta)"); err != nil {
		return nil, err
	}
	x, sens, eps, delta, err := noiseArgs(fn, args, true, 0.5)
	if err != nil {
		return nil, err
	}
	l, err := release.TruncatedLaplaceFor(sens, eps, delta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	m := mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Epsilon: eps, Delta: l.Delta,
		Sensitivity: l.Sensitivity, Sigma: l.Scale, Support: l.Support}
	return c.chargeLaplace(fn, x, l, m, mechanism.Laplace{Grid: l.Grid, SensitivityRequested: sens, DeltaRequested: delta})
}

func (c *Conn) chargeLaplace(fn string, x float64, l release.LaplaceGrid, m mechanism.Mechanism, rec mechanism.Laplace) (any, error) {
	if _, err := c.Charge(fn, m, rec, nil); err != nil {
		return nil, err
	}
	y := c.noise.AddLaplace(x, l)
	if math.IsInf(y, 0) {
		return nil, fmt.Errorf("%s: the noisy value overflowed", fn)
	}
	return y, nil
}
