package dfs

import (
	"errors"
	"math"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/internal/normal"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// gaussData draws n rows of d features, two or more classes, with class k's
// mean shifted by shift*(k+1) on the support features.
func gaussData(seed uint64, n, d, k int, support []int, shift float64) Data {
	r := mrand.New(mrand.NewPCG(seed, 1))
	x := make([]float32, n*d)
	labels := make([]int, n)
	for i := 0; i < n; i++ {
		lab := i % k
		labels[i] = lab
		for j := 0; j < d; j++ {
			x[i*d+j] = float32(r.NormFloat64())
		}
		for _, j := range support {
			x[i*d+j] += float32(shift * float64(lab))
		}
	}
	return Data{X: x, D: d, Labels: labels, N: n}
}

func baseParams() Params {
	return Params{M: 3, Score: ScoreDistance, MuSelect: 1, MuRelease: 1, C: 5, Classes: 2, Labels: LabelsPublic}
}

// untouched reports whether noise has not been drawn from since it was
// seeded with seed.
func untouched(t *testing.T, noise *release.Noise, seed uint64) {
	t.Helper()
	if noise.Rand().Uint64() != seededNoise(t, seed).Rand().Uint64() {
		t.Error("noise was drawn before the error was returned")
	}
}

func TestSelectValidation(t *testing.T) {
	good := gaussData(1, 20, 6, 2, []int{0}, 1)
	nan := gaussData(1, 20, 6, 2, []int{0}, 1)
	nan.X[7*6+3] = float32(math.NaN())
	inf := gaussData(1, 20, 6, 2, []int{0}, 1)
	inf.X[5] = float32(math.Inf(-1))
	badLabel := gaussData(1, 20, 6, 2, []int{0}, 1)
	badLabel.Labels[4] = 2
	negLabel := gaussData(1, 20, 6, 2, []int{0}, 1)
	negLabel.Labels[0] = -1
	short := good
	short.X = good.X[:len(good.X)-1]
	fewLabels := good
	fewLabels.Labels = good.Labels[:19]
	with := func(f func(*Params)) Params { p := baseParams(); f(&p); return p }

	cases := []struct {
		name string
		data Data
		p    Params
		want string
	}{
		{"mismatched d", short, baseParams(), "do not make"},
		{"zero d", Data{D: 0}, baseParams(), "dimension"},
		{"label count", fewLabels, baseParams(), "labels for"},
		{"NaN", nan, baseParams(), "row 7 holds a NaN"},
		{"Inf", inf, baseParams(), "row 0 holds a NaN or infinite"},
		{"label too large", badLabel, baseParams(), "row 4 has label 2"},
		{"negative label", negLabel, baseParams(), "row 0 has label -1"},
		{"m zero", good, with(func(p *Params) { p.M = 0 }), "m must lie"},
		{"m above d", good, with(func(p *Params) { p.M = 7 }), "m must lie"},
		{"one class", good, with(func(p *Params) { p.Classes = 1 }), "two classes"},
		{"unknown score", good, with(func(p *Params) { p.Score = "chi2" }), "unknown score"},
		{"C zero", good, with(func(p *Params) { p.C = 0 }), "clipping bound"},
		{"C NaN", good, with(func(p *Params) { p.C = math.NaN() }), "clipping bound"},
		{"C Inf", good, with(func(p *Params) { p.C = math.Inf(1) }), "clipping bound"},
		{"mu zero", good, with(func(p *Params) { p.MuSelect = 0 }), "MuSelect"},
		{"mu too small for the grid", good, with(func(p *Params) { p.MuSelect = 1e-5 }), "too small"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			noise := seededNoise(t, 9)
			_, err := Select(noise, c.data, c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to mention %q", err, c.want)
			}
			untouched(t, noise, 9)
		})
	}
}

