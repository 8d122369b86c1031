package accountant

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"sort"
	"testing"

	"github.com/dpsql/dpsql/accountant/pld"
	"github.com/dpsql/dpsql/mechanism"
)

// Small realistic releases for a scope with a tiny delta: a Gaussian query at
// mu = 0.002 and a Poisson-subsampled Gaussian (q = 0.001, noise multiplier
// 2, T = 10 steps), alternating.
var (
	tinyGauss = mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.002}
	tinySub   = mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.001, Sigma: 2, Steps: 10}
)

func tinyEntry(i int) mechanism.Mechanism {
	if i%2 == 0 {
		return tinyGauss
	}
	return tinySub
}

// TestRigorousTenThousandChargesTinyDelta: a delta = 1e-9 scope accepts
// 10,000 alternating charges (2,500 under -short). When every charge added a
// convolution's round-off bound (about 5.6e-12 each) epsilon failed with
// ErrRoundoff (bound > delta/10) after about 25 charges; the scope's
// composition now takes narrow entries by direct convolution, whose round-off
// is relative to each bin. The cache's figure equals the list's (the same
// rule, entry by entry; the list is recomposed afresh at 30 and 2,500
// charges, each recomposition costing as many convolutions as charges), the
// round-off stays far below delta/10, and epsilon lies above the exact GDP
// figure of the Gaussian part alone.
func TestRigorousTenThousandChargesTinyDelta(t *testing.T) {
	const delta = 1e-9
	n := 10000
	if testing.Short() {
		n = 2500
	}
	var cache []byte
	var err error
	ms := make([]mechanism.Mechanism, 0, n)
	var prev float64
	for i := range n {
		m := tinyEntry(i)
		ms = append(ms, m)
		if cache, err = composeInto(cache, m); err != nil {
			t.Fatalf("charge %d: %v", i+1, err)
		}
		if i+1 != 30 && (i+1)%2500 != 0 {
			continue
		}
		got, err := cachedEpsilon(cache, delta)
		if err != nil {
			t.Fatalf("after %d charges: %v", i+1, err)
		}
		if i+1 <= 2500 {
			resetRigMemos() // the list is composed afresh, not read from the memo
			want, err := RigorousEpsilon(ms, delta)
			if err != nil || got != want {
				t.Fatalf("after %d charges: cache %v, list %v (%v)", i+1, got, want, err)
			}
		}
		c, _ := decodeRigCache(cache)
		p, err := c.figure()
		if err != nil {
			t.Fatal(err)
		}
		gdp, _ := Epsilon(math.Sqrt(float64((i+2)/2))*tinyGauss.Mu, delta)
		t.Logf("%5d charges: epsilon %.5f at delta %g, round-off bound %.3g, +inf mass %.3g", i+1, got, delta, p.RoundoffBound(), p.InfMass())
		if r := p.RoundoffBound(); !(r < delta/100) {
			t.Errorf("after %d charges: round-off bound %g, want < delta/100", i+1, r)
		}
		if !(got > gdp) || !(got > prev) || !(got < 2) {
			t.Errorf("after %d charges: epsilon %v (Gaussian part alone %v, before %v)", i+1, got, gdp, prev)
		}
		prev = got
	}
	if cnt, _ := cachedCount(cache); cnt != int64(n) {
		t.Errorf("count %d, want %d", cnt, n)
	}
}

// resetRigMemos forgets every memoised composition (not the single
// mechanisms' PLDs).
func resetRigMemos() {
	rigAdds.Clear()
	rigFigures.Clear()
}

// TestRigorousIncrementalWithinCap: a budget check extends the previous
// check's composition by one convolution; over 60 mixed entries its
// round-off bound stays within a thousandth of delta = 1e-5, and its epsilon
// agrees with an independent computation of the same entries (identical
// entries grouped and self-composed, the groups convolved, the Gaussian part
// merged: groupedEpsilon) to the discretisation error.
func TestRigorousIncrementalWithinCap(t *testing.T) {
	resetRigMemos()
	var cache []byte
	var err error
	var ms []mechanism.Mechanism
	for i := range 60 {
		m := rigMixedEntry(i)
		ms = append(ms, m)
		if cache, err = composeInto(cache, m); err != nil {
			t.Fatal(err)
		}
		if _, err := cachedEpsilon(cache, 1e-5); err != nil {
			t.Fatalf("check %d: %v", i+1, err)
		}
	}
	c, _ := decodeRigCache(cache)
	inc, err := c.figure()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cachedEpsilon(cache, 1e-5)
	want, grouped := groupedEpsilon(t, ms, 1e-5)
	t.Logf("incremental: epsilon %.6f, round-off %.3g; grouped: %.6f, round-off %.3g", got, inc.RoundoffBound(), want, grouped.RoundoffBound())
	if !(inc.RoundoffBound() <= 1e-8) {
		t.Errorf("round-off: incremental %g (cap 1e-8), grouped %g", inc.RoundoffBound(), grouped.RoundoffBound())
	}
	if math.Abs(got/want-1) > 1e-4 {
		t.Errorf("incremental epsilon %v, grouped %v", got, want)
	}
}

