package release

import (
	"math"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// noiseScales covers the range of s = sigma/Grid(sigma): its low end, middle and top.
var noiseScales = []struct {
	name  string
	sigma float64
}{
	{"s=2^15", 1},
	{"s=1.5*2^15", 3},
	{"s=2^16-0.7", 2 - 0.7*0x1p-15},
	{"s=irrational", math.Pi * 1e-3},
}

// pRef is the rounded-Gaussian law P(k) = Phi((k+1/2)/s) - Phi((k-1/2)/s),
// computed independently of the sampler as a 3-point Gauss-Legendre integral
// of the density over [k-1/2, k+1/2] (exact to float64 rounding for s >= 2^15).
func pRef(k int64, s float64) float64 {
	const x1, w0, w1 = 0.7745966692414834, 8.0 / 9, 5.0 / 9
	f := func(t float64) float64 {
		z := (float64(k) + t/2) / s
		return math.Exp(-z * z / 2)
	}
	return (w0*f(0) + w1*(f(-x1)+f(x1))) / 2 / (s * math.Sqrt(2*math.Pi))
}

func tableFor(t *testing.T, sigma float64) (*gaussTable, float64) {
	t.Helper()
	g := Grid(sigma)
	s := sigma / g
	if s < 0x1p15 || s >= 0x1p16 {
		t.Fatalf("s = %v outside [2^15, 2^16)", s)
	}
	return gaussTableFor(s), s
}

// kahan is a Neumaier compensated sum.
type kahan struct{ s, c float64 }

func (k *kahan) add(x float64) {
	t := k.s + x
	if math.Abs(k.s) >= math.Abs(x) {
		k.c += (k.s - t) + x
	} else {
		k.c += (x - t) + k.s
	}
	k.s = t
}

func (k *kahan) sum() float64 { return k.s + k.c }

func drawK(tab *gaussTable, n *Noise, count int) []int64 {
	ks := make([]int64, count)
	for i := range ks {
		ks[i] = tab.sample(n.src)
	}
	return ks
}

// TestNoiseTableLaw reads the alias weights back from the table's columns
// (every block exactly W_j/2^63, every block inside the cut reachable) and
// computes the law of one try, P(block) P(proposal) alpha_hat, for every k:
// each k in the cut is proposed exactly once, and, normalised, the law is the
// rounded Gaussian up to the fast path's float64 error (the exact alpha makes
// it exactly proportional: TestNoiseFastPath and TestNoiseAlphaBig check
// alpha_hat against it).
func TestNoiseTableLaw(t *testing.T) {
	for _, tc := range noiseScales {
		t.Run(tc.name, func(t *testing.T) {
			tab, s := tableFor(t, tc.sigma)
			J := tab.nblk
			capa := tab.cmask + 1
			if uint64(len(tab.cols))*capa != 1<<63 {
				t.Fatalf("columns %d x capacity %d != 2^63", len(tab.cols), capa)
			}
			// Block probabilities, exactly, in units of 2^-63.
			wt := make([]uint64, J)
			sqOf := make([]uint32, J)
			seenSq := make([]bool, J)
			for c := range tab.cols {
				col := uint64(c) << tab.shift
				own, osq := tab.block(col) // coin 0: own block unless thr = 0
				alt, asq := tab.block(col | tab.cmask)
				thr := tab.cols[c].thr
				if thr > capa {
					t.Fatalf("column %d threshold %d > capacity", c, thr)
				}
				if thr > 0 {
					if int(own) != c || c >= J {
						t.Fatalf("column %d: coin 0 gave block %d (%d blocks)", c, own, J)
					}
					wt[own] += thr
				}
				if thr < capa {
					if int(alt) >= J {
						t.Fatalf("column %d aliases block %d beyond the cut (%d blocks)", c, alt, J)
					}
					wt[alt] += capa - thr
				}
				for _, b := range []struct {
					j, sq uint32
					used  bool
				}{{own, osq, thr > 0}, {alt, asq, thr < capa}} {
					if !b.used {
						continue
					}
					if seenSq[b.j] && sqOf[b.j] != b.sq {
						t.Fatalf("block %d has two squeeze values", b.j)
					}
					seenSq[b.j], sqOf[b.j] = true, b.sq
				}
			}
			var tot uint64
			for j, w := range wt {
				if w != tab.w[j] || w == 0 {
					t.Fatalf("block %d: alias table gives weight %d, table says %d", j, w, tab.w[j])
				}
				tot += w
			}
			if tot != 1<<63 {
				t.Fatalf("block weights sum to %d, want 2^63", tot)
			}
			M := int64(J) * gaussBlock
			if float64(M) < gaussCut*s+0.5 {
				t.Fatalf("cut %d below 13 s = %v", M, gaussCut*s)
			}
			law := make([]float64, 2*M) // index k + M
			hit := make([]int8, 2*M)
			var accK kahan
			for j := 0; j < J; j++ {
				pj := float64(wt[j]) * 0x1p-63 / (2 * gaussBlock)
				for low := uint64(0); low < 2*gaussBlock; low++ {
					k, mm := propose(uint32(j), low)
					if k < -M || k >= M {
						t.Fatalf("block %d pattern %d gives k = %d beyond the cut %d", j, low, k, M)
					}
					if neg := k < 0; mm != max(k, -k) {
						t.Fatalf("k = %d (negative %v) has Pt argument %d", k, neg, mm)
					}
					a := tab.alphaHat(uint32(j), mm)
					if !(a <= 1) {
						t.Fatalf("block %d mm %d: alpha_hat %v > 1", j, mm, a)
					}
					if float64(sqOf[j])*0x1p-32 > a {
						t.Fatalf("block %d mm %d: squeeze %d above alpha_hat %v", j, mm, sqOf[j], a)
					}
					hit[k+M]++
					law[k+M] = pj * a
					accK.add(pj * a)
				}
			}
			acc := accK.sum()
			var tvK, refK kahan
			for i, p := range law {
				if hit[i] != 1 {
					t.Fatalf("k = %d proposed %d times", int64(i)-M, hit[i])
				}
				r := pRef(int64(i)-M, s)
				refK.add(r)
				tvK.add(math.Abs(p/acc - r))
			}
			tv, ref := tvK.sum()/2, refK.sum()
			t.Logf("s=%.4f blocks=%d columns=%d acceptance=%.5f TV(float64 law, pRef)=%.3g (2^%.1f)", s, J, len(tab.cols), acc, tv, math.Log2(tv))
			if math.Abs(ref-1) > 0x1p-48 {
				t.Fatalf("reference sums to %v", ref)
			}
			if !(acc > 0.99) {
				t.Errorf("acceptance %v per try, want > 0.99", acc)
			}
			// alpha_hat is within 2^-44 of alpha; pRef within about 2^-50.
			if !(tv < 0x1p-42) {
				t.Fatalf("TV(per-try law, rounded Gaussian) = %g >= 2^-42", tv)
			}
		})
	}
}

// bigErfSum returns sum_n (-1)^n x^(2n+1)/(n! (2n+1)) = (sqrt(pi)/2) erf(x)
// at precision prec, by its Maclaurin series (stopped once a term is below
// 2^-prec-10; for |x| <= 10 the largest term is below 2^130).
func bigErfSum(x *big.Float, prec uint) *big.Float {
	nb := func() *big.Float { return new(big.Float).SetPrec(prec) }
	x2 := nb().Mul(x, x)
	pow := nb().Set(x) // x^(2n+1)/n!
	sum := nb()
	tiny := nb().SetMantExp(nb().SetInt64(1), -int(prec)-10)
	for n := int64(0); ; n++ {
		term := nb().Quo(pow, nb().SetInt64(2*n+1))
		if n%2 == 1 {
			term.Neg(term)
		}
		sum.Add(sum, term)
		if n > 200 && nb().Abs(term).Cmp(tiny) < 0 {
			return sum
		}
		pow.Mul(pow, x2)
		pow.Quo(pow, nb().SetInt64(n+1))
	}
}

// refPtRatio computes P(k)/P(0) for the rounded Gaussian of scale s from the
// error function, (erf((k+1/2)/(s sqrt2)) - erf((k-1/2)/(s sqrt2))) /
// (2 erf(1/(2 s sqrt2))), at 900 bits: independent of bigPt's series.
func refPtRatio(s float64, k int64) *big.Float {
	const prec = 900
	nb := func() *big.Float { return new(big.Float).SetPrec(prec) }
	den := nb().Mul(nb().SetFloat64(s), nb().Sqrt(nb().SetInt64(2)))
	at := func(num int64) *big.Float { // (num/2)/(s sqrt 2)
		x := nb().Quo(nb().SetInt64(num), den)
		return bigErfSum(x.Quo(x, nb().SetInt64(2)), prec)
	}
	p := nb().Sub(at(2*k+1), at(2*k-1))
	p0 := nb().Sub(at(1), at(-1))
	return p.Quo(p, p0)
}

// TestNoiseAlphaBig checks the slow path's Pt against the independent erf
// computation: Pt(mm)/Pt(0) = P(mm)/P(0) within 2^-225 relative, from the
// centre to beyond the cut.
func TestNoiseAlphaBig(t *testing.T) {
	for _, tc := range noiseScales {
		t.Run(tc.name, func(t *testing.T) {
			_, s := tableFor(t, tc.sigma)
			p0 := bigPt(s, 0)
			for _, mm := range []int64{1, 2, 127, 128, 129, 1000, int64(s), int64(2.5 * s), int64(7 * s), int64(gaussCut*s) + 200} {
				got := newBig().Quo(bigPt(s, mm), p0)
				want := refPtRatio(s, mm)
				rel := new(big.Float).Quo(new(big.Float).Sub(got, want), want)
				r, _ := rel.Float64()
				if f, _ := want.Float64(); !(math.Abs(r) < 0x1p-225) {
					t.Errorf("mm = %d: Pt ratio off by %g relative (ratio %g)", mm, r, f)
				}
			}
		})
	}
}

// TestNoiseFastPath checks the fast path against the slow path's alpha:
// alpha_hat within 2^-40 relative (the proof says 2^-44; the margin is
// 2^-36), every beta_j = alpha_j(128j) at most 1, and every squeeze below the
// block's smallest alpha. Blocks are taken with a stride to keep the test
// short; the first and last blocks are always included.
func TestNoiseFastPath(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	for _, tc := range noiseScales {
		t.Run(tc.name, func(t *testing.T) {
			tab, _ := tableFor(t, tc.sigma)
			J := tab.nblk
			var worst float64
			check := func(j int, mm int64) *big.Float {
				ab := tab.alphaBig(uint32(j), mm)
				a, _ := ab.Float64()
				if !(a <= 1) {
					t.Fatalf("block %d mm %d: alpha = %v > 1", j, mm, a)
				}
				r := math.Abs(tab.alphaHat(uint32(j), mm)/a - 1)
				worst = max(worst, r)
				if !(r < 0x1p-40) {
					t.Fatalf("block %d mm %d: alpha_hat off by %g relative", j, mm, r)
				}
				return ab
			}
			for j := 0; j < J; j += max(1, J/400) {
				for _, jj := range []int{j, J - 1 - j} {
					m0 := int64(jj) * gaussBlock
					check(jj, m0)
					last := check(jj, m0+gaussBlock)
					check(jj, m0+1+rng.Int64N(gaussBlock-1))
					if sq, ok := blockSqueeze(tab, jj); ok {
						b := new(big.Float).SetMantExp(new(big.Float).SetUint64(uint64(sq)), -32)
						if b.Cmp(last) > 0 {
							t.Fatalf("block %d: squeeze %v above the smallest alpha %v", jj, b, last)
						}
					}
				}
			}
			t.Logf("worst fast-path relative error 2^%.1f", math.Log2(worst))
		})
	}
}

// blockSqueeze returns the squeeze stored for block j by a column that can
// produce it (false if none can).
func blockSqueeze(tab *gaussTable, j int) (uint32, bool) {
	for c, col := range tab.cols {
		if c == j && col.thr > 0 {
			return col.sq[0], true
		}
		if int(col.alias) == j && col.thr <= tab.cmask {
			return col.sq[1], true
		}
	}
	return 0, false
}

// TestNoiseSlowPath exercises the slow path where the fast one defers: for
// proposals whose 56 bits equal floor(2^56 alpha), acceptance must follow the
// 248-bit comparison (checked by replaying the stream) and, over many draws,
// happen with probability frac(2^56 alpha).
func TestNoiseSlowPath(t *testing.T) { forGenerators(t, testNoiseSlowPath) }

func testNoiseSlowPath(t *testing.T) {
	tab, _ := tableFor(t, 3)
	const draws = 3000
	for _, c := range []struct{ j, off int64 }{{0, 5}, {3, 77}, {int64(tab.nblk / 2), 128}, {int64(tab.nblk - 1), 0}} {
		j, mm := uint32(c.j), c.j*gaussBlock+c.off
		ab := tab.alphaBig(j, mm)
		scaled := new(big.Float).SetMantExp(ab, 56)
		ai, _ := scaled.Int(nil)
		a := ai.Uint64()
		frac, _ := new(big.Float).Sub(scaled, new(big.Float).SetInt(ai)).Float64()
		thr, _ := new(big.Float).SetMantExp(ab, 248).Int(nil)
		n := NewSeededNoise(uint64(c.j + 1000))
		rep := NewSeededNoise(uint64(c.j + 1000))
		var acc int
		for range draws {
			got := tab.accept(j, mm, a, n.src)
			u := new(big.Int).SetUint64(a)
			for range 3 {
				u.Lsh(u, 64)
				u.Or(u, new(big.Int).SetUint64(rep.src.Uint64()))
			}
			if want := u.Cmp(thr) < 0; got != want {
				t.Fatalf("block %d mm %d: accept %v, 248-bit comparison says %v", j, mm, got, want)
			}
			if got {
				acc++
			}
		}
		se := math.Sqrt(frac*(1-frac)/draws) + 1e-9
		if p := float64(acc) / draws; math.Abs(p-frac) > 5*se {
			t.Errorf("block %d mm %d: slow path accepts %.4f, want %.4f +- %.4f", j, mm, p, frac, 5*se)
		}
		// Far from the threshold the fast path decides without drawing.
		if a > 1<<30 && !tab.accept(j, mm, a-1<<30, nil) {
			t.Errorf("block %d mm %d: U well below alpha rejected", j, mm)
		}
		if a+1<<30 < 1<<56 && tab.accept(j, mm, a+1<<30, nil) {
			t.Errorf("block %d mm %d: U well above alpha accepted", j, mm)
		}
	}
}

// TestNoiseMoments checks mean ~ 0 and variance ~ s^2 + 1/12 of sampled k
// within 5 standard errors.
func TestNoiseMoments(t *testing.T) { forGenerators(t, testNoiseMoments) }

func testNoiseMoments(t *testing.T) {
	const count = 2_000_000
	for i, tc := range noiseScales {
		t.Run(tc.name, func(t *testing.T) {
			tab, s := tableFor(t, tc.sigma)
			ks := drawK(tab, NewSeededNoise(uint64(100+i)), count)
			var sum, sq float64
			for _, k := range ks {
				sum += float64(k)
			}
			mean := sum / count
			for _, k := range ks {
				d := float64(k) - mean
				sq += d * d
			}
			v := sq / (count - 1)
			want := s*s + 1.0/12
			seMean := s / math.Sqrt(count)
			seVar := want * math.Sqrt(2.0/count)
			if math.Abs(mean) > 5*seMean {
				t.Errorf("mean %g, want 0 +- %g", mean, 5*seMean)
			}
			if math.Abs(v-want) > 5*seVar {
				t.Errorf("variance %g, want %g +- %g (ratio %g)", v, want, 5*seVar, v/want)
			}
		})
	}
}

// ksStat returns the Kolmogorov-Smirnov distance between the sample and cdf,
// and its asymptotic p-value.
func ksStat(x []float64, cdf func(float64) float64) (d, p float64) {
	x = slices.Clone(x)
	slices.Sort(x)
	n := float64(len(x))
	for i, v := range x {
		f := cdf(v)
		d = max(d, f-float64(i)/n, float64(i+1)/n-f)
	}
	lam := d * (math.Sqrt(n) + 0.12 + 0.11/math.Sqrt(n))
	for j := 1; j <= 100; j++ {
		term := 2 * math.Exp(-2*float64(j*j)*lam*lam)
		if j%2 == 0 {
			term = -term
		}
		p += term
	}
	return d, min(max(p, 0), 1)
}

// TestNoiseKS compares (output - x)/sigma of AddGaussian and AddGaussian32
// with the standard normal, and checks that the test rejects a 2% scale error.
func TestNoiseKS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 2^20 draws per generator; TestNoiseChiSquare checks the law in -short too")
	}
	forGenerators(t, testNoiseKS)
}