func TestSelectAcceptsEmptyClassAndNoRows(t *testing.T) {
	// Class 2 holds no row: not refused (that would be a data-dependent refusal).
	d := gaussData(2, 60, 8, 2, []int{1, 2}, 3)
	p := baseParams()
	p.Classes = 3
	p.MuSelect = 50
	sel, err := Select(seededNoise(t, 1), d, p)
	if err != nil {
		t.Fatalf("empty class refused: %v", err)
	}
	if len(sel.Indices) != p.M {
		t.Fatalf("got %d indices", len(sel.Indices))
	}
	// The empty class's noisy count is about 0, so it is left out of the score
	// and the support is still found.
	if got := slices.Sorted(slices.Values(sel.Indices[:2])); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("with an empty class the top two are %v, want [1 2]", sel.Indices[:2])
	}
	if _, err := Select(seededNoise(t, 1), Data{D: 8}, baseParams()); err != nil {
		t.Errorf("no rows refused: %v", err)
	}
}

func TestReleaseValidation(t *testing.T) {
	good := gaussData(1, 20, 6, 2, []int{0}, 1)
	nanKept := gaussData(1, 20, 6, 2, []int{0}, 1)
	nanKept.X[3*6+1] = float32(math.NaN())
	nanDropped := gaussData(1, 20, 6, 2, []int{0}, 1)
	nanDropped.X[3*6+5] = float32(math.NaN())
	badLabel := gaussData(1, 20, 6, 2, []int{0}, 1)
	badLabel.Labels[19] = 5
	sel := Selection{Indices: []int{0, 1, 2}}
	with := func(f func(*Params)) Params { p := baseParams(); f(&p); return p }
	cases := []struct {
		name string
		data Data
		sel  Selection
		p    Params
		want string // "" means success
	}{
		{"ok", good, sel, baseParams(), ""},
		{"NaN in a dropped feature is not read", nanDropped, sel, baseParams(), ""},
		{"NaN in a kept feature", nanKept, sel, baseParams(), "row 3 holds a NaN"},
		{"label out of range", badLabel, sel, baseParams(), "row 19 has label 5"},
		{"selection size", good, Selection{Indices: []int{0, 1}}, baseParams(), "holds 2 features"},
		{"index out of range", good, Selection{Indices: []int{0, 1, 6}}, baseParams(), "outside"},
		{"duplicate index", good, Selection{Indices: []int{0, 1, 1}}, baseParams(), "twice"},
		{"mu release zero", good, sel, with(func(p *Params) { p.MuRelease = 0 }), "MuRelease"},
		{"labels option missing", good, sel, with(func(p *Params) { p.Labels = "" }), "labels option"},
		{"private labels without eps", good, sel, with(func(p *Params) { p.Labels = LabelsPrivate }), "EpsLabels"},
		{"negative CRelease", good, sel, with(func(p *Params) { p.CRelease = -1 }), "CRelease"},
		{"one class", good, sel, with(func(p *Params) { p.Classes = 1 }), "two classes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			noise := seededNoise(t, 9)
			emitted := 0
			err := ReleaseRows(noise, c.data, c.sel, c.p, func(int, []float32, int) error { emitted++; return nil })
			if c.want == "" {
				if err != nil || emitted != c.data.N {
					t.Fatalf("err = %v, emitted %d of %d", err, emitted, c.data.N)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to mention %q", err, c.want)
			}
			if emitted != 0 {
				t.Errorf("%d rows emitted before the error", emitted)
			}
			untouched(t, noise, 9)
		})
	}
}

func TestReleaseStopsOnEmitError(t *testing.T) {
	d := gaussData(1, 3000, 4, 2, nil, 0)
	stop := errors.New("stop")
	emitted := 0
	err := ReleaseRows(seededNoise(t, 1), d, Selection{Indices: []int{0, 1, 2}}, baseParams(),
		func(i int, _ []float32, _ int) error {
			if i != emitted {
				t.Fatalf("row %d emitted out of order (expected %d)", i, emitted)
			}
			emitted++
			if i == 1500 {
				return stop
			}
			return nil
		})
	if !errors.Is(err, stop) || emitted != 1501 {
		t.Fatalf("err = %v after %d rows, want stop after 1501", err, emitted)
	}
}