// groupedEpsilon composes ms independently of the accountant's rule, as the
// accountant once did: identical entries grouped (steps summed) and each
// group self-composed once, the groups convolved, the exactly Gaussian
// entries merged into one Gaussian composed last; all on the default grid
// without a bin cap.
func groupedEpsilon(t testing.TB, ms []mechanism.Mechanism, delta float64) (float64, *pld.PLD) {
	t.Helper()
	type group struct {
		m     mechanism.Mechanism
		steps int
	}
	var keys []string
	groups := map[string]*group{}
	var sq float64
	for _, e := range ms {
		for _, m := range e.Components() {
			if m.IsGaussian() {
				sq += m.GDPMu() * m.GDPMu()
				continue
			}
			one := m
			one.Steps = 1
			b, _ := json.Marshal(one)
			k := string(b)
			if groups[k] == nil {
				groups[k] = &group{m: one}
				keys = append(keys, k)
			}
			groups[k].steps += int(m.StepsOrOne())
		}
	}
	sort.Strings(keys)
	var p *pld.PLD
	for _, k := range keys {
		g := groups[k]
		m := g.m
		m.Steps = g.steps
		e, err := rigMechanismPLD(m, pld.DefaultInterval)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			p = e
		} else if p, err = p.Compose(e); err != nil {
			t.Fatal(err)
		}
	}
	if sq > 0 {
		g, err := pld.GaussianMu(math.Sqrt(sq))
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			p = g
		} else if p, err = p.Compose(g); err != nil {
			t.Fatal(err)
		}
	}
	e, err := p.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

// TestRigorousCacheDecode: malformed encodings are refused.
func TestRigorousCacheDecode(t *testing.T) {
	good, err := composeInto(nil, tinySub)
	if err != nil {
		t.Fatal(err)
	}
	if good, err = composeInto(good, mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.1}); err != nil {
		t.Fatal(err)
	}
	gauss, err := composeInto(nil, tinyGauss)
	if err != nil {
		t.Fatal(err)
	}
	mut := func(b []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	hdr := len(rigCacheMagic) + 16
	for name, bad := range map[string][]byte{
		"trailing":       append(append([]byte(nil), good...), 0),
		"truncated":      good[:len(good)-3],
		"no pld":         good[:hdr+1],
		"flag":           mut(good, func(b []byte) []byte { b[hdr] = 2; return b }),
		"gaussian trail": append(append([]byte(nil), gauss...), 1),
		"negative count": mut(good, func(b []byte) []byte { b[len(rigCacheMagic)+7] = 0x80; return b }),
		"mu NaN": mut(gauss, func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[len(rigCacheMagic)+8:], math.Float64bits(math.NaN()))
			return b
		}),
		"old format": mut(good, func(b []byte) []byte { b[len(rigCacheMagic)-1] = 2; return b }),
		"pld mass": mut(good, func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[len(b)-8:], math.Float64bits(-1))
			return b
		}),
	} {
		if _, err := cachedEpsilon(bad, 1e-5); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// BenchmarkBudgetCheck10000 is one budget check of a delta = 1e-9 scope that
// holds 10,000 alternating entries: extend the cache by the next entry and
// read epsilon. Each iteration's entry is new to the memos, as in a ledger
// (a Gaussian changes the merged mu, a subsampled release the group's steps).
func BenchmarkBudgetCheck10000(b *testing.B) {
	var cache []byte
	var err error
	for i := range 10000 {
		if cache, err = composeInto(cache, tinyEntry(i)); err != nil {
			b.Fatal(err)
		}
	}
	// The previous charge's check computed the scope's composition.
	if _, err := cachedEpsilon(cache, 1e-9); err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"gaussian", "subsampled"} {
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				tinyFresh++
				i := tinyFresh
				m := tinyGauss
				m.Mu += float64(i) * 1e-9
				if kind == "subsampled" {
					m = tinySub
					m.Steps += i
				}
				c, err := composeInto(cache, m)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cachedEpsilon(c, 1e-9); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var tinyFresh int // never reused across benchmark runs