func testNoiseKS(t *testing.T) {
	const count = 1 << 20
	std := distuv.Normal{Mu: 0, Sigma: 1}
	for i, tc := range noiseScales {
		g := Grid(tc.sigma)
		base := make([]float64, count)
		for j := range base {
			base[j] = float64(j%1000) * 3 * g // on the grid, so output - x is exact
		}
		cases := []struct {
			name   string
			sample func() []float64
			scale  float64
			reject bool
		}{
			{"float64", func() []float64 {
				v := slices.Clone(base)
				NewSeededNoise(uint64(200+i)).AddGaussian(v, tc.sigma)
				for j := range v {
					v[j] = (v[j] - base[j]) / tc.sigma
				}
				return v
			}, 1, false},
			{"float32", func() []float64 {
				v := make([]float32, count) // zeros: the output is k*g, exact in float32
				NewSeededNoise(uint64(300+i)).AddGaussian32(v, tc.sigma)
				out := make([]float64, count)
				for j := range v {
					out[j] = float64(v[j]) / tc.sigma
				}
				return out
			}, 1, false},
			{"control-scaled-1.02", func() []float64 {
				v := make([]float64, count)
				NewSeededNoise(uint64(400+i)).AddGaussian(v, tc.sigma)
				for j := range v {
					v[j] /= tc.sigma
				}
				return v
			}, 1.02, true},
		}
		for _, c := range cases {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				x := c.sample()
				for j := range x {
					x[j] *= c.scale
				}
				d, p := ksStat(x, std.CDF)
				t.Logf("D=%.3g p=%.3g", d, p)
				if c.reject && p > 1e-6 {
					t.Errorf("control not rejected: D=%g p=%g", d, p)
				}
				if !c.reject && p < 1e-3 {
					t.Errorf("KS rejects the normal: D=%g p=%g", d, p)
				}
			})
		}
	}
}

