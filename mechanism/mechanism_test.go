package mechanism

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ws, sha := EncodeGridWeights([]uint64{1 << 62, 1 << 62})
	for _, tc := range []struct {
		m    Mechanism
		want string // "" = valid
	}{
		{Mechanism{Kind: KindGaussian, Mu: 0.5}, ""},
		{Mechanism{Kind: KindGaussian, Sensitivity: 1, Sigma: 2, Steps: 3}, ""},
		{Mechanism{Kind: KindGaussian}, "give mu"},
		{Mechanism{Kind: KindGaussian, Mu: math.Inf(1)}, "positive and finite"},
		{Mechanism{Kind: KindSubsampledGaussian, Q: 0.1, Sigma: 1, Steps: 10}, ""},
		{Mechanism{Kind: KindSubsampledGaussian, Q: 1.5, Sigma: 1, Steps: 10}, "q must lie"},
		{Mechanism{Kind: KindSubsampledGaussian, Q: 0.1, Sigma: 1}, "steps"},
		{Mechanism{Kind: KindLaplace, Epsilon: 0.1}, ""},
		{Mechanism{Kind: KindLaplace}, "epsilon"},
		{Mechanism{Kind: KindExternal, Mu: 1}, ""},
		{Mechanism{Kind: KindGaussianInf, Mu: 1, Delta: 1e-6}, ""},
		{Mechanism{Kind: KindGaussianInf, Mu: 1, Delta: 1e-6, Neighbours: ReplaceOne}, "add_remove"},
		{Mechanism{Kind: KindTruncatedLaplace, Sensitivity: 1, Sigma: 1, Support: 10}, ""},
		{Mechanism{Kind: KindTruncatedLaplace, Sensitivity: 2, Sigma: 1, Support: 1}, "exceeds"},
		{Mechanism{Kind: KindOptNoise, Weights: ws, WeightsSHA256: sha, Shifts: 1}, ""},
		{Mechanism{Kind: KindOptNoise, Weights: ws, WeightsSHA256: sha, Shifts: MaxGridShifts + 1}, "shifts"},
		{Mechanism{Kind: KindComposite, Parts: []Mechanism{{Kind: KindGaussian, Mu: 1}}}, ""},
		{Mechanism{Kind: KindComposite}, "at least one"},
		{Mechanism{Kind: KindComposite, Parts: []Mechanism{{Kind: KindComposite}}}, "itself composite"},
		{Mechanism{Kind: KindComposite, Parts: []Mechanism{{Kind: KindGaussian, Mu: 1}, {Kind: KindGaussian, Mu: 1, Neighbours: ReplaceOne}}}, "share one"},
		{Mechanism{Kind: KindGaussian, Mu: 1, Neighbours: "sideways"}, "unknown neighbours"},
		{Mechanism{}, "missing"},
		{Mechanism{Kind: "magic"}, "unknown mechanism"},
	} {
		err := tc.m.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.m, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v, want an error containing %q", tc.m, err, tc.want)
		}
	}
}

// GDPMu against closed forms: exact for Gaussians, the central-limit value
// for a subsampled Gaussian, +Inf for Laplace.
func TestGDPMu(t *testing.T) {
	for _, tc := range []struct {
		m    Mechanism
		want float64
	}{
		{Mechanism{Kind: KindGaussian, Sensitivity: 2, Sigma: 4, Steps: 4}, 1},
		{Mechanism{Kind: KindExternal, Mu: 0.3}, 0.3},
		{Mechanism{Kind: KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 100}, 0.1 * math.Sqrt(math.E-1)},
		{Mechanism{Kind: KindLaplace, Epsilon: 1}, math.Inf(1)},
		{Mechanism{Kind: KindComposite, Parts: []Mechanism{{Kind: KindGaussian, Mu: 0.6}, {Kind: KindGaussian, Mu: 0.8}}}, 1},
	} {
		if got := tc.m.GDPMu(); math.Abs(got-tc.want) > 1e-12 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
			t.Errorf("%+v: GDPMu = %v, want %v", tc.m, got, tc.want)
		}
	}
	if got := ComposeMu(0.6, 0.8); math.Abs(got-1) > 1e-15 {
		t.Errorf("ComposeMu(0.6, 0.8) = %v", got)
	}
}

// FuzzParse: whatever Parse accepts is valid and survives its own JSON form.
func FuzzParse(f *testing.F) {
	f.Add(`{"mechanism":"gaussian","mu":1}`)
	f.Add(`{"mechanism":"composite","parts":[{"mechanism":"laplace","epsilon":1}]}`)
	f.Add(`{"mechanism":"subsampled_gaussian","q":0.1,"sigma":1,"steps":3,"neighbours":"replace_one"}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse([]byte(s))
		if err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Parse(b)
		if err != nil {
			t.Fatalf("%s re-parses with %v", b, err)
		}
		b2, _ := json.Marshal(m2)
		if string(b) != string(b2) {
			t.Fatalf("%s became %s", b, b2)
		}
	})
}
