package sqlfuncs

import (
	"fmt"
	"math"
	"math/big"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/vector"
)

// dp_vec_sum(x, clip, mu) is a clipped, noisy vector sum:
//
//	sum over rows of x * min(1, clip/||x||_2)  +  N(0, sigma^2 I)
//
// x is a vector (float32 BLOB or JSON array TEXT), clip the public L2 bound
// of one row's contribution, mu the GDP budget of the call. Adding or removing
// one row moves the clipped sum by at most clip in L2, so sigma is calibrated
// for sensitivity clip (with the noise grid's slack, as for dp_gaussian). The
// result is a float32 BLOB.
//
// # Exact sum
//
// Each clipped row is rounded toward zero onto a fixed-point grid of step
// u = 2^(floor(log2 clip) - vecSumBits), a power of two below clip*2^-24, and
// summed exactly in int64. Rounding toward zero never increases a norm; the
// row's integer vector q is then checked exactly, sum q_i^2 <= (clip/u)^2 in
// integers, and shortened by whole steps if float64 rounding in the scaling
// left it a hair too long. So every row contributes exactly at most clip, and
// the sum T*u is an exact float64 while |T_i| < 2^53 (larger sums, beyond
// about 2^27 rows at full norm, are refused). No slack beyond the noise
// grid's is needed; the fixed point costs at most u per coordinate of
// accuracy.
type vecSumAgg struct {
	c      *Conn
	rows   int
	dim    int
	clip   float64
	mu     float64
	unit   float64 // u, the fixed-point step
	bound  uint64  // floor((clip/u)^2): the largest sum of q_i^2 allowed
	sum    []int64 // T
	buf    []float32
	q      []int64
	failed error
}

// vecSumBits sets the fixed-point step relative to clip: u <= clip*2^-24, and
// a clipped coordinate is at most 2^25 steps.
const vecSumBits = 24

// vecSumMaxAbs is where an int64 coordinate sum stops being an exact float64.
const vecSumMaxAbs = 1 << 53

// Step adds one row.
func (a *vecSumAgg) Step(x, clip, mu any) (err error) {
	const fn = "dp_vec_sum"
	defer func() {
		if err != nil && a.failed == nil {
			a.failed = err
		}
	}()
	defer guard(fn, &err)
	if a.failed != nil {
		return a.failed
	}
	row := a.rows + 1
	if a.rows == 0 {
		if err := a.start(fn, clip, mu); err != nil {
			return err
		}
	} else if !sameNumber(clip, a.clip) || !sameNumber(mu, a.mu) {
		return fmt.Errorf("%s: clip and mu differ at row %d: pass the same constants on every row", fn, row)
	}
	v, err := appendVector(a.buf[:0], x)
	if err != nil {
		return fmt.Errorf("%s: x of row %d: %w", fn, row, err)
	}
	a.buf = v
	if a.rows == 0 {
		a.dim = len(v)
		a.sum = make([]int64, a.dim)
		a.q = make([]int64, a.dim)
	} else if len(v) != a.dim {
		return fmt.Errorf("%s: x of row %d has %d dimensions, earlier rows have %d", fn, row, len(v), a.dim)
	}
	a.clipRow(v, a.q)
	for i, q := range a.q {
		s := a.sum[i] + q
		if s >= vecSumMaxAbs || s <= -vecSumMaxAbs {
			return fmt.Errorf("%s: coordinate %d of the sum exceeds 2^53 fixed-point steps (clip*2^-%d each) after %d rows: too many rows for an exact sum; split the table", fn, i, vecSumBits, row)
		}
		a.sum[i] = s
	}
	a.rows++
	return nil
}

// sameNumber reports whether the SQL value v is the number x.
func sameNumber(v any, x float64) bool {
	switch t := v.(type) {
	case int64:
		return float64(t) == x
	case float64:
		return t == x
	}
	return false
}

