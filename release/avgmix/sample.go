package avgmix

import (
	"fmt"
	"math"
	mrand "math/rand/v2"
	"unsafe"
)

// skipper walks a Poisson subset of positions 0..total-1, each included
// independently with probability q, by geometric skips: the gap before the
// next included position has P(gap >= g) = (1-q)^g and is drawn by inversion,
// gap = floor(ln U / ln(1-q)), U uniform on (0, 1]. Work is proportional to
// the number of included positions, and they come out in increasing order.
type skipper struct {
	q, lq float64 // lq = ln(1-q)
}

func newSkipper(q float64) skipper { return skipper{q: q, lq: math.Log1p(-q)} }

// next returns the first included position after pos (pos = -1 to start), or
// total if there is none.
func (s skipper) next(r *mrand.Rand, pos, total int) int {
	if s.q >= 1 {
		return min(pos+1, total)
	}
	u := 1 - r.Float64()            // (0, 1]
	g := math.Log(u) / s.lq         // >= 0, +Inf if lq underflowed
	rem := float64(total - pos - 1) // positions left after pos
	if !(g < rem) {
		return total
	}
	return pos + 1 + int(g) // int truncates: g >= 0, so this is floor
}

// quantStep returns h = 2^(floor(log2 c) - 23): values in [-c, c] are then at
// most 2^24 - 1 steps, exact in float32, and float64 sums of up to 2^29 of
// them are exact.
func quantStep(c float64) float64 {
	_, e := math.Frexp(c) // c = f 2^e, f in [0.5, 1): floor(log2 c) = e - 1
	return math.Ldexp(1, e-24)
}

// clipRows clips each dim-long row of v to L2 norm at most c, in place, and
// rounds every coordinate toward zero to a multiple of quantStep(c).
//
// Why the result has norm <= c: the float64 sum of squares of float32 values
// (each square exact) is within (dim-1) ulps of the true sum, so the true norm
// is at most r (1 + (dim+2) u), u = 2^-53, for the computed norm r. Rows with
// r <= c(1 - clipMargin) are only truncated, which cannot increase any
// coordinate. Longer rows are multiplied by s = c(1 - clipMargin)/r, computed
// within 3 ulps, each product within 1 ulp, and then truncated; so the result
// has norm <= c (1 - clipMargin)(1 + (dim+7) u) < c, as dim <= MaxDim makes
// (dim+7) u far below clipMargin. A final check recomputes each norm.
func clipRows(v []float32, dim int, c float64) error {
	_, err := clip(v, dim, c, false)
	return err
}

// clipUnits is clipRows, but stores each clipped value y = u h (h =
// quantStep(c)) as its units: the int32 u, |u| < 2^24, in the float32's four
// bytes (see group). It returns the number of rows it stored, all of them
// unless it fails; fromUnits turns them back into clipRows' values (with +0
// for every zero).
func clipUnits(v []float32, dim int, c float64) (int, error) { return clip(v, dim, c, true) }

// fromUnits turns the units clipUnits stored in v back into floats.
func fromUnits(v []float32, c float64) { fromUnitsStep(v, float32(quantStep(c))) }

// clip is clipRows, storing units if units is set; it returns the number of
// rows stored.
func clip(v []float32, dim int, c float64, units bool) (int, error) {
	h := quantStep(c)
	invh := 1 / h
	lim := c * (1 - clipMargin)
	chk := c * (1 - clipMargin/2)
	stored := 0
	for off := 0; off < len(v); off += dim {
		row := v[off : off+dim]
		ss := sumSquares(row)
		if !finite(ss) {
			return stored, fmt.Errorf("row %d has a NaN or infinite value", off/dim)
		}
		s := 1.0
		if r := math.Sqrt(ss); r > lim {
			s = lim / r
		}
		if units {
			// |x s / h| < 2^24, so the conversion to int32 is in range; it
			// truncates toward zero like clipRows' math.Trunc.
			u := unitRow(unsafe.SliceData(row), dim)
			for j, x := range row {
				u[j] = int32(float64(x) * s * invh)
			}
		} else {
			for j, x := range row {
				row[j] = float32(math.Trunc(float64(x)*s*invh) * h)
			}
		}
		stored++
		if out := math.Sqrt(clippedSquares(row, units, h)); out > chk {
			return stored, fmt.Errorf("internal error: row %d has norm %v after clipping to %v", off/dim, out, c)
		}
	}
	return stored, nil
}

// sumSquares returns the float64 sum of the squares of row, in four
// interleaved partial sums (independent additions run in parallel; the
// error bound of clipRows holds in any order).
func sumSquares(row []float32) float64 {
	var s0, s1, s2, s3 float64
	j := 0
	for ; j+4 <= len(row); j += 4 {
		r := row[j : j+4 : j+4]
		s0 += float64(r[0]) * float64(r[0])
		s1 += float64(r[1]) * float64(r[1])
		s2 += float64(r[2]) * float64(r[2])
		s3 += float64(r[3]) * float64(r[3])
	}
	for ; j < len(row); j++ {
		s0 += float64(row[j]) * float64(row[j])
	}
	return (s0 + s1) + (s2 + s3)
}

// clippedSquares returns the sum of squares of a clipped row: of its values,
// or of its units times h if units.
func clippedSquares(row []float32, units bool, h float64) float64 {
	if !units {
		return sumSquares(row)
	}
	var s0, s1, s2, s3 float64
	u := unitRow(unsafe.SliceData(row), len(row))
	j := 0
	for ; j+4 <= len(u); j += 4 {
		r := u[j : j+4 : j+4]
		s0 += float64(r[0]) * float64(r[0])
		s1 += float64(r[1]) * float64(r[1])
		s2 += float64(r[2]) * float64(r[2])
		s3 += float64(r[3]) * float64(r[3])
	}
	for ; j < len(u); j++ {
		s0 += float64(u[j]) * float64(u[j])
	}
	return ((s0 + s1) + (s2 + s3)) * h * h
}
