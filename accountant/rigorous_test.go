package accountant

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
)

func TestRigorousReference(t *testing.T) {
	cases := []struct {
		name  string
		ms    []mechanism.Mechanism
		delta float64
		want  float64
		tol   float64 // relative, upper side; below by at most 0.1%
	}{
		{"subsampled q=0.01 sigma=0.7 T=120", []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.7, Steps: 120}}, 1e-5, 2.4612, 0.01},
		{"split into two entries", []mechanism.Mechanism{
			{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.7, Steps: 20},
			{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.7, Steps: 100},
		}, 1e-5, 2.4612, 0.01},
		{"gaussian sensitivity 1 sigma 3.7306", []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Sensitivity: 1, Sigma: 3.7306}}, 1e-5, 1.0, 1e-4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := RigorousEpsilon(c.ms, c.delta)
			if err != nil {
				t.Fatal(err)
			}
			if got < c.want*(1-1e-3) || got > c.want*(1+c.tol) {
				t.Errorf("epsilon = %.6f, want %.6f", got, c.want)
			}
		})
	}
	d, err := RigorousDelta([]mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 1}}, 1)
	if err != nil || math.Abs(d-0.1269367) > 1e-7 {
		t.Errorf("mu=1: delta(1) = %v, %v; want 0.1269367", d, err)
	}
}

// Only Gaussian and external entries: the exact GDP conversion.
func TestRigorousGaussianOnlyIsExact(t *testing.T) {
	ms := []mechanism.Mechanism{
		{Kind: mechanism.KindGaussian, Mu: 0.3},
		{Kind: mechanism.KindGaussian, Sensitivity: 2, Sigma: 5, Steps: 4},
		{Kind: mechanism.KindExternal, Mu: 0.2},
		{Kind: mechanism.KindGaussian, Mu: 0.1, Neighbours: mechanism.ReplaceOne},
	}
	var mus []float64
	for _, m := range ms {
		mus = append(mus, m.GDPMu())
	}
	mu := Compose(mus...)
	got, err := RigorousEpsilon(ms, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Epsilon(mu, 1e-6)
	if math.Abs(got-want) > 1e-12*want {
		t.Errorf("epsilon = %v, exact %v", got, want)
	}
}

// q = 1 subsampled Gaussian steps are plain Gaussians: the rigorous figure
// must match the exact GDP conversion (from above).
func TestRigorousQ1MatchesGDP(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		steps int
	}{{2, 25}, {1, 1}, {5, 100}} {
		m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 1, Sigma: c.sigma, Steps: c.steps}
		mu := math.Sqrt(float64(c.steps)) / c.sigma // exact; GDPMu is the CLT value
		got, err := RigorousEpsilon([]mechanism.Mechanism{m}, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Epsilon(mu, 1e-5)
		if got < want || got > want*(1+1e-4) {
			t.Errorf("%+v: epsilon %.7f, exact GDP %.7f", c, got, want)
		}
		dg, _ := RigorousDelta([]mechanism.Mechanism{m}, 1)
		dw, _ := Delta(mu, 1)
		if dg < dw || dg > dw*(1+1e-4)+1e-12 {
			t.Errorf("%+v: delta(1) %.9g, exact GDP %.9g", c, dg, dw)
		}
	}
}

// A Gaussian entry composed through the PLD (next to a non-Gaussian one)
// equals the merged-mu figure: compare against a single Gaussian PLD.
func TestRigorousMixedGaussianMerge(t *testing.T) {
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.1}
	gs := []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.4}, {Kind: mechanism.KindExternal, Mu: 0.3}, {Kind: mechanism.KindGaussian, Mu: 0.2, Steps: 9}}
	got, err := RigorousDelta(append([]mechanism.Mechanism{lap}, gs...), 1)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := pld.Laplace(1, 10)
	g, _ := pld.GaussianMu(math.Sqrt(0.16 + 0.09 + 9*0.04))
	p, _ := l.Compose(g)
	want, _ := p.Delta(1)
	if math.Abs(got/want-1) > 1e-6 {
		t.Errorf("delta(1) = %v, want %v", got, want)
	}
	onlyG, _ := RigorousDelta(gs, 1)
	if !(got > onlyG) {
		t.Errorf("adding a Laplace entry did not raise delta: %v <= %v", got, onlyG)
	}
}