// start checks the public parameters on the first row and derives the grid.
func (a *vecSumAgg) start(fn string, clip, mu any) error {
	c, err := checkNumber(fn, positive("clip"), clip)
	if err != nil {
		return err
	}
	if c < 0x1p-100 || c > 0x1p100 {
		return argError(fn, "clip", "must lie in [2^-100, 2^100], got %v", c)
	}
	m, err := checkNumber(fn, positive("mu"), mu)
	if err != nil {
		return err
	}
	a.clip, a.mu = c, m
	_, e := math.Frexp(c) // c = f * 2^e, f in [0.5, 1)
	a.unit = math.Ldexp(1, e-1-vecSumBits)
	a.bound = squareFloor(c / a.unit) // c/u is exact: u is a power of two
	return nil
}

// squareFloor returns floor(r^2) for r in [2^24, 2^25), computed exactly.
func squareFloor(r float64) uint64 {
	sq := new(big.Float).SetPrec(256).SetFloat64(r)
	sq.Mul(sq, sq)
	n, _ := sq.Int(nil) // truncates toward zero: the floor of a positive number
	return n.Uint64()
}

// clipRow writes to q the row v scaled to L2 norm at most clip and rounded
// toward zero onto the fixed-point grid, in steps of a.unit, such that
// sum q_i^2 <= a.bound exactly.
func (a *vecSumAgg) clipRow(v []float32, q []int64) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	scale := 1 / a.unit
	if norm := math.Sqrt(ss); norm > a.clip {
		scale = a.clip / norm / a.unit
	}
	for i, x := range v {
		q[i] = int64(float64(x) * scale) // conversion truncates toward zero
	}
	// Float rounding in ss, the square root and the scaling can leave q a few
	// steps too long; shorten the largest coordinate until the exact integer
	// norm is within the bound.
	for {
		n, over := sumSquares(q)
		if !over && n <= a.bound {
			return
		}
		j := 0
		for i := range q {
			if abs64(q[i]) > abs64(q[j]) {
				j = i
			}
		}
		if q[j] > 0 {
			q[j]--
		} else {
			q[j]++
		}
	}
}

// sumSquares returns sum q_i^2 and whether it overflowed uint64.
func sumSquares(q []int64) (uint64, bool) {
	var n uint64
	for _, x := range q {
		ax := uint64(abs64(x))
		if ax >= 1<<32 {
			return 0, true
		}
		s := ax * ax
		if n+s < n {
			return 0, true
		}
		n += s
	}
	return n, false
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Done charges the ledger and returns the noisy sum. SQLite also calls it
// while cleaning up a failing or interrupted statement: nothing is charged
// or released then.
func (a *vecSumAgg) Done() (out []byte, err error) {
	const fn = "dp_vec_sum"
	defer guard(fn, &err)
	defer func() { err = a.c.annotate(err) }()
	if a.failed != nil {
		return nil, a.failed
	}
	if a.c.db.Interrupted() {
		return nil, fmt.Errorf("%s: the statement was interrupted; nothing was released or charged", fn)
	}
	if a.rows == 0 {
		return nil, fmt.Errorf("%s: no rows to sum (empty input); nothing was charged", fn)
	}
	sigma, err := release.GaussianSigma(a.clip, a.mu, a.dim)
	if err != nil {
		return nil, named(fn, err)
	}
	rec := mechanism.VecSum{Dim: a.dim, Grid: release.Grid(sigma), NoiseTV: release.NoiseTVOf(a.dim),
		Clip: a.clip, FixedPointStep: a.unit}
	m := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: a.mu, Sensitivity: a.clip, Sigma: sigma}
	if _, err := a.c.Charge(fn, m, rec, nil); err != nil {
		return nil, err
	}
	y := make([]float64, a.dim)
	for i, t := range a.sum {
		y[i] = float64(t) * a.unit // exact: |t| < 2^53 and unit is a power of two
	}
	a.c.noise.AddGaussian(y, sigma)
	v := make([]float32, a.dim)
	for i, x := range y {
		v[i] = float32(x)
		if math.IsInf(float64(v[i]), 0) {
			return nil, fmt.Errorf("%s: coordinate %d of the noisy sum overflows float32", fn, i)
		}
	}
	return vector.Encode(v), nil
}
