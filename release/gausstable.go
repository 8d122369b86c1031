package release

import (
	"math"
	"math/big"
	"math/bits"
)

// The rounded-Gaussian sampler's tables. The algorithm and its error bound
// are documented on [Noise.AddGaussian] ("Sampler and its error").

const (
	gaussBlockBits = 7
	gaussBlock     = 1 << gaussBlockBits // magnitudes per block
	gaussCut       = 13                  // the table covers |k| <= gaussCut*s at least
	maxGaussTables = 64                  // cache bound, about 20 MiB at most

	// gaussTau is the fast path's margin: its float64 acceptance probability
	// is within 2^-44 of the exact one, relative, and it decides only when U
	// is further than gaussTau (relative) from it.
	gaussTau = 0x1p-36
	// gaussWeightSlack keeps M W_j >= Pt(128j) despite the float64 error
	// (2^-44.9) of the Pt estimate the weights are made from.
	gaussWeightSlack = 0x1p-30
	// gaussBigPrec is the precision of the slow path (alphaBig).
	gaussBigPrec = 256
)

// gaussColumn is one column of the alias table over blocks.
type gaussColumn struct {
	thr   uint64    // keep this column's block iff coin < thr
	alias uint32    // the other block of the column
	sq    [2]uint32 // squeeze of own and alias block: accept at once iff U's top 32 bits are below it
}

// gaussTable samples the rounded Gaussian of scale s (in grid units).
type gaussTable struct {
	s      float64
	shift  uint   // 64 - log2(len(cols)): column = u >> shift
	cmask  uint64 // coin = u & cmask; column capacity is cmask+1
	cols   []gaussColumn
	nblk   int       // J: blocks with index < nblk exist
	w      []uint64  // W_j, the alias weights (sum 2^63)
	beta   []float64 // float64 estimate of Pt(128j)/(M W_j)
	m      float64   // M, the acceptance normaliser: alpha_j(mm) = Pt(mm)/(M W_j)
	inv2s2 float64   // 1/(2 s^2)
	c0     float64   // 1 - 1/(24 s^2)
	c2     float64   // 1/(24 s^4)
}

// block maps a uniform word to a block index and its squeeze. The choice is
// written for a conditional move: the coin is unpredictable, so a branch
// would often be mispredicted.
func (t *gaussTable) block(u uint64) (uint32, uint32) {
	col := u >> (t.shift & 63)
	c := &t.cols[col]
	own, alt := c.sq[0], c.sq[1]
	j, sq := c.alias, alt
	if u&t.cmask < c.thr {
		j, sq = uint32(col), own
	}
	return j, sq
}

// propose maps a uniform word to a proposal in block j: bits 0-6 give the
// magnitude m in the block, bit 7 the sign. It returns k and the argument mm
// of Pt (m or m+1).
func propose(j uint32, u uint64) (k, mm int64) {
	m := int64(j)<<gaussBlockBits | int64(u&(gaussBlock-1))
	neg := int64(u>>gaussBlockBits) & 1
	return m ^ -neg, m + neg // m, or -m-1
}

// sample draws one k.
func (t *gaussTable) sample(src *stream) int64 {
	for {
		u0, u := src.next2()
		j, sq := t.block(u0)
		k, mm := propose(j, u)
		// Bits 8-63 of u are the first 56 bits of the acceptance uniform.
		if uint32(u>>32) < sq || t.accept(j, mm, u>>8, src) {
			return k
		}
	}
}

// rho returns the float64 estimate of Pt(mm)/Pt(128j), mm in [128j, 128j+128].
func (t *gaussTable) rho(j uint32, mm int64) float64 {
	m0 := int64(j) << gaussBlockBits
	d := float64((mm - m0) * (mm + m0))
	return math.Exp(-d*t.inv2s2) * (t.c0 + float64(mm*mm)*t.c2) / (t.c0 + float64(m0*m0)*t.c2)
}

// alphaHat is the fast path's estimate of alpha_j(mm), within 2^-44 relative.
func (t *gaussTable) alphaHat(j uint32, mm int64) float64 {
	return t.beta[j] * t.rho(j, mm)
}