// TestNoiseChiSquare bins sampled k and compares with the exact P(k):
// one bin per integer near the centre (block edges at +-128 included), and
// 128-wide bins aligned with the sampler's blocks out to 3s. The control uses
// P for 1.02 s and must be rejected.
func TestNoiseChiSquare(t *testing.T) { forGenerators(t, testNoiseChiSquare) }

func testNoiseChiSquare(t *testing.T) {
	const count = 2_000_000
	type binning struct {
		name  string
		edges func(s float64) []int64 // bin i is [e[i], e[i+1]); outside is one bin
	}
	binnings := []binning{
		{"integers", func(float64) []int64 {
			var e []int64
			for k := int64(-200); k <= 201; k++ {
				e = append(e, k)
			}
			return e
		}},
		{"blocks", func(s float64) []int64 {
			var e []int64
			lim := int64(3*s/gaussBlock) * gaussBlock // bins hold >= 15 expected draws
			for k := -lim; k <= lim; k += gaussBlock {
				e = append(e, k)
			}
			return e
		}},
	}
	for i, tc := range noiseScales {
		tab, s := tableFor(t, tc.sigma)
		ks := drawK(tab, NewSeededNoise(uint64(500+i)), count)
		for _, b := range binnings {
			e := b.edges(s)
			obs := make([]float64, len(e)) // last bin: outside
			for _, k := range ks {
				j, found := slices.BinarySearch(e, k)
				switch {
				case found && j < len(e)-1:
					obs[j]++
				case !found && j > 0 && j < len(e):
					obs[j-1]++
				default:
					obs[len(e)-1]++
				}
			}
			for _, ctl := range []struct {
				name   string
				scale  float64
				reject bool
			}{{"exact", 1, false}, {"control-1.02s", 1.02, true}} {
				t.Run(tc.name+"/"+b.name+"/"+ctl.name, func(t *testing.T) {
					exp := make([]float64, len(e))
					var in float64
					for j := 0; j+1 < len(e); j++ {
						for k := e[j]; k < e[j+1]; k++ {
							exp[j] += pRef(k, s*ctl.scale)
						}
						in += exp[j]
					}
					exp[len(e)-1] = 1 - in
					var chi float64
					for j := range obs {
						d := obs[j] - count*exp[j]
						chi += d * d / (count * exp[j])
					}
					df := float64(len(e) - 1)
					lim := df + 5*math.Sqrt(2*df)
					t.Logf("chi2=%.1f df=%.0f limit=%.1f", chi, df, lim)
					if !ctl.reject && chi > lim {
						t.Errorf("chi-square %g > %g (df %g)", chi, lim, df)
					}
					if ctl.reject && b.name == "blocks" && chi <= lim {
						t.Errorf("control not rejected: chi-square %g <= %g", chi, lim)
					}
				})
			}
		}
	}
}