// The CLT mu underestimates epsilon for q=0.2, sigma=3, T=50, delta=1/48000;
// the rigorous figure is about 7% higher.
func TestRigorousAboveCLT(t *testing.T) {
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.2, Sigma: 3, Steps: 50}
	const delta = 1.0 / 48000
	clt, _ := Epsilon(m.GDPMu(), delta)
	got, err := RigorousEpsilon([]mechanism.Mechanism{m}, delta)
	if err != nil {
		t.Fatal(err)
	}
	if r := got/clt - 1; r < 0.05 || r > 0.09 {
		t.Errorf("rigorous %.5f vs CLT %.5f: +%.2f%%, want about +7%%", got, clt, 100*r)
	}
}

func TestRigorousLaplace(t *testing.T) {
	d, err := RigorousDelta([]mechanism.Mechanism{{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.8}}, 0.8)
	if err != nil || d > 1e-4 {
		t.Errorf("laplace eps0=0.8: delta(0.8) = %v, %v; want ~0", d, err)
	}
	// Replace-one figures are stated for replacement and charged as stated.
	d1, _ := RigorousDelta([]mechanism.Mechanism{{Kind: mechanism.KindLaplace, Epsilon: 0.8, Neighbours: mechanism.ReplaceOne}}, 0.5)
	d2, _ := RigorousDelta([]mechanism.Mechanism{{Kind: mechanism.KindLaplace, Epsilon: 0.8}}, 0.5)
	if d1 != d2 || !(d1 > 0) {
		t.Errorf("replace-one laplace: %v, add/remove with the same epsilon: %v", d1, d2)
	}
	// Steps compose: 5 x eps 0.2 is pure 1-DP. 0.2 is not on the loss grid
	// (spacing 2^-13), so each step's largest loss is spread over the two
	// neighbouring grid points, and delta(1) is small but not 0.
	d, _ = RigorousDelta([]mechanism.Mechanism{{Kind: mechanism.KindLaplace, Epsilon: 0.2, Steps: 5}}, 1)
	if d > 1e-5 {
		t.Errorf("5 x laplace 0.2: delta(1) = %v, want ~0", d)
	}
}

func TestRigorousGaussianReplaceOne(t *testing.T) {
	// A replace-one entry's mu already covers both steps of a replacement.
	a, _ := RigorousEpsilon([]mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.5, Neighbours: mechanism.ReplaceOne}, {Kind: mechanism.KindLaplace, Epsilon: 0.1}}, 1e-5)
	b, _ := RigorousEpsilon([]mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.5}, {Kind: mechanism.KindLaplace, Epsilon: 0.1}}, 1e-5)
	if a != b {
		t.Errorf("replace-one mu 0.5: %v, add-remove mu 0.5: %v", a, b)
	}
}

