package release

import (
	"math"
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

// TestNoiseTableLaw computes the law the sampler implements exactly from its
// tables (alias weights, then every proposal word's k and acceptance
// threshold, read through try) and checks it against the rounded Gaussian:
// each k in the cut range is proposed exactly once per block layout, and the
// total variation distance is below the documented 2^-46.
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
					if int(own) != c {
						t.Fatalf("column %d: coin 0 gave block %d", c, own)
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
			for _, w := range wt {
				tot += w
			}
			if tot != 1<<63 {
				t.Fatalf("block weights sum to %d, want 2^63", tot)
			}
			// Within each block: enumerate the 256 proposal patterns.
			M := int64(J) * gaussBlock
			if float64(M) < gaussCut*s+0.5 {
				t.Fatalf("cut %d below 13 s = %v", M, gaussCut*s)
			}
			law := make([]float64, 2*M) // index k + M
			hit := make([]int8, 2*M)
			thrs := make([]float64, 2*gaussBlock)
			ks := make([]int64, 2*gaussBlock)
			for j := 0; j < J; j++ {
				pj := float64(wt[j]) * 0x1p-63
				var z float64
				for low := uint64(0); low < 2*gaussBlock; low++ {
					k, _ := tab.try(uint32(j), sqOf[j], low)
					if k < -M || k >= M {
						t.Fatalf("block %d pattern %d gives k = %d beyond the cut %d", j, low, k, M)
					}
					mm := k
					if mm < 0 {
						mm = -k
					}
					a := tab.accept56(uint32(j), mm)
					if sq := uint64(sqOf[j]) << 24; seenSq[j] && sq > a {
						t.Fatalf("block %d k=%d: squeeze %d above threshold %d", j, k, sq, a)
					}
					thr := max(a, uint64(sqOf[j])<<24)
					if thr > 1<<56 {
						t.Fatalf("threshold above 2^56")
					}
					// try accepts exactly the acceptance words below thr.
					if thr > 0 {
						if _, ok := tab.try(uint32(j), sqOf[j], low|(thr-1)<<8); !ok {
							t.Fatalf("block %d k=%d: word below threshold rejected", j, k)
						}
					}
					if thr < 1<<56 {
						if _, ok := tab.try(uint32(j), sqOf[j], low|thr<<8); ok {
							t.Fatalf("block %d k=%d: word at threshold accepted", j, k)
						}
					}
					ks[low], thrs[low] = k, float64(thr)
					z += float64(thr)
				}
				if pj > 0 && z == 0 {
					t.Fatalf("block %d accepts nothing", j)
				}
				for low, k := range ks {
					hit[k+M]++
					if pj > 0 {
						law[k+M] += pj * thrs[low] / z
					}
				}
			}
			var tvK, refK, sumK kahan
			for i, p := range law {
				if hit[i] != 1 {
					t.Fatalf("k = %d proposed %d times", int64(i)-M, hit[i])
				}
				r := pRef(int64(i)-M, s)
				refK.add(r)
				sumK.add(p)
				tvK.add(math.Abs(p - r))
			}
			// Outside the cut the law is 0 and P has mass < 2^-125 (TestNoiseTail).
			tvK.add(0x1p-125)
			tv, ref, sum := tvK.sum()/2, refK.sum(), sumK.sum()
			t.Logf("s=%.4f blocks=%d columns=%d TV=%.3g (2^%.1f) sum=%v ref=%v", s, J, len(tab.cols), tv, math.Log2(tv), sum, ref)
			if math.Abs(sum-1) > 0x1p-48 || math.Abs(ref-1) > 0x1p-48 {
				t.Fatalf("law sums to %v, reference to %v", sum, ref)
			}
			if !(tv < 0x1p-46) {
				t.Fatalf("TV(sampled, rounded Gaussian) = %g >= 2^-46", tv)
			}
		})
	}
}

// TestNoiseMoments checks mean ~ 0 and variance ~ s^2 + 1/12 of sampled k
// within 5 standard errors.
func TestNoiseMoments(t *testing.T) {
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
func TestNoiseChiSquare(t *testing.T) {
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
func TestNoiseTail(t *testing.T) {
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
			// Cut mass: below 2^-125 as documented.
			cut := (math.Erfc((float64(M)-0.5)/s/math.Sqrt2) + math.Erfc((float64(M)+0.5)/s/math.Sqrt2)) / 2
			if !(cut < 0x1p-125) {
				t.Errorf("cut mass %g", cut)
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
func TestNoiseGrid(t *testing.T) {
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

func formatG(x float64) string { return "sigma=" + strconv.FormatFloat(x, 'g', -1, 64) }

// TestNoiseStreams: same seed same stream, different seeds and Split children differ.
func TestNoiseStreams(t *testing.T) {
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
	gaussCache.Lock()
	size := len(gaussCache.m)
	gaussCache.Unlock()
	if size > maxGaussTables {
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