// TestNoiseTail checks that the largest |k| of 2e6 draws is plausible for a
// Gaussian (between 4 s and 7 s) and that the table's cut is where it says.
func TestNoiseTail(t *testing.T) { forGenerators(t, testNoiseTail) }

func testNoiseTail(t *testing.T) {
	const count = 2_000_000
	for i, tc := range noiseScales {
		t.Run(tc.name, func(t *testing.T) {
			tab, s := tableFor(t, tc.sigma)
			M := int64(tab.nblk) * gaussBlock
			var mx int64
			for _, k := range drawK(tab, NewSeededNoise(uint64(600+i)), count) {
				if k < -M || k >= M {
					t.Fatalf("k = %d beyond the cut %d", k, M)
				}
				mx = max(mx, k, -k)
			}
			if r := float64(mx) / s; r < 4 || r > 7 {
				t.Errorf("max |k| = %.2f s, implausible for %d Gaussian draws", r, count)
			}
			if float64(M)-0.5 < gaussCut*s {
				t.Errorf("cut %d < 13 s + 1/2", M)
			}
			// Cut mass plus the slow path's error: within NoiseTV as documented,
			// and small enough that 10^9 coordinates at epsilon = 10 add less
			// than 1e-12 to delta.
			cut := (math.Erfc((float64(M)-0.5)/s/math.Sqrt2) + math.Erfc((float64(M)+0.5)/s/math.Sqrt2)) / 2
			if !(cut+0x1p-229 <= NoiseTV) {
				t.Errorf("cut mass %g exceeds NoiseTV = %g", cut, NoiseTV)
			}
			if d := (1 + math.Exp(10)) * NoiseTVOf(1e9); !(d < 1e-12) {
				t.Errorf("10^9 coordinates at epsilon 10 add %g to delta", d)
			}
			// Extreme words: every column with any coin gives a block inside the cut.
			for c := range tab.cols {
				for _, coin := range []uint64{0, tab.cmask} {
					if j, _ := tab.block(uint64(c)<<tab.shift | coin); int(j) >= tab.nblk {
						t.Fatalf("column %d coin %d gives block %d >= %d", c, coin, j, tab.nblk)
					}
				}
			}
		})
	}
}

