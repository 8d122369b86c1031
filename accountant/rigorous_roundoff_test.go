package accountant

import (
	"math"
	"testing"

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
// 10,000 alternating charges. Before groups were kept, every charge added a
// convolution's round-off bound (about 5.6e-12 each) and epsilon failed with
// ErrRoundoff (bound > delta/10) after about 25 charges. The cache's figure
// equals the list's, the round-off stays far below delta/10, and epsilon
// lies above the exact GDP figure of the Gaussian part alone.
func TestRigorousTenThousandChargesTinyDelta(t *testing.T) {
	const n, delta = 10000, 1e-9
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
		resetRigMemos() // the list is composed afresh, not read from the memo
		want, err := RigorousEpsilon(ms, delta)
		if err != nil || got != want {
			t.Fatalf("after %d charges: cache %v, list %v (%v)", i+1, got, want, err)
		}
		c, _ := decodeRigCache(cache)
		p, _, err := c.full(rigRoundCapOfDelta * delta)
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
	if cnt, _ := cachedCount(cache); cnt != n {
		t.Errorf("count %d, want %d", cnt, n)
	}
}

// resetRigMemos forgets every memoised composition (not the single
// mechanisms' PLDs).
func resetRigMemos() {
	rigFull.Clear()
	rigSteps.Clear()
}

// TestRigorousIncrementalWithinCap: at delta = 1e-5 a budget check extends the
// previous check's composition by one convolution; its round-off bound stays
// within a thousandth of delta, and its epsilon agrees with the grouped
// computation of the same entries to the discretisation error. At delta =
// 1e-9 the cap (1e-12) is below one convolution's bound, so every check
// composes the groups afresh.
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
	inc, _, err := c.full(rigRoundCapOfDelta * 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cachedEpsilon(cache, 1e-5)
	resetRigMemos()
	grouped, _, err := c.full(0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := RigorousEpsilon(ms, 1e-5)
	t.Logf("incremental: epsilon %.6f, round-off %.3g; grouped: %.6f, round-off %.3g", got, inc.RoundoffBound(), want, grouped.RoundoffBound())
	if !(inc.RoundoffBound() > grouped.RoundoffBound()) || !(inc.RoundoffBound() <= 1e-8) {
		t.Errorf("round-off: incremental %g (cap 1e-8), grouped %g: the incremental path was not taken or exceeded its cap", inc.RoundoffBound(), grouped.RoundoffBound())
	}
	if math.Abs(got/want-1) > 1e-4 {
		t.Errorf("incremental epsilon %v, grouped %v", got, want)
	}
}

// TestRigorousLegacyCache: a format 1 cache (a composed PLD) is still read and
// extended.
func TestRigorousLegacyCache(t *testing.T) {
	p, err := rigMechanismPLD(tinySub)
	if err != nil {
		t.Fatal(err)
	}
	old, err := (&rigComposition{count: 1, legacy: p}).encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(old[:len(rigCacheMagicV1)]) != rigCacheMagicV1 {
		t.Fatalf("legacy cache written with magic %q", old[:len(rigCacheMagicV1)])
	}
	c, err := composeInto(old, tinyGauss)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cachedEpsilon(c, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := RigorousEpsilon([]mechanism.Mechanism{tinySub, tinyGauss}, 1e-5)
	if math.Abs(got/want-1) > 1e-4 {
		t.Errorf("legacy cache: epsilon %v, list %v", got, want)
	}
	if n, _ := cachedCount(c); n != 2 {
		t.Errorf("legacy cache count %d", n)
	}
}

// TestRigorousCacheDecode: malformed format 2 caches are refused.
func TestRigorousCacheDecode(t *testing.T) {
	good, err := composeInto(nil, tinySub)
	if err != nil {
		t.Fatal(err)
	}
	if good, err = composeInto(good, mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.1}); err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	hdr := len(rigCacheMagic) + 17
	for name, bad := range map[string][]byte{
		"trailing":    append(append([]byte(nil), good...), 0),
		"truncated":   good[:len(good)-3],
		"no groups":   good[:hdr+2],
		"group count": mut(func(b []byte) []byte { b[hdr] = 200; return b }),
		"kind":        mut(func(b []byte) []byte { b[hdr+5] = 'X'; return b }),
		"steps zero": mut(func(b []byte) []byte {
			for i := len(b) - 8; i < len(b); i++ {
				b[i] = 0
			}
			return b
		}),
		"order": func() []byte {
			c, _ := decodeRigCache(good)
			c.groups[0], c.groups[1] = c.groups[1], c.groups[0]
			b, _ := c.encode()
			return b
		}(),
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
