package accountant

import (
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// TestCompositeExtendsCheckedComposition charges a composite entry after a
// check this process computed, the path on which a budget check extends the
// previous composition by one entry: every part must be composed (the merge
// of grouped composition and composite entries once failed here with "no PLD
// for this kind").
func TestCompositeExtendsCheckedComposition(t *testing.T) {
	sub := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 0.9, Steps: 50}
	comp, err := mechanism.Composite(mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05}, mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.02, Sigma: 1.1, Steps: 20})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := composeInto(nil, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cachedEpsilon(cache, 1e-5); err != nil { // this process computes the first composition
		t.Fatal(err)
	}
	if cache, err = composeInto(cache, comp); err != nil {
		t.Fatal(err)
	}
	got, err := cachedEpsilon(cache, 1e-5)
	if err != nil {
		t.Fatalf("extending by a composite: %v", err)
	}
	want, err := RigorousEpsilon([]mechanism.Mechanism{sub, comp.Parts[0], comp.Parts[1]}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if !(got >= want*(1-1e-3) && got <= want*(1+1e-3)) {
		t.Errorf("epsilon after a composite: %v, the parts composed separately give %v", got, want)
	}
}

// TestCompositeGaussianPartsMergedWhenExtending extends a composition, one
// protected-mode statement at a time (partition selection as gaussian_inf,
// three Gaussian aggregates), on the path that convolves the previous PLD
// with the new entry, where the entry's Gaussian parts are merged into one
// Gaussian. After k statements the loss is Gaussian of mu^2 = k sum mu_i^2
// with mass P = 1 - (1 - delta_s)^k at +infinity, so epsilon at delta is
// the GDP epsilon at (delta - P) / (1 - P): the PLD's figure must bound it
// from above, within its discretisation.
func TestCompositeGaussianPartsMergedWhenExtending(t *testing.T) {
	const deltaS, delta = 1e-9, 1e-5
	mus := []float64{0.25, 0.25, 0.2, 0.15}
	m, err := mechanism.Composite(mechanism.Mechanism{Kind: mechanism.KindGaussianInf, Mu: mus[0], Delta: deltaS},
		mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mus[1]}, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mus[2]}, mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mus[3]})
	if err != nil {
		t.Fatal(err)
	}
	sq := 0.0
	for _, mu := range mus {
		sq += mu * mu
	}
	var c Composition
	for k := 1; k <= 5; k++ {
		if c, err = c.Add(m); err != nil {
			t.Fatal(err)
		}
		f, err := c.folded()
		if err != nil {
			t.Fatal(err)
		}
		fp, err := f.c.figure()
		if err != nil {
			t.Fatal(err)
		}
		got, err := fp.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		p := 1 - math.Pow(1-deltaS, float64(k))
		want, err := Epsilon(math.Sqrt(float64(k)*sq), (delta-p)/(1-p))
		if err != nil {
			t.Fatal(err)
		}
		if !(got >= want*(1-1e-9) && got <= want*(1+1e-3)) {
			t.Errorf("after %d statements: epsilon %v, exactly %v", k, got, want)
		}
	}
}
