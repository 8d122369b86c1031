package accountant

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// A composite entry is accounted exactly like its parts charged one after
// another: by the list accountant, by the cached one, and in GDP.
func TestCompositeEqualsSeparateParts(t *testing.T) {
	g := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05}
	sg := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.8, Steps: 200}
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.1}
	cases := []struct {
		name   string
		before []mechanism.Mechanism // entries charged before
		parts  []mechanism.Mechanism
	}{
		{"gaussian then subsampled", nil, []mechanism.Mechanism{g, sg}},
		{"after other entries", []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: 0.3}, lap}, []mechanism.Mechanism{g, sg}},
		{"gaussians only", nil, []mechanism.Mechanism{g, {Kind: mechanism.KindGaussian, Sensitivity: 2, Sigma: 5}}},
		{"three kinds", []mechanism.Mechanism{sg}, []mechanism.Mechanism{lap, g, sg}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			comp, err := mechanism.Composite(c.parts...)
			if err != nil {
				t.Fatal(err)
			}
			sep := append(append([]mechanism.Mechanism(nil), c.before...), c.parts...)
			one := append(append([]mechanism.Mechanism(nil), c.before...), comp)
			for _, delta := range []float64{1e-5, 1e-3} {
				want, err := RigorousEpsilon(sep, delta)
				if err != nil {
					t.Fatal(err)
				}
				got, err := RigorousEpsilon(one, delta)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("delta %g: composite epsilon %v, separate parts %v", delta, got, want)
				}
			}
			// Cached composition, entry by entry.
			var cs, co []byte
			for _, m := range sep {
				if cs, err = composeInto(cs, m); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range one {
				if co, err = composeInto(co, m); err != nil {
					t.Fatal(err)
				}
			}
			es, _ := cachedEpsilon(cs, 1e-5)
			eo, err := cachedEpsilon(co, 1e-5)
			if err != nil || math.Abs(es-eo) > 1e-9*es {
				t.Errorf("cached: composite %v, separate %v (%v)", eo, es, err)
			}
			if n, _ := cachedCount(co); n != int64(len(one)) {
				t.Errorf("cached count %d, want %d entries (a composite is one)", n, len(one))
			}
			var sq float64
			for _, p := range c.parts {
				sq += p.GDPMu() * p.GDPMu()
			}
			if mu := comp.GDPMu(); math.Abs(mu-math.Sqrt(sq)) > 1e-15 && !(math.IsInf(mu, 1) && math.IsInf(sq, 1)) {
				t.Errorf("GDPMu %v, want sqrt of the parts' squares %v", mu, math.Sqrt(sq))
			}
		})
	}
}

func TestCompositeValidate(t *testing.T) {
	g := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5}
	inner, _ := mechanism.Composite(g)
	cases := []struct {
		name string
		m    mechanism.Mechanism
		want string // "" = valid
	}{
		{"ok", mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{g, g}}, ""},
		{"empty", mechanism.Mechanism{Kind: mechanism.KindComposite}, "at least one"},
		{"nested", mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{g, inner}}, "itself composite"},
		{"bad part", mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{{Kind: mechanism.KindGaussian, Mu: -1}}}, "part 1"},
		{"own fields", mechanism.Mechanism{Kind: mechanism.KindComposite, Mu: 1, Parts: []mechanism.Mechanism{g}}, "only parts"},
		{"parts elsewhere", mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 1, Parts: []mechanism.Mechanism{g}}, "composite entries only"},
		{"mixed neighbours", mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{g, {Kind: mechanism.KindGaussian, Mu: 1, Neighbours: mechanism.ReplaceOne}}}, "one neighbour relation"},
		{"neighbours disagree", mechanism.Mechanism{Kind: mechanism.KindComposite, Neighbours: mechanism.ReplaceOne, Parts: []mechanism.Mechanism{g}}, "one neighbour relation"},
	}
	for _, c := range cases {
		err := c.m.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	// Laplace parts have no finite mu: nor has the composite.
	lap, _ := mechanism.Composite(g, mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 1})
	if !math.IsInf(lap.GDPMu(), 1) {
		t.Errorf("GDPMu with a Laplace part = %v, want +Inf", lap.GDPMu())
	}
	// The JSON form round-trips through ParseMechanism (the ledger's path).
	b, _ := json.Marshal(inner)
	if m, err := mechanism.Parse(b); err != nil || len(m.Parts) != 1 || m.Parts[0].Mu != 0.5 {
		t.Errorf("round trip of %s: %+v, %v", b, m, err)
	}
}

// The combined calibration meets the target on the composition, tightly.
func TestCalibrateSubsampledSigmaAfter(t *testing.T) {
	const delta = 1e-5
	target, _ := Epsilon(1, delta)
	prior := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05}
	for _, c := range []struct {
		q     float64
		steps int
	}{{0.01, 1000}, {0.2, 50}} {
		sigma, err := CalibrateSubsampledSigmaAfter(prior, c.q, c.steps, target, delta)
		if err != nil {
			t.Fatal(err)
		}
		sg := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: c.q, Sigma: sigma, Steps: c.steps}
		tot, err := RigorousEpsilon([]mechanism.Mechanism{prior, sg}, delta)
		if err != nil || tot > target || tot < target*0.995 {
			t.Errorf("q %v: combined epsilon %v, target %v (%v)", c.q, tot, target, err)
		}
		// It needs more noise than the release alone at the same target.
		alone, _ := CalibrateSubsampledSigma(c.q, c.steps, target, delta)
		if !(sigma > alone) {
			t.Errorf("q %v: sigma %v not above the release-alone sigma %v", c.q, sigma, alone)
		}
	}
	if _, err := CalibrateSubsampledSigmaAfter(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 5}, 0.01, 10, target, delta); err == nil {
		t.Error("a prior above the target was accepted")
	}
}

// BenchmarkCalibrateSubsampledSigmaAfter: dp_avgmix's noisy-count calibration
// at the Fashion-MNIST shape (q = 124/60000, T = 60000, mu = 1, delta = 1e-5),
// beside the release-alone calibration it replaces.
func BenchmarkCalibrateSubsampledSigmaAfter(b *testing.B) {
	const q, steps, delta = 124.0 / 60000, 60000, 1e-5
	eps, _ := Epsilon(1, delta)
	b.Run("with count", func(b *testing.B) {
		for b.Loop() {
			if _, err := CalibrateSubsampledSigmaAfter(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05}, q, steps, eps, delta); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("alone", func(b *testing.B) {
		for b.Loop() {
			if _, err := CalibrateSubsampledSigma(q, steps, eps, delta); err != nil {
				b.Fatal(err)
			}
		}
	})
}
