package accountant

import (
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// The bracketed search (seeded from the tv = 0 epsilon) returns what the
// blind search of the minimum and smallest root returns, never less: its
// epsilon is certified (h <= 0 there) and no point a little below it is.
func TestCertifiedEpsilonBracketAgreesWithSearch(t *testing.T) {
	gi := mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{{Kind: mechanism.KindGaussianInf, Mu: 0.02, Delta: 1e-10}, {Kind: mechanism.KindGaussian, Mu: 0.02}}}
	for _, tc := range []struct {
		name  string
		m     mechanism.Mechanism
		n     int // entries
		delta float64
	}{
		{"empty", mechanism.Mechanism{}, 0, 1e-5},
		{"gaussian", mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.5}, 3, 1e-5},
		{"laplace", mechanism.Mechanism{Kind: mechanism.KindLaplace, Epsilon: 0.05}, 40, 1e-6},
		{"gaussian_inf", gi, 100, 1e-5},
		{"gaussian_inf small delta", gi, 10, 1e-8},
		{"subsampled", mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 100}, 1, 1e-5},
	} {
		var comp Composition
		for i := 0; i < tc.n; i++ {
			var err error
			if comp, err = comp.Add(tc.m); err != nil {
				t.Fatal(err)
			}
		}
		comp, err := comp.folded()
		if err != nil {
			t.Fatal(err)
		}
		for _, frac := range []float64{1e-9, 1e-6, 1e-3, 0.05, 0.3, 0.499, 0.6} {
			tv := frac * tc.delta
			want, err := certifiedEpsilonSearch(comp, tc.delta, tv)
			if err != nil {
				t.Fatal(err)
			}
			got, err := certifiedEpsilonBracket(comp, tc.delta, tv)
			if err != nil {
				t.Fatalf("%s tv %g: %v", tc.name, tv, err)
			}
			hv := func(eps float64) float64 {
				d, err := comp.Delta(eps)
				if err != nil {
					t.Fatal(err)
				}
				return d + (1+math.Exp(eps))*tv*(1+4*rigULP) - tc.delta
			}
			switch {
			case math.IsInf(want, 1) || math.IsInf(got, 1):
				if math.IsInf(want, 1) != math.IsInf(got, 1) {
					t.Errorf("%s tv %g: bracket %v, search %v", tc.name, tv, got, want)
				}
			case got < want-2e-12*(1+want) || got > want+1e-9*(1+want):
				t.Errorf("%s tv %g: bracket %.17g, search %.17g", tc.name, tv, got, want)
			case hv(got) > 0:
				t.Errorf("%s tv %g: bracket %.17g is not certified: h = %g", tc.name, tv, got, hv(got))
			case got > 1e-9 && hv(got-1e-9*(1+got)) <= 0:
				t.Errorf("%s tv %g: bracket %.17g is not the smallest root: h(%.17g) <= 0", tc.name, tv, got, got-1e-9*(1+got))
			}
		}
	}
}

func TestCertifiedEpsilon(t *testing.T) {
	comp, err := (Composition{}).Add(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	e0, _ := certifiedEpsilon(comp, 1e-5, 0)
	if want, _ := Epsilon(1, 1e-5); math.Abs(e0/want-1) > 1e-12 {
		t.Errorf("tv = 0: %v, want %v", e0, want)
	}
	for _, tv := range []float64{1e-12, 1e-10, 1e-8} {
		e, err := certifiedEpsilon(comp, 1e-5, tv)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := Delta(1, e)
		if got := d + (1+math.Exp(e))*tv; !(e > e0) || got > 1e-5*(1+1e-9) || got < 1e-5*(1-1e-6) {
			t.Errorf("tv %g: epsilon %v, delta(eps) + (1+e^eps) tv = %v, want 1e-5 just reached", tv, e, got)
		}
	}
	if e, _ := certifiedEpsilon(comp, 1e-5, 1e-5); !math.IsInf(e, 1) {
		t.Errorf("a sampler error of all of delta: %v, want +Inf", e)
	}
}