// accept decides U < alpha_j(mm) for the uniform U whose first 56 bits are a,
// drawing further bits from src only on the slow path.
func (t *gaussTable) accept(j uint32, mm int64, a uint64, src *stream) bool {
	al := t.alphaHat(j, mm)
	if a < uint64(al*(1-gaussTau)*0x1p56) {
		return true // U < (a+1)/2^56 <= alpha_hat (1 - tau) <= alpha
	}
	if float64(a) >= al*(1+gaussTau)*0x1p56 {
		return false // U >= a/2^56 >= alpha_hat (1 + tau) >= alpha
	}
	return t.slowAccept(j, mm, a, src)
}

// slowAccept compares U (first 56 bits a, then three words of src) with
// alpha_j(mm) computed to 2^-230: it accepts iff the 248-bit prefix of U is
// below floor(2^248 alphaBig).
func (t *gaussTable) slowAccept(j uint32, mm int64, a uint64, src *stream) bool {
	thr, _ := new(big.Float).SetMantExp(t.alphaBig(j, mm), 248).Int(nil)
	u := new(big.Int).SetUint64(a)
	for range 3 {
		u.Lsh(u, 64)
		u.Or(u, new(big.Int).SetUint64(src.Uint64()))
	}
	return u.Cmp(thr) < 0
}

// alphaBig returns alpha_j(mm) = Pt(mm)/(M W_j) with relative error below
// 2^-230: Pt(mm) = exp(-mm^2/(2s^2)) I(mm) is computed with 256-bit
// mantissas (bigExpNeg: below 2^-233; I(mm) by its double series, below
// 2^-245), then two more roundings.
func (t *gaussTable) alphaBig(j uint32, mm int64) *big.Float {
	p := bigPt(t.s, mm)
	den := newBig().SetFloat64(t.m)
	den.Mul(den, newBig().SetUint64(t.w[j]))
	return p.Quo(p, den)
}

func newBig() *big.Float { return new(big.Float).SetPrec(gaussBigPrec) }

// bigPt returns Pt(mm) = exp(-mm^2/(2s^2)) I(mm) to 2^-232 relative, for
// 0 <= mm <= 14s + 256 and s >= 2^15.
//
// I(mm) = integral_{-1/2}^{1/2} cosh(b t) exp(-c t^2) dt with b = mm/s^2 <=
// 2^-11 and c = 1/(2s^2) <= 2^-31, expanded as
// sum_{i,l >= 0} b^(2i)/(2i)! (-c)^l/l! / ((2i+2l+1) 4^(i+l)). Successive
// terms in i shrink by at least 2^-24 and in l by 2^-33; the sums stop once
// a factor is below 2^-300, so the remainder is below 2^-299.
func bigPt(s float64, mm int64) *big.Float {
	sb := newBig().SetFloat64(s)
	s2 := newBig().Mul(sb, sb)                              // exact: 106 bits
	twoS2 := newBig().Mul(s2, newBig().SetInt64(2))         // exact
	x := newBig().SetInt64(mm * mm)                         // exact: mm^2 < 2^63
	x.Quo(x, twoS2)                                         // mm^2/(2s^2)
	b := newBig().Quo(newBig().SetInt64(mm), s2)            // mm/s^2
	c := newBig().Quo(newBig().SetInt64(1), twoS2)          // 1/(2s^2)
	tiny := newBig().SetMantExp(newBig().SetInt64(1), -300) // 2^-300
	sum := newBig()
	bi := newBig().SetInt64(1) // b^(2i)/((2i)! 4^i)
	b2 := newBig().Mul(b, b)
	for i := int64(0); bi.Cmp(tiny) > 0; i++ {
		cl := newBig().SetInt64(1) // c^l/(l! 4^l)
		for l := int64(0); cl.Cmp(tiny) > 0; l++ {
			term := newBig().Mul(bi, cl)
			term.Quo(term, newBig().SetInt64(2*i+2*l+1))
			if l%2 == 1 {
				term.Neg(term)
			}
			sum.Add(sum, term)
			cl.Mul(cl, c)
			cl.Quo(cl, newBig().SetInt64(4*(l+1)))
		}
		bi.Mul(bi, b2)
		bi.Quo(bi, newBig().SetInt64(4*(2*i+1)*(2*i+2)))
	}
	return sum.Mul(sum, bigExpNeg(x))
}

