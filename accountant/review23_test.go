package accountant

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// review23: random mixed histories at extreme budgets (mu 1e-6 to 1e6,
// delta 1e-5 and 1e-9, samplers' error from none to the cap's). After each
// history the recorded room is one Decide accepts, never above Decide's
// limit (a search with Decide to 1e-7), and a new process recomputes it
// bit for bit from the encoding.
func TestReview23RoomRandomHistories(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	review23RandomHistories(t, 23, 3, 1)
}

// review23RandomHistories checks reps random histories per budget, each in
// stages states: the history, then (stages 2 and 3) the scope filled to
// 0.999 of its room, then by exactly its room.
func review23RandomHistories(t *testing.T, seed uint64, reps, stages int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	randMech := func(scale float64) (mechanism.Mechanism, float64) {
		f := math.Exp(rng.Float64()*4 - 3) // 0.05..1 of scale
		x := scale * f
		switch rng.IntN(7) {
		case 0:
			return g(x), release.NoiseTVOf(1 + rng.IntN(50))
		case 1:
			return mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: x}, 0
		case 2:
			l, err := release.TruncatedLaplaceFor(1, x, 1e-9)
			if err != nil {
				return g(x), 0
			}
			return mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Epsilon: l.Epsilon, Delta: l.Delta,
				Sensitivity: l.Sensitivity, Sigma: l.Scale, Support: l.Support}, 0
		case 3:
			return mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: math.Min(0.5, 0.01+rng.Float64()*0.1),
				Sigma: math.Min(1e6, math.Max(0.6, 1/x)), Steps: 1 + rng.IntN(50)}, 0
		case 4:
			return mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{
				{Kind: mechanism.KindGaussianInf, Mu: x / 2, Delta: 1e-10},
				g(x / 2), g(x / 3),
			}}, release.NoiseTVOf(200)
		case 5:
			return mechanism.Mechanism{Kind: mechanism.KindLaplaceInf, Sensitivity: 1, Epsilon: x, Delta: 1e-12}, 0
		default:
			return g(x * 3), release.NoiseTVOf(1)
		}
	}
	type budgetCase struct {
		mu, delta, scale float64
		n                int
	}
	budgets := []budgetCase{
		{1, 1e-5, 0.1, 12},
		{1e-6, 1e-5, 1e-7, 6},
		{1e6, 1e-5, 3, 8}, // the samplers' cap decides (epsilon about 68)
		{2, 1e-9, 0.3, 10},
		{20, 1e-5, 1, 10},
		{0.05, 1e-5, 0.01, 10},
	}
	trials := 0
	for bi, bc := range budgets {
		for rep := range reps {
			b := Budget{Scope: "s", Mu: bc.mu, Delta: bc.delta}
			var s Spend
			var hist []mechanism.Mechanism
			var tvs []float64
			nonG := false
			for range bc.n {
				m, tv := randMech(bc.scale)
				c, err := Decide(b, s, m, tv)
				if err != nil {
					continue
				}
				s = s.With(c)
				hist = append(hist, m)
				tvs = append(tvs, tv)
				nonG = nonG || !m.IsGaussian()
				if enc, err := s.Comp.MarshalBinary(); err != nil {
					t.Fatal(err)
				} else if err := new(Composition).UnmarshalBinary(enc); err != nil {
					t.Errorf("budget %v: after %+v the encoding does not decode: %v", b, hist, err)
				}
			}
			if !nonG {
				continue
			}
			tv := []float64{0, 0x1p-125, release.NoiseTVOf(1), release.NoiseTVOf(1000)}[rng.IntN(4)]
			for stage := range stages {
				trials++
				room := review23Check(t, b, s, tv, bi, rep, stage)
				if !(room > 0) {
					break
				}
				// Fill: to nearly full (room (1 - 1e-3)), then exactly the room.
				fill := room
				if stage == 0 {
					fill = room * (1 - 1e-3)
				}
				c, err := Decide(b, s, g(fill), tv)
				if err != nil {
					t.Errorf("budget %d rep %d stage %d: filling with %v refused: %v", bi, rep, stage, fill, err)
					break
				}
				s = s.With(c)
				hist = append(hist, g(fill))
				if testing.Verbose() {
					t.Logf("budget %v rep %d stage %d: filled %v tv %v after %v tvs %v", b, rep, stage, fill, tv, hist, tvs)
				}
			}
		}
	}
	t.Logf("%d states checked", trials)
}

func review23Check(t *testing.T, b Budget, s Spend, tv float64, bi, rep, stage int) float64 {
	t.Helper()
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	room, err := Room(context.Background(), b, s, tv)
	if err != nil {
		t.Errorf("budget %v rep %d stage %d tv %v: %v (sumsq %v, nonGaussian %d, noiseTV %v)", b, rep, stage, tv, err, s.SumSq, s.NonGaussian, s.NoiseTV)
		return 0
	}
	if room > 0 {
		if _, err := Decide(b, s, g(room), tv); err != nil {
			t.Errorf("budget %v rep %d stage %d tv %v: room %.17g refused: %v", b, rep, stage, tv, room, err)
		}
	}
	hi := roomUpper(b, s, tv)
	if hi > roomNegligible*b.Mu {
		exact, err := roomExact(context.Background(), b, s, tv, 0, hi, 1e-7)
		if err != nil {
			t.Fatal(err)
		}
		if room > exact {
			t.Errorf("budget %v rep %d stage %d tv %v: room %.9g, Decide's limit %.9g (relative %.3g)", b, rep, stage, tv, room, exact, room/exact-1)
		}
	}
	if again := freshRoom(t, b, s, tv); math.Float64bits(again) != math.Float64bits(room) {
		t.Errorf("budget %v rep %d stage %d tv %v: room %.17g, a new process %.17g", b, rep, stage, tv, room, again)
	}
	return room
}