func TestRigorousErrors(t *testing.T) {
	good := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.1, Sigma: 1, Steps: 10}
	cases := []struct {
		name string
		ms   []mechanism.Mechanism
		eps  float64
		del  float64
	}{
		{"q=0", []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0, Sigma: 1, Steps: 1}}, 1, 1e-5},
		{"q>1", []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 1.2, Sigma: 1, Steps: 1}}, 1, 1e-5},
		{"sigma=0", []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.1, Sigma: 0, Steps: 1}}, 1, 1e-5},
		{"sigma<0", []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.1, Sigma: -1, Steps: 1}}, 1, 1e-5},
		{"T=0", []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.1, Sigma: 1, Steps: 0}}, 1, 1e-5},
		{"T<0", []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 1, Steps: -2}}, 1, 1e-5},
		{"unknown kind", []mechanism.Mechanism{{Kind: "exponential", Mu: 1}}, 1, 1e-5},
		{"missing kind", []mechanism.Mechanism{{Mu: 1}}, 1, 1e-5},
		{"delta=0", []mechanism.Mechanism{good}, 1, 0},
		{"delta=1", []mechanism.Mechanism{good}, 1, 1},
		{"epsilon<0", []mechanism.Mechanism{good}, -0.5, 1e-5},
		{"epsilon NaN", []mechanism.Mechanism{good}, math.NaN(), 1e-5},
	}
	for _, c := range cases {
		_, errE := RigorousEpsilon(c.ms, c.del)
		_, errD := RigorousDelta(c.ms, c.eps)
		if errE == nil && errD == nil {
			t.Errorf("%s: no error", c.name)
		}
		if len(c.ms) == 1 && !reflect.DeepEqual(c.ms[0], good) { // Mechanism holds a slice (Parts): not comparable
			if _, err := composeInto(nil, c.ms[0]); err == nil {
				t.Errorf("%s: ComposeInto: no error", c.name)
			}
		}
	}
	// A replace-one subsampled entry is accounted with its own pair: above
	// one add/remove step, below two composed ones.
	sub := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.1, Sigma: 1, Steps: 10}
	ar, _ := RigorousEpsilon([]mechanism.Mechanism{sub}, 1e-5)
	sub2 := sub
	sub2.Steps = 20
	ar2, _ := RigorousEpsilon([]mechanism.Mechanism{sub2}, 1e-5)
	sub.Neighbours = mechanism.ReplaceOne
	if r1, err := RigorousEpsilon([]mechanism.Mechanism{sub}, 1e-5); err != nil || !(r1 > ar && r1 < ar2) {
		t.Errorf("replace-one subsampled: epsilon %v, %v; want between %v and %v", r1, err, ar, ar2)
	}
	for _, c := range []struct {
		q        float64
		steps    int
		eps, del float64
	}{{0, 10, 1, 1e-5}, {1.1, 10, 1, 1e-5}, {0.1, 0, 1, 1e-5}, {0.1, 10, -1, 1e-5}, {0.1, 10, 1, 0}, {0.1, 10, 1, 1}} {
		if _, err := CalibrateSubsampledSigma(c.q, c.steps, c.eps, c.del); err == nil {
			t.Errorf("CalibrateSubsampledSigma%+v: no error", c)
		}
	}
	// Empty list: nothing spent.
	if e, err := RigorousEpsilon(nil, 1e-5); err != nil || e != 0 {
		t.Errorf("empty: epsilon %v, %v", e, err)
	}
}

func TestCalibrateSubsampledSigma(t *testing.T) {
	const q, steps, target, delta = 0.05, 100, 2.0, 1e-5
	sigma, err := CalibrateSubsampledSigma(q, steps, target, delta)
	if err != nil {
		t.Fatal(err)
	}
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: sigma, Steps: steps}
	got, err := RigorousEpsilon([]mechanism.Mechanism{m}, delta)
	if err != nil {
		t.Fatal(err)
	}
	if got > target || got < target*0.999 {
		t.Errorf("sigma %v gives epsilon %v, want just below %v", sigma, got, target)
	}
}

// Extending a cache one entry at a time agrees with accounting the list.
func TestComposeIntoMatchesList(t *testing.T) {
	ms := []mechanism.Mechanism{
		{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 50},
		{Kind: mechanism.KindGaussian, Mu: 0.2},
		{Kind: mechanism.KindLaplace, Epsilon: 0.05},
		{Kind: mechanism.KindExternal, Mu: 0.1, Steps: 3},
		{Kind: mechanism.KindSubsampledGaussian, Q: 0.02, Sigma: 1.5, Steps: 30},
		{Kind: mechanism.KindLaplace, Epsilon: 0.05, Neighbours: mechanism.ReplaceOne},
	}
	var cache []byte
	var err error
	for i, m := range ms {
		if cache, err = composeInto(cache, m); err != nil {
			t.Fatal(err)
		}
		got, err := cachedEpsilon(cache, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		want, err := RigorousEpsilon(ms[:i+1], 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got/want-1) > 1e-4 {
			t.Errorf("after %d entries: cached %v, list %v", i+1, got, want)
		}
		gd, _ := cachedDelta(cache, 0.5)
		wd, _ := RigorousDelta(ms[:i+1], 0.5)
		if math.Abs(gd/wd-1) > 1e-3 {
			t.Errorf("after %d entries: cached delta %v, list %v", i+1, gd, wd)
		}
	}
	if n, err := cachedCount(cache); err != nil || n != int64(len(ms)) {
		t.Errorf("count = %v, %v", n, err)
	}
	if e, err := cachedEpsilon(nil, 1e-5); err != nil || e != 0 {
		t.Errorf("empty cache: %v, %v", e, err)
	}
	for name, bad := range map[string][]byte{
		"magic":     []byte("garbage that is long enough to parse"),
		"truncated": cache[:len(cache)-1],
		"flag":      append(append([]byte(nil), cache[:len(rigCacheMagic)+16]...), 7),
	} {
		if _, err := cachedEpsilon(bad, 1e-5); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := composeInto(bad, ms[0]); err == nil {
			t.Errorf("%s: ComposeInto: no error", name)
		}
	}
}

func TestRigorousRoundoffGuard(t *testing.T) {
	ms := []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 10000}}
	if _, err := RigorousEpsilon(ms, 1e-12); !errors.Is(err, pld.ErrRoundoff) {
		t.Errorf("delta 1e-12 after 10000 steps: err = %v, want ErrRoundoff", err)
	}
}