// TestNoiseGrid checks that outputs lie exactly on the grid, equal
// (round(x/g) + k)*g for the k the stream produces, and that special values
// and bad scales are handled.
func TestNoiseGrid(t *testing.T) { forGenerators(t, testNoiseGrid) }

func testNoiseGrid(t *testing.T) {
	sigmas := []float64{1, 3, 0.1, 1e-5, 1e6, 12345.678, 0x1p-990, 1e300}
	for si, sigma := range sigmas {
		g := Grid(sigma)
		xs := []float64{0, g, -7 * g, 12345 * g, 0.3 * g, -0.5 * g, 1.5 * g, 2.5 * g,
			math.Pi, -math.E * 1e3, 1e-300, 5e-324, 0x1p52 * g * 1.5, -0x1p60 * g,
			1e300, -1.7e308}
		t.Run(formatG(sigma), func(t *testing.T) {
			v := slices.Clone(xs)
			NewSeededNoise(uint64(si)).AddGaussian(v, sigma)
			// Replay the stream to recover k.
			rep := NewSeededNoise(uint64(si))
			tab, _ := rep.gaussTable(sigma)
			for i, x := range xs {
				k := tab.sample(rep.src)
				out := v[i]
				if math.Mod(out, g) != 0 && !math.IsInf(out, 0) {
					t.Errorf("x=%g: output %g not a multiple of g=%g", x, out, g)
				}
				r := x
				if math.Abs(x) < 0x1p52*g {
					r = math.RoundToEven(x/g) * g
				}
				if want := r + float64(k)*g; out != want {
					t.Errorf("x=%g: output %g, want (round(x/g)+k)*g = %g", x, out, want)
				}
				if math.Abs(r/g+float64(k)) < 0x1p53 && !math.IsInf(r/g, 0) {
					// Exact: (round(x/g)+k)*g with integer arithmetic.
					if want := (math.RoundToEven(r/g) + float64(k)) * g; out != want {
						t.Errorf("x=%g: output %g != exact %g", x, out, want)
					}
					if r == x { // x on the grid: output - x is k grid steps
						if d := (out - x) / g; d != float64(k) || d != math.Trunc(d) {
							t.Errorf("x=%g on grid: (out-x)/g = %g, k = %d", x, d, k)
						}
					}
				}
			}
			// float32: on the grid and equal to float32 of the exact float64 value.
			v32 := make([]float32, len(xs))
			for i, x := range xs {
				v32[i] = float32(x)
			}
			in32 := slices.Clone(v32)
			NewSeededNoise(uint64(si)).AddGaussian32(v32, sigma)
			rep = NewSeededNoise(uint64(si))
			for i, x32 := range in32 {
				k := tab.sample(rep.src)
				x := float64(x32)
				if math.Abs(x) < 0x1p52*g {
					x = math.RoundToEven(x/g) * g
				}
				want := float32(x + float64(k)*g)
				if v32[i] != want && !(math.IsNaN(float64(want)) && math.IsNaN(float64(v32[i]))) {
					t.Errorf("float32 x=%g: output %g, want %g", x32, v32[i], want)
				}
				if o := float64(v32[i]); !math.IsInf(o, 0) && math.Mod(o, g) != 0 {
					t.Errorf("float32 x=%g: output %g not on grid %g", x32, o, g)
				}
			}
		})
	}
	t.Run("special", func(t *testing.T) {
		v := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
		NewSeededNoise(1).AddGaussian(v, 1)
		if !math.IsNaN(v[0]) || !math.IsInf(v[1], 1) || !math.IsInf(v[2], -1) {
			t.Errorf("special values changed: %v", v)
		}
	})
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), 1e-310, 0x1p-1001} {
		t.Run("panic/"+formatG(bad), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("AddGaussian with sigma %v did not panic", bad)
				}
			}()
			NewSeededNoise(1).AddGaussian([]float64{1}, bad)
		})
	}
}