// review23: on a scope of mu 1e6 (the samplers' cap decides), after a
// Gaussian charge of 0.9999 of the room (Decide accepts it), Room failed
// with "pld: non-finite value in a computed distribution": its lattice
// search, with no Gaussian waiting (gsq 0), reached lattice point 1, the
// subnormal merged mu 2.7e-312, whose coarse Gaussian PLD cannot be built,
// and Ledger.Charge refused the accepted charge (ledger/review23_test.go).
// The search now starts at the lattice point of roomNegligible of the
// budget's mu (Room reports 0 below it).
func TestReview23RoomNonFinite(t *testing.T) {
	b := Budget{Scope: "s", Mu: 1e6, Delta: 1e-5}
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	comp := func(a, b, c float64) mechanism.Mechanism {
		return mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{
			{Kind: mechanism.KindGaussianInf, Mu: a, Delta: 1e-10}, g(b), g(c)}}
	}
	type e struct {
		m  mechanism.Mechanism
		tv float64
	}
	hist := []e{
		{comp(1.1285707661452111, 1.1285707661452111, 0.7523805107634741), release.NoiseTVOf(200)},
		{mechanism.Mechanism{Kind: mechanism.KindLaplaceInf, Sensitivity: 1, Epsilon: 1.691104132157499, Delta: 1e-12}, 0},
		{mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 1.0000305175781252, Sigma: 2.792205810546875, Epsilon: 0.35815400803182973, Delta: 9.999891014399137e-10, Support: 53.57615661621094}, 0},
		{g(3.5283759630839815), release.NoiseTVOf(13)},
		{comp(3.5325921580237134, 3.5325921580237134, 2.3550614386824757), release.NoiseTVOf(200)},
		{mechanism.Mechanism{Kind: mechanism.KindLaplaceInf, Sensitivity: 1, Epsilon: 4.876052958620112, Delta: 1e-12}, 0},
	}
	var s Spend
	for i, x := range hist {
		c, err := Decide(b, s, x.m, x.tv)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		s = s.With(c)
	}
	tv := 0x1p-125
	r0, err := Room(context.Background(), b, s, tv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decide(b, s, g(r0*0.9999), tv)
	if err != nil {
		t.Fatalf("room %v: 0.9999 of it refused: %v", r0, err)
	}
	if r, err := Room(context.Background(), b, s.With(c), tv); err != nil {
		t.Errorf("room %v, after a charge of 0.9999 of it: %v (%v)", r0, err, r)
	}
}

// review23: the random histories of review23_test.go, each then filled to
// 0.999 of its room and then by exactly its room: Room failed ("non-finite
// value") on some 3 of 15 such scopes of mu 20 and 1e6 before its lattice
// search started at roomNegligible of the budget's mu.
func TestReview23RoomRandomHistoriesFilled(t *testing.T) {
	review23RandomHistories(t, 1, 5, 3)
}

// review23: a subsampled Gaussian of noise multiplier 2.4e7 or more (any q)
// is built with bin masses above 2 (the build's error bounds, amplified by
// 1/(e^h - 1), inflate them: total mass 4.1 at 2.4e7, 54 at 1e8, 1.55 at
// 1e7), so the composition's encoding did not decode ("pld: invalid
// encoding: mass out of range"): a checkpoint could not be resumed from and
// Verify reported the honest file's kept composition as a mismatch
// (ledger/review23_test.go). The decoder now accepts any finite
// non-negative mass.
func TestReview23HugeSigmaEncoding(t *testing.T) {
	b := Budget{Scope: "s", Mu: 1e-6, Delta: 1e-5}
	s := spendAfter(t, b, []mechanism.Mechanism{{Kind: mechanism.KindSubsampledGaussian, Q: 0.0862945909816091, Sigma: 2.406523594634199e+07, Steps: 1}}, 0)
	enc, err := s.Comp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := new(Composition).UnmarshalBinary(enc); err != nil {
		t.Errorf("an accepted state's encoding does not decode: %v", err)
	}
}

// review23: the room does not lie within 3e-4 below Decide's limit on a
// nearly full mixed scope: after a Laplace and a Gaussian, then a Gaussian
// of 0.999 of the room, the room is 5.5% below the largest mu Decide
// accepts; after a charge of exactly that room it is 0 while a mu of 0.0149
// (1.5% of the budget's mu) is still accepted. The coarse search's
// discretisation is not relative to a small remainder (0db34fd answered the
// same); docs/ledger.md states it. The test asserts what the docs say: never
// above the limit, within 3e-4 of it or (nearly full) within 2% of the
// budget's mu below it, the figures measured here.
func TestReview23RoomNearlyFullPrecision(t *testing.T) {
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	b := Budget{Scope: "s", Mu: 1, Delta: 1e-5}
	s := spendAfter(t, b, []mechanism.Mechanism{{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.05}, g(0.1)}, 0)
	for i := range 3 {
		room, err := Room(context.Background(), b, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := roomExact(context.Background(), b, s, 0, 0, roomUpper(b, s, 0), 1e-7)
		if err != nil {
			t.Fatal(err)
		}
		if room > exact || (room < exact*(1-3e-4) && exact-room > 0.02*b.Mu) {
			t.Errorf("stage %d: room %.9g, Decide's limit %.9g (relative %.3g)", i, room, exact, room/exact-1)
		}
		fill := room * (1 - 1e-3)
		if i > 0 {
			fill = room
		}
		if fill == 0 {
			break
		}
		c, err := Decide(b, s, g(fill), 0)
		if err != nil {
			t.Fatal(err)
		}
		s = s.With(c)
	}
}