// rigMixedEntry returns the i-th entry of a mixed ledger.
func rigMixedEntry(i int) mechanism.Mechanism {
	switch i % 4 {
	case 0:
		return mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1.2, Steps: 10}
	case 1:
		return mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.01}
	case 2:
		return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05}
	default:
		return mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.005, Sigma: 0.9, Steps: 5}
	}
}

var rigFreshSigma int // never reused across benchmark runs

// BenchmarkComposeIntoCached measures one budget check on a scope whose
// composition already holds 999 mixed entries: extend it by one entry
// (Composition.Add) and read epsilon at delta 1e-5. "repeat": the new
// entry's PLD is in the memo (the usual ledger pattern); "fresh": a
// never-seen entry, built from scratch. (The name predates Composition,
// when the composition was extended as bytes by ComposeInto.)
func BenchmarkComposeIntoCached(b *testing.B) {
	var comp Composition
	var err error
	for i := 0; i < 999; i++ {
		if comp, err = comp.Add(rigMixedEntry(i)); err != nil {
			b.Fatal(err)
		}
	}
	// The previous charge's check computed the scope's composition.
	if _, err := comp.Epsilon(1e-5); err != nil {
		b.Fatal(err)
	}
	// Each check extends the scope, as a ledger does, so no two checks read
	// the same composition.
	check := func(b *testing.B, m mechanism.Mechanism) {
		c, err := comp.Add(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Epsilon(1e-5); err != nil {
			b.Fatal(err)
		}
		comp = c
	}
	b.Run("repeat", func(b *testing.B) {
		enc, _ := comp.MarshalBinary()
		b.ReportMetric(float64(len(enc)), "cache-bytes")
		for b.Loop() {
			check(b, rigMixedEntry(999))
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			rigFreshSigma++
			m := rigMixedEntry(999)
			m.Sigma += float64(rigFreshSigma) * 1e-7 // a new sigma: no memo hit
			check(b, m)
		}
	})
}

// The PLD memo is shared between goroutines (run with -race).
func TestRigorousConcurrent(t *testing.T) {
	ms := []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.03, Sigma: 1.1, Steps: 20}, {Kind: mechanism.KindLaplace, Epsilon: 0.3}}
	want, err := RigorousEpsilon(ms, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			got, err := RigorousEpsilon(ms, 1e-5)
			if err == nil && got != want {
				err = fmt.Errorf("epsilon %v, want %v", got, want)
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// Decoding a cache never panics.
func FuzzComposeIntoCache(f *testing.F) {
	c1, _ := composeInto(nil, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 1})
	c2, _ := composeInto(c1, mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 2})
	c3, _ := composeInto(c2, mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 3})
	p, _ := rigMechanismPLD(mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 2}, pld.DefaultInterval)
	onePLD, _ := (&rigComposition{count: 1, p: p}).encode()
	f.Add(c1)
	f.Add(c2)
	f.Add(c3)
	f.Add(onePLD)
	f.Add([]byte(rigCacheMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := cachedDelta(data, 1); err != nil {
			return
		}
		if _, err := composeInto(data, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.1}); err != nil {
			t.Fatal(err)
		}
	})
}