// TestNoiseAddGaussianStream: AddGaussian and AddGaussian32 (which read the
// stream's buffer directly) consume exactly the words sample does, draw for
// draw, over many refills, with pairs straddling a refill (one word taken
// first) and with rejected tries, and leave the stream where sample does.
func TestNoiseAddGaussianStream(t *testing.T) { forGenerators(t, testNoiseAddGaussianStream) }

func testNoiseAddGaussianStream(t *testing.T) {
	const count = 20 * streamWords
	const sigma = 3
	g := Grid(sigma)
	for _, skip := range []int{0, 1} {
		for _, typ := range []string{"float64", "float32"} {
			n, rep := NewSeededNoise(uint64(700+skip)), NewSeededNoise(uint64(700+skip))
			for range skip {
				n.src.Uint64()
				rep.src.Uint64()
			}
			out := make([]float64, count)
			if typ == "float64" {
				n.AddGaussian(out, sigma)
			} else {
				v := make([]float32, count)
				n.AddGaussian32(v, sigma)
				for i, x := range v {
					out[i] = float64(x)
				}
			}
			tab, _ := rep.gaussTable(sigma)
			rejected := 0
			for i, o := range out {
				before := rep.src.pos
				k := tab.sample(rep.src)
				if (rep.src.pos-before)%streamWords != 2 {
					rejected++
				}
				want := float64(k) * g
				if typ == "float32" {
					want = float64(float32(want))
				}
				if o != want {
					t.Fatalf("skip %d %s: coordinate %d is %g, replayed k*g = %g", skip, typ, i, o, want)
				}
			}
			if rejected == 0 {
				t.Errorf("skip %d %s: no rejected try in %d draws; the test needs some", skip, typ, count)
			}
			if a, b := n.src.Uint64(), rep.src.Uint64(); a != b {
				t.Errorf("skip %d %s: streams out of step after the draws", skip, typ)
			}
		}
	}
}

