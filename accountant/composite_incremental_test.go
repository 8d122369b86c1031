package accountant

import "testing"

// TestCompositeExtendsCheckedComposition charges a composite entry after a
// check this process computed, the path on which a budget check extends the
// previous composition by one entry: every part must be composed (the merge
// of grouped composition and composite entries once failed here with "no PLD
// for this kind").
func TestCompositeExtendsCheckedComposition(t *testing.T) {
	sub := Mechanism{Kind: KindSubsampledGaussian, Q: 0.01, Sigma: 0.9, Steps: 50}
	comp, err := Composite(Mechanism{Kind: KindGaussian, Mu: 0.05}, Mechanism{Kind: KindSubsampledGaussian, Q: 0.02, Sigma: 1.1, Steps: 20})
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
	want, err := RigorousEpsilon([]Mechanism{sub, comp.Parts[0], comp.Parts[1]}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if !(got >= want*(1-1e-3) && got <= want*(1+1e-3)) {
		t.Errorf("epsilon after a composite: %v, the parts composed separately give %v", got, want)
	}
}