// Extending a composition one entry at a time agrees with accounting the list.
func TestCompositionMatchesList(t *testing.T) {
	ms := []mechanism.Mechanism{
		{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 50},
		{Kind: mechanism.KindGaussian, Mu: 0.2},
		{Kind: mechanism.KindLaplace, Epsilon: 0.05},
		{Kind: mechanism.KindExternal, Mu: 0.1, Steps: 3},
		{Kind: mechanism.KindSubsampledGaussian, Q: 0.02, Sigma: 1.5, Steps: 30},
		{Kind: mechanism.KindLaplace, Epsilon: 0.05, Neighbours: mechanism.ReplaceOne},
	}
	var comp Composition
	var err error
	for i, m := range ms {
		if comp, err = comp.Add(m); err != nil {
			t.Fatal(err)
		}
		got, err := comp.Epsilon(1e-5)
		if err != nil {
			t.Fatal(err)
		}
		want, err := RigorousEpsilon(ms[:i+1], 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got/want-1) > 1e-4 {
			t.Errorf("after %d entries: cached %v, list %v", i+1, got, want)
		}
		gd, _ := comp.Delta(0.5)
		wd, _ := RigorousDelta(ms[:i+1], 0.5)
		if math.Abs(gd/wd-1) > 1e-3 {
			t.Errorf("after %d entries: cached delta %v, list %v", i+1, gd, wd)
		}
	}
	if n := comp.Count(); n != int64(len(ms)) {
		t.Errorf("count = %v", n)
	}
	if e, err := (Composition{}).Epsilon(1e-5); err != nil || e != 0 {
		t.Errorf("empty composition: %v, %v", e, err)
	}
	// Encoding round-trips exactly.
	cache, err := comp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Composition
	if err := back.UnmarshalBinary(cache); err != nil {
		t.Fatal(err)
	}
	e1, _ := comp.Epsilon(1e-5)
	e2, _ := back.Epsilon(1e-5)
	if e1 != e2 || back.Count() != comp.Count() {
		t.Errorf("decoded composition: epsilon %v count %d, want %v %d", e2, back.Count(), e1, comp.Count())
	}
	for name, bad := range map[string][]byte{
		"magic":     []byte("garbage that is long enough to parse"),
		"truncated": cache[:len(cache)-1],
		"flag":      append(append([]byte(nil), cache[:len(rigCacheMagic)+16]...), 7),
	} {
		var c Composition
		if err := c.UnmarshalBinary(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Decoding a composition never panics.
func FuzzCompositionUnmarshal(f *testing.F) {
	c1, _ := (Composition{}).Add(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 1})
	c2, _ := c1.Add(mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 2})
	b1, _ := c1.MarshalBinary()
	b2, _ := c2.MarshalBinary()
	f.Add(b1)
	f.Add(b2)
	f.Add([]byte(rigCacheMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Composition
		if err := c.UnmarshalBinary(data); err != nil {
			return
		}
		if _, err := c.Delta(1); err != nil {
			return
		}
		if _, err := c.Add(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.1}); err != nil {
			t.Fatal(err)
		}
	})
}

// The calibration leaves the PLD of the sigma it returns in the memo, and
// it is the PLD the accountant would compute for that entry: pricing the
// entry afterwards gives the same epsilon as with an empty memo.
func TestCalibrationMemoisesItsPLD(t *testing.T) {
	q, steps := 0.004, 700
	sigma, err := CalibrateSubsampledSigma(q, steps, 1.5, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: sigma, Steps: steps}
	memoised, _ := rigMemo.Get(rigEntryKey(m, pld.DefaultInterval))
	if memoised == nil {
		t.Fatal("the calibration left no PLD in the memo")
	}
	viaMemo, err := Price(m, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	rigMemo.Clear()
	resetRigMemos()
	fresh, err := Price(m, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if viaMemo != fresh || !(fresh <= 1.5) {
		t.Errorf("epsilon %v from the calibration's PLD, %v computed afresh (target 1.5)", viaMemo, fresh)
	}
}