func formatG(x float64) string { return "sigma=" + strconv.FormatFloat(x, 'g', -1, 64) }

// TestNoiseStreams: same seed same stream, different seeds and Split children differ.
func TestNoiseStreams(t *testing.T) { forGenerators(t, testNoiseStreams) }

func testNoiseStreams(t *testing.T) {
	draw := func(n *Noise) []float64 {
		v := make([]float64, 64)
		n.AddGaussian(v, 1)
		return v
	}
	a, b := draw(NewSeededNoise(7)), draw(NewSeededNoise(7))
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different streams")
	}
	if slices.Equal(a, draw(NewSeededNoise(8))) {
		t.Errorf("seeds 7 and 8 give the same stream")
	}
	if slices.Equal(draw(NewNoise()), draw(NewNoise())) {
		t.Errorf("two NewNoise give the same stream")
	}
	p := NewSeededNoise(7)
	c1, c2 := p.Split(), p.Split()
	pa, x1, x2 := draw(p), draw(c1), draw(c2)
	if slices.Equal(x1, x2) || slices.Equal(pa, x1) || slices.Equal(pa, x2) || slices.Equal(a, x1) {
		t.Errorf("Split streams coincide")
	}
	q := NewSeededNoise(7)
	if d1 := draw(q.Split()); !slices.Equal(d1, x1) {
		t.Errorf("Split is not deterministic given the parent stream")
	}
	if NewSeededNoise(7).Rand().Uint64() == NewSeededNoise(8).Rand().Uint64() {
		t.Errorf("Rand streams coincide")
	}
}