// bigExpNeg returns exp(-x) for 0 <= x <= 128 to 2^-233 relative: with
// y = x 2^-r <= 2^-10 (r <= 17), the Taylor series of exp(-y) is summed until
// a term is below 2^-280 (rounding error about 2^-251), and the result is
// squared r times, which multiplies the relative error by at most 2^r and
// adds 2^-256 per squaring.
func bigExpNeg(x *big.Float) *big.Float {
	r := 0
	if x.Sign() > 0 {
		r = max(0, x.MantExp(nil)+10)
	}
	y := newBig().SetMantExp(x, -r)
	tiny := newBig().SetMantExp(newBig().SetInt64(1), -280)
	sum := newBig().SetInt64(1)
	term := newBig().SetInt64(1)
	for n := int64(1); ; n++ {
		term.Mul(term, y)
		term.Quo(term, newBig().SetInt64(n))
		if n%2 == 1 {
			sum.Sub(sum, term)
		} else {
			sum.Add(sum, term)
		}
		if term.Cmp(tiny) < 0 {
			break
		}
	}
	for range r {
		sum.Mul(sum, sum)
	}
	return sum
}

// newGaussTable builds the table for scale s in [2^15, 2^16).
func newGaussTable(s float64) *gaussTable {
	nblk := int(math.Ceil((gaussCut*s + 0.5) / gaussBlock))
	logn := bits.Len(uint(nblk - 1))
	n := 1 << logn
	t := &gaussTable{
		s:      s,
		shift:  uint(64 - logn),
		cmask:  1<<(63-logn) - 1,
		cols:   make([]gaussColumn, n),
		nblk:   nblk,
		w:      make([]uint64, nblk),
		beta:   make([]float64, nblk),
		inv2s2: 1 / (2 * s * s),
		c0:     1 - 1/(24*s*s),
		c2:     1 / (24 * s * s * s * s),
	}
	// Pt(128j) in float64, within 2^-44.9 relative (see AddGaussian).
	pt := make([]float64, nblk)
	var total float64
	for j := range pt {
		m0 := float64(j * gaussBlock)
		pt[j] = math.Exp(-m0*m0*t.inv2s2) * (t.c0 + m0*m0*t.c2)
		total += pt[j]
	}
	// M such that the weights fill a little less than 2^63; the rest goes to
	// block 0, which only lowers its acceptance probabilities.
	t.m = total * (1 + 0x1p-20) / 0x1p63
	var sum uint64
	for j, p := range pt {
		t.w[j] = max(1, uint64(math.Ceil(p/t.m*(1+gaussWeightSlack))))
		sum += t.w[j]
	}
	if sum > 1<<63 {
		panic("release: Gaussian table weights exceed 2^63")
	}
	t.w[0] += 1<<63 - sum
	for j, p := range pt {
		t.beta[j] = p / (t.m * float64(t.w[j]))
	}
	// Vose's alias method in exact integer arithmetic.
	capa := t.cmask + 1
	w := make([]uint64, n)
	copy(w, t.w)
	small := make([]uint32, 0, n)
	large := make([]uint32, 0, n)
	for i := n - 1; i >= 0; i-- {
		if w[i] < capa {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		sm := small[len(small)-1]
		small = small[:len(small)-1]
		lg := large[len(large)-1]
		t.cols[sm].thr, t.cols[sm].alias = w[sm], lg
		w[lg] -= capa - w[sm]
		if w[lg] < capa {
			large = large[:len(large)-1]
			small = append(small, lg)
		}
	}
	// The weights sum to n*capacity exactly, so what is left is full.
	for _, i := range append(small, large...) {
		if w[i] != capa {
			panic("release: alias table construction lost mass")
		}
		t.cols[i].thr, t.cols[i].alias = capa, i
	}
	// Squeezes: alpha falls with mm, so the fast estimate at the block's last
	// argument, less tau, bounds every alpha of the block from below.
	sq := make([]uint32, nblk)
	for j := range sq {
		a := t.alphaHat(uint32(j), int64(j+1)*gaussBlock) * (1 - gaussTau) * 0x1p32
		sq[j] = uint32(a) // a < 2^32
	}
	for i := range t.cols {
		c := &t.cols[i]
		if i < nblk {
			c.sq[0] = sq[i]
		}
		c.sq[1] = sq[c.alias]
	}
	return t
}
