package release

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	mrand "math/rand/v2"
)

// GridNoise samples a mixture of uniform laws on 2H consecutive intervals of
// equal width (the optimised noise of package release/optnoise), exactly on a
// power-of-two grid g:
//
//   - an interval j is chosen by an integer alias table (Walker/Vose) over the
//     quantised weights w (summing to 2^63): one 64-bit word of the Noise's
//     stream gives the column (top bits) and the coin (low bits);
//   - a point is chosen uniformly among the m grid cells of the interval
//     (math/rand/v2's Uint64N, exact), and the release is
//     y = (r + (j - H) m + t + 1/2) g for r = round(x/g).
//
// The interval width is m g with m = ceil((S + g)/(D g)), so that neighbours
// (whose r g differ by at most S + g) are at most D intervals apart, and the
// release is a post-processing of r g + W for W the continuous mixture with
// exactly the weights w/2^63 (r + floor(W/g) = floor(r + W/g)). Its privacy is
// therefore that of the piecewise-uniform law with shifts of up to D
// intervals, which is what optnoise.Verify checks and accountant's optnoise
// kind charges. The scale of the noise is D m g = S (1 + O(2^-20)) in units of
// the distribution optimised at sensitivity 1.
type GridNoise struct {
	Grid    float64 // g
	Width   int64   // m: grid cells per interval
	Half    int     // H: intervals on each side of 0
	PerUnit int     // D: intervals per unit of the (padded) sensitivity
	Scale   float64 // D m g >= S + g: the sensitivity-1 law is stretched by Scale
	alias   aliasTable
}

// gridNoiseBits sets the grid relative to the interval width: m is about 2^20.
const gridNoiseBits = 20

// NewGridNoise calibrates the sampler of weights w (sum 2^63, 2H of them)
// optimised with D intervals per unit sensitivity, for a scalar of
// sensitivity S.
func NewGridNoise(w []uint64, perUnit int, sensitivity float64) (*GridNoise, error) {
	if len(w) == 0 || len(w)%2 != 0 {
		return nil, fmt.Errorf("grid noise needs an even, positive number of weights, got %d", len(w))
	}
	if perUnit < 1 || perUnit > 1<<12 {
		return nil, fmt.Errorf("intervals per unit sensitivity must lie in [1, 4096], got %d", perUnit)
	}
	if !(sensitivity > 0) || math.IsInf(sensitivity, 0) || sensitivity < 0x1p-900 || sensitivity > 0x1p900 {
		return nil, fmt.Errorf("sensitivity must be a positive finite number in [2^-900, 2^900], got %v", sensitivity)
	}
	a, err := newAliasTable(w)
	if err != nil {
		return nil, err
	}
	_, e := math.Frexp(sensitivity / float64(perUnit))
	g := math.Ldexp(1, e-1-gridNoiseBits)
	sp := math.Nextafter(sensitivity+g, math.Inf(1))
	m := int64(math.Ceil(sp / (float64(perUnit) * g)))
	for float64(perUnit)*float64(m)*g < sp { // exact products: D m < 2^53
		m++
	}
	return &GridNoise{Grid: g, Width: m, Half: len(w) / 2, PerUnit: perUnit,
		Scale: float64(perUnit) * float64(m) * g, alias: a}, nil
}

// AddGridNoise rounds x to the grid of d and adds one draw of its noise.
func (n *Noise) AddGridNoise(x float64, d *GridNoise) float64 {
	g := d.Grid
	if math.Abs(x) < 0x1p52*g {
		x = math.RoundToEven(x/g) * g // g is a power of two: exact
	}
	return x + (float64(d.draw(n.r))+0.5)*g
}

// draw returns the integer noise (j - H) m + t.
func (d *GridNoise) draw(r *mrand.Rand) int64 {
	j := d.alias.sample(r.Uint64())
	return (int64(j)-int64(d.Half))*d.Width + int64(r.Uint64N(uint64(d.Width)))
}

// aliasTable picks index i with probability w[i]/2^63 exactly.
type aliasTable struct {
	shift uint   // column = u >> shift
	cmask uint64 // coin = u & cmask, uniform below capacity cmask+1
	thr   []uint64
	alias []uint32
}

// newAliasTable builds the table by Vose's method in integer arithmetic:
// n = 2^b columns of capacity 2^(63-b) each hold their own index below thr
// and the alias above.
func newAliasTable(w []uint64) (aliasTable, error) {
	var sum uint64
	for _, v := range w {
		if v > 1<<63 || sum+v > 1<<63 {
			return aliasTable{}, errors.New("weights must sum to 2^63, they exceed it")
		}
		sum += v
	}
	if sum != 1<<63 {
		return aliasTable{}, fmt.Errorf("weights must sum to 2^63, got %d", sum)
	}
	b := bits.Len(uint(len(w) - 1))
	if b > 24 {
		return aliasTable{}, errors.New("too many weights for an alias table (limit 2^24)")
	}
	n := 1 << b
	capa := uint64(1) << (63 - b)
	t := aliasTable{shift: uint(64 - b), cmask: capa - 1, thr: make([]uint64, n), alias: make([]uint32, n)}
	if b == 0 {
		t.shift = 63 // one column: u >> 63 is 0 or 1; fold below
	}
	rest := make([]uint64, n)
	for i, v := range w {
		rest[i] = uint64(v)
	}
	var small, large []uint32
	for i := n - 1; i >= 0; i-- {
		if rest[i] < capa {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s := small[len(small)-1]
		small = small[:len(small)-1]
		l := large[len(large)-1]
		t.thr[s], t.alias[s] = rest[s], l
		rest[l] -= capa - rest[s]
		if rest[l] < capa {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		if rest[i] != capa {
			return aliasTable{}, errors.New("internal error: alias table construction lost mass")
		}
		t.thr[i], t.alias[i] = capa, i
	}
	return t, nil
}

// sample maps a uniform 64-bit word to an index.
func (t *aliasTable) sample(u uint64) uint32 {
	col := u >> t.shift
	if len(t.thr) == 1 {
		col = 0
	}
	if u&t.cmask < t.thr[col] {
		return uint32(col)
	}
	return t.alias[col]
}