// TestNoiseGaussianSigma: the calibrated sigma meets mu from below, within
// 1e-3 relative, is minimal, and bad arguments are errors.
func TestNoiseGaussianSigma(t *testing.T) {
	for _, c := range []struct {
		s, mu float64
		dim   int
	}{
		{1, 1, 1}, {1, 0.5, 1}, {2.5, 3, 10}, {1e-3, 0.1, 100}, {1, 0.01, 1},
		{1, 0.1, 1_000_000}, {7, 0.002, 1}, {1, 0.0025, 4}, {1e6, 2, 3}, {3, 1, 1 << 20},
	} {
		sigma, err := GaussianSigma(c.s, c.mu, c.dim)
		if err != nil {
			t.Errorf("GaussianSigma(%v, %v, %d): %v", c.s, c.mu, c.dim, err)
			continue
		}
		got := GaussianMu(c.s, sigma, c.dim)
		if got > c.mu || got < c.mu*(1-1e-3) {
			t.Errorf("GaussianSigma(%v, %v, %d) = %v gives mu %v", c.s, c.mu, c.dim, sigma, got)
		}
		if smaller := sigma * (1 - 1e-9); GaussianMu(c.s, smaller, c.dim) <= c.mu {
			t.Errorf("GaussianSigma(%v, %v, %d) = %v is not minimal", c.s, c.mu, c.dim, sigma)
		}
	}
	for _, c := range []struct {
		name  string
		s, mu float64
		dim   int
	}{
		{"mu=0", 1, 0, 1}, {"mu<0", 1, -1, 1}, {"mu=NaN", 1, math.NaN(), 1}, {"mu=Inf", 1, math.Inf(1), 1},
		{"S=0", 0, 1, 1}, {"S=NaN", math.NaN(), 1, 1}, {"S=Inf", math.Inf(1), 1, 1}, {"dim=0", 1, 1, 0},
		{"mu too small", 1, 0x1p-14, 1}, {"mu too small for dim", 1, 0.05, 1_000_000},
		{"sigma below MinSigma", 1e-305, 1e3, 1},
	} {
		if sigma, err := GaussianSigma(c.s, c.mu, c.dim); err == nil {
			t.Errorf("%s: GaussianSigma(%v, %v, %d) = %v, want an error", c.name, c.s, c.mu, c.dim, sigma)
		}
	}
}

// TestNoiseTableCache: tables are shared per s, the cache is bounded, and
// concurrent use from split streams is safe.
func TestNoiseTableCache(t *testing.T) {
	if gaussTableFor(0x1p15*1.25) != gaussTableFor(0x1p15*1.25) {
		t.Errorf("same s, different tables")
	}
	for i := range maxGaussTables + 5 {
		gaussTableFor(0x1p15 + float64(i) + 0.5)
	}
	if size := gaussCache.Len(); size > maxGaussTables {
		t.Errorf("cache holds %d tables, bound %d", size, maxGaussTables)
	}
	root := NewSeededNoise(9)
	var wg sync.WaitGroup
	for w := range 4 {
		n := root.Split()
		wg.Go(func() {
			v := make([]float32, 1000)
			for i := range 20 {
				n.AddGaussian32(v, 1+float64((i+w)%7)/3)
			}
		})
	}
	wg.Wait()
}

// TestNoiseNoAlloc: adding noise allocates nothing once the table is cached.
func TestNoiseNoAlloc(t *testing.T) {
	n := NewSeededNoise(3)
	v32 := make([]float32, 4096)
	v64 := make([]float64, 4096)
	n.AddGaussian32(v32, 2.5)
	if a := testing.AllocsPerRun(20, func() { n.AddGaussian32(v32, 2.5); n.AddGaussian(v64, 2.5) }); a != 0 {
		t.Errorf("%v allocations per call", a)
	}
}