// moments returns the mean and variance of xs.
func moments(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

// checkNoise fails unless errs look like N(0, sigma^2): mean within 5 standard
// errors, variance within 5 standard errors (2 sigma^4/n for a Gaussian).
func checkNoise(t *testing.T, what string, errs []float64, sigma float64) {
	t.Helper()
	n := float64(len(errs))
	mean, v := moments(errs)
	if math.Abs(mean) > 5*sigma/math.Sqrt(n) {
		t.Errorf("%s: noise mean %.4g, sigma %.4g, n %v", what, mean, sigma, n)
	}
	if math.Abs(v/(sigma*sigma)-1) > 5*math.Sqrt(2/n) {
		t.Errorf("%s: noise variance %.4g, want sigma^2 = %.4g (n %v)", what, v, sigma*sigma, n)
	}
}

func TestStatsNoiseVariance(t *testing.T) {
	data := gaussData(3, 40, 30, 2, []int{0, 1}, 2)
	for _, score := range []string{ScoreDistance, ScoreT} {
		t.Run(score, func(t *testing.T) {
			p := baseParams()
			p.Score = score
			p.MuSelect = 0.7
			p.C = 4
			counts, sums, sq, err := exactStats(data, p.C, p.Classes, score == ScoreT)
			if err != nil {
				t.Fatal(err)
			}
			cal, _ := p.selectCal(data.D)
			unit, unitSq := p.C/statScale, p.C*p.C/statScale
			var ec, es, eq []float64
			noise := seededNoise(t, 11)
			for rep := 0; rep < 600; rep++ {
				sel, err := Select(noise, data, p)
				if err != nil {
					t.Fatal(err)
				}
				st := sel.Stats
				if rep == 0 && (st.SigmaSum != cal.sigmaSum*unit || st.SigmaCount != cal.sigmaCount) {
					t.Fatalf("reported sigmas %v %v differ from the calibration", st.SigmaSum, st.SigmaCount)
				}
				for k, c := range counts {
					ec = append(ec, st.Counts[k]-float64(c))
				}
				for i, s := range sums {
					es = append(es, st.Sums[i]-float64(s)*unit)
				}
				if score == ScoreT {
					for i, s := range sq {
						eq = append(eq, st.SumSq[i]-float64(s)*unitSq)
					}
				} else if st.SumSq != nil {
					t.Fatal("distance score released sums of squares")
				}
			}
			checkNoise(t, "counts", ec, cal.sigmaCount)
			checkNoise(t, "sums", es, cal.sigmaSum*unit)
			if score == ScoreT {
				checkNoise(t, "sums of squares", eq, cal.sigmaSq*unitSq)
			}
			// The calibration spends (almost) all of MuSelect and no more.
			ms, err := p.SelectMechanisms(data.D)
			if err != nil {
				t.Fatal(err)
			}
			var mus []float64
			for _, m := range ms {
				if err := m.Validate(); err != nil {
					t.Fatal(err)
				}
				if m.Neighbours != mechanism.AddRemove {
					t.Errorf("selection recorded under %q", m.Neighbours)
				}
				if r := m.Sensitivity / m.Sigma; math.Abs(r/m.Mu-1) > 1e-9 {
					t.Errorf("sensitivity/sigma = %v but mu = %v", r, m.Mu)
				}
				mus = append(mus, m.GDPMu())
			}
			if tot := accountant.Compose(mus...); tot > p.MuSelect || tot < 0.99*p.MuSelect {
				t.Errorf("selection mechanisms compose to %v, MuSelect %v", tot, p.MuSelect)
			}
		})
	}
}

// TestQuantisedRowNorm checks the sensitivity bounds the calibration relies
// on: a quantised clipped row has norm at most 2^24 units, its squares at
// most 2^24 units in L1, even for rows built to stress the rounding.
func TestQuantisedRowNorm(t *testing.T) {
	r := mrand.New(mrand.NewPCG(5, 5))
	rows := [][]float32{
		{1e30, 0, 0},
		{3, 4},
		{float32(math.MaxFloat32), float32(math.MaxFloat32), -float32(math.MaxFloat32)},
		{1e-30, 1e-38, 0},
	}
	for i := 0; i < 300; i++ {
		d := 1 + r.IntN(2000)
		row := make([]float32, d)
		scale := math.Pow(10, float64(r.IntN(20)-10))
		for j := range row {
			row[j] = float32(r.NormFloat64() * scale)
		}
		rows = append(rows, row)
	}
	for _, c := range []float64{1, 5, 0.3, 1e6} {
		for i, row := range rows {
			data := Data{X: row, D: len(row), Labels: []int{0}, N: 1}
			_, sums, sq, err := exactStats(data, c, 2, true)
			if err != nil {
				t.Fatal(err)
			}
			var n2, l1 int64
			for j := 0; j < len(row); j++ {
				n2 += sums[j] * sums[j]
				l1 += sq[j]
			}
			if n2 > 1<<48 || l1 > 1<<24 {
				t.Fatalf("row %d, C %v: quantised norm^2 %d (max 2^48), squares %d (max 2^24)", i, c, n2, l1)
			}
			dst := make([]float32, len(row))
			idx := make([]int, len(row))
			for j := range idx {
				idx[j] = j
			}
			clipGather(dst, row, idx, c)
			var ss float64
			for _, v := range dst {
				ss += float64(v) * float64(v)
			}
			if math.Sqrt(ss) >= c {
				t.Fatalf("row %d: released norm %v not below %v", i, math.Sqrt(ss), c)
			}
		}
	}
}

func TestStatsIndependentOfWorkers(t *testing.T) {
	data := gaussData(4, 3001, 17, 3, []int{2}, 1)
	prev := runtime.GOMAXPROCS(1)
	c1, s1, q1, _ := exactStats(data, 3, 3, true)
	runtime.GOMAXPROCS(4)
	c4, s4, q4, _ := exactStats(data, 3, 3, true)
	runtime.GOMAXPROCS(prev)
	if !slices.Equal(c1, c4) || !slices.Equal(s1, s4) || !slices.Equal(q1, q4) {
		t.Fatal("exact statistics depend on the number of workers")
	}
	if c1[0]+c1[1]+c1[2] != 3001 {
		t.Fatalf("counts %v", c1)
	}
}

func TestSelectRecoversSupport(t *testing.T) {
	support := []int{3, 17, 40, 41, 77, 90}
	cases := []struct {
		name    string
		score   string
		classes int
	}{
		{"distance binary (Algorithm 1)", ScoreDistance, 2},
		{"distance three classes (Algorithm 2)", ScoreDistance, 3},
		{"t binary", ScoreT, 2},
		{"t three classes", ScoreT, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := gaussData(6, 3000, 100, c.classes, support, 1)
			p := Params{M: len(support), Score: c.score, MuSelect: 5, C: 12, Classes: c.classes}
			for seed := uint64(0); seed < 5; seed++ {
				sel, err := Select(seededNoise(t, seed), data, p)
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Sorted(slices.Values(sel.Indices)); !slices.Equal(got, support) {
					t.Fatalf("seed %d: selected %v, want %v", seed, got, support)
				}
				if !slices.IsSortedFunc(sel.Scores, func(a, b float64) int { return -cmpFloat(a, b) }) {
					t.Fatalf("scores not in decreasing order: %v", sel.Scores)
				}
			}
		})
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestSelectionChangesWithNoise(t *testing.T) {
	data := gaussData(7, 500, 100, 2, []int{1, 2, 3, 4, 5}, 0.5)
	for _, score := range []string{ScoreDistance, ScoreT} {
		p := Params{M: 5, Score: score, MuSelect: 0.05, C: 10, Classes: 2}
		a, err := Select(seededNoise(t, 1), data, p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Select(seededNoise(t, 2), data, p)
		a2, _ := Select(seededNoise(t, 1), data, p)
		if slices.Equal(a.Indices, b.Indices) {
			t.Errorf("%s: two seeds gave the same selection %v at mu = 0.05", score, a.Indices)
		}
		if !slices.Equal(a.Indices, a2.Indices) {
			t.Errorf("%s: the same seed gave %v and %v", score, a.Indices, a2.Indices)
		}
	}
}

func TestReleaseNoiseVariance(t *testing.T) {
	// Rows inside the clip ball (norm 3 < CRelease 4) and rows outside it
	// (norm 30): outputs are the scaled kept coordinates plus N(0, sigma^2).
	const n, d = 6000, 5
	idx := []int{4, 0, 2}
	x := make([]float32, n*d)
	labels := make([]int, n)
	small := []float32{1, 0, 2, 0, 2} // kept (2, 1, 2): norm 3
	big := []float32{10, 0, 20, 0, 20}
	for i := 0; i < n; i++ {
		src := small
		if i%2 == 1 {
			src = big
		}
		copy(x[i*d:], src)
		labels[i] = i % 2
	}
	data := Data{X: x, D: d, Labels: labels, N: n}
	p := Params{M: 3, MuRelease: 2, C: 100, CRelease: 4, Classes: 2, Labels: LabelsPublic}
	sigma, _ := p.releaseSigma()
	want := map[int][]float64{0: {2, 1, 2}, 1: {2 * 4.0 / 3, 4.0 / 3, 2 * 4.0 / 3}}
	var errs []float64
	err := ReleaseRows(seededNoise(t, 3), data, Selection{Indices: idx}, p, func(i int, v []float32, lab int) error {
		if lab != labels[i] {
			t.Fatalf("public label changed at row %d", i)
		}
		for r, y := range v {
			errs = append(errs, float64(y)-want[i%2][r])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkNoise(t, "release", errs, sigma)
	if want := 2 * 4 / p.MuRelease; sigma < want || sigma > want*1.01 {
		t.Errorf("sigma = %v, want just above 2 CRelease/MuRelease = %v", sigma, want)
	}
	ms, err := p.ReleaseMechanisms()
	if err != nil || len(ms) != 1 {
		t.Fatalf("mechanisms %v, %v", ms, err)
	}
	if m := ms[0]; m.Neighbours != mechanism.ReplaceOne || m.Mu > p.MuRelease || m.Mu < 0.99*p.MuRelease || m.Sigma != sigma {
		t.Errorf("release mechanism %+v", m)
	}
}

func TestReleaseDeterministicAcrossWorkers(t *testing.T) {
	data := gaussData(8, 5000, 20, 2, []int{1}, 1)
	p := baseParams()
	p.Labels, p.EpsLabels = LabelsPrivate, 1
	run := func() []float32 {
		var out []float32
		_ = ReleaseRows(seededNoise(t, 4), data, Selection{Indices: []int{1, 5, 9}}, p, func(_ int, v []float32, lab int) error {
			out = append(out, v...)
			out = append(out, float32(lab))
			return nil
		})
		return out
	}
	prev := runtime.GOMAXPROCS(1)
	a := run()
	runtime.GOMAXPROCS(3)
	b := run()
	runtime.GOMAXPROCS(prev)
	if !slices.Equal(a, b) {
		t.Fatal("release depends on the number of workers")
	}
}

func TestRandomizedResponseRates(t *testing.T) {
	cases := []struct {
		k   int
		eps float64
	}{{2, 1}, {4, 1}, {10, 3}, {3, 0.1}}
	for _, c := range cases {
		const n = 40000
		x := make([]float32, n)
		labels := make([]int, n)
		for i := range labels {
			labels[i] = i % c.k
		}
		data := Data{X: x, D: 1, Labels: labels, N: n}
		p := Params{M: 1, MuRelease: 1, C: 1, Classes: c.k, Labels: LabelsPrivate, EpsLabels: c.eps}
		// counts[true][released]
		counts := make([][]float64, c.k)
		for i := range counts {
			counts[i] = make([]float64, c.k)
		}
		err := ReleaseRows(seededNoise(t, uint64(c.k)), data, Selection{Indices: []int{0}}, p, func(i int, _ []float32, lab int) error {
			if lab < 0 || lab >= c.k {
				t.Fatalf("released label %d", lab)
			}
			counts[labels[i]][lab]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		keep := math.Exp(c.eps) / (math.Exp(c.eps) + float64(c.k-1))
		perClass := float64(n / c.k)
		for a := 0; a < c.k; a++ {
			for b := 0; b < c.k; b++ {
				want := keep
				if a != b {
					want = (1 - keep) / float64(c.k-1)
				}
				got := counts[a][b] / perClass
				if se := math.Sqrt(want * (1 - want) / perClass); math.Abs(got-want) > 5*se {
					t.Errorf("K=%d eps=%v: P(%d -> %d) = %.4f, want %.4f", c.k, c.eps, a, b, got, want)
				}
			}
		}
		if th := float64(keepThreshold(c.eps, c.k)) / 0x1p53; th > keep || th < keep-1e-14 {
			t.Errorf("keep threshold %v, keep probability %v", th, keep)
		}
		ms, _ := p.ReleaseMechanisms()
		if len(ms) != 2 || ms[1].Neighbours != mechanism.ReplaceOne {
			t.Fatalf("label mechanism missing: %+v", ms)
		}
	}
}

func TestRandomizedResponseMu(t *testing.T) {
	for _, eps := range []float64{0.01, 0.5, 1, 3, 10, 30} {
		mu := RandomizedResponseMu(eps)
		// G_mu's symmetric point Phi(-mu/2) must equal 1/(1+e^eps).
		got := phi(-mu / 2)
		want := 1 / (1 + math.Exp(eps))
		if math.Abs(got/want-1) > 1e-6 {
			t.Errorf("eps %v: Phi(-mu/2) = %v, want %v", eps, got, want)
		}
		// The eps-DP trade-off f_{eps,0} lies above G_mu: check on a grid of alpha.
		for a := 0.0005; a < 1; a += 0.0005 {
			f := math.Max(0, math.Max(1-math.Exp(eps)*a, math.Exp(-eps)*(1-a)))
			g := phi(inversePhi(a) - mu)
			if g > f+1e-9 {
				t.Fatalf("eps %v: G_mu(%v) = %v above the eps-DP trade-off %v", eps, a, g, f)
			}
		}
	}
}

// phi returns the standard normal CDF Phi(x).
func phi(x float64) float64 { return math.Exp(normal.LogPhi(x)) }

// inversePhi returns Phi^-1(1-a): G_mu(a) = Phi(Phi^-1(1-a) - mu).
func inversePhi(a float64) float64 { return math.Sqrt2 * math.Erfcinv(2*a) }

func TestApply(t *testing.T) {
	x := []float32{10, 11, 12, 13}
	cases := []struct {
		idx     []int
		want    []float32
		wantErr bool
	}{
		{[]int{0, 1, 2, 3}, []float32{10, 11, 12, 13}, false},
		{[]int{3, 0}, []float32{13, 10}, false},
		{[]int{2, 2}, []float32{12, 12}, false},
		{[]int{}, []float32{}, false},
		{[]int{4}, nil, true},
		{[]int{-1}, nil, true},
	}
	for _, c := range cases {
		got, err := Apply(x, c.idx)
		if (err != nil) != c.wantErr || !slices.Equal(got, c.want) {
			t.Errorf("Apply(%v) = %v, %v; want %v (error %v)", c.idx, got, err, c.want, c.wantErr)
		}
	}
}

func TestTopM(t *testing.T) {
	got := TopM([]float64{1, 5, 3, 5, 0}, 3)
	if !slices.Equal(got, []int{1, 3, 2}) {
		t.Errorf("TopM = %v, want [1 3 2]", got)
	}
}
