package avgmix

import (
	"errors"
	"reflect"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Plan.Quote: the quote charges the plan's mechanism (or the composite with a
// prior part), is priced once by the pricer it is given, at the scope's
// delta, and its params record carries the plan's figures beside the
// caller's.
func TestPlanQuote(t *testing.T) {
	plan, err := NewPlan(release.NewNoise(), 1000, 4, 3, Params{T: 200, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	var priced []mechanism.Mechanism
	price := func(m mechanism.Mechanism, delta float64) (float64, error) {
		if delta != 1e-6 {
			t.Errorf("priced at delta %v, want the scope's 1e-6", delta)
		}
		priced = append(priced, m)
		return 2.5, nil
	}
	prior := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05}
	for _, tc := range []struct {
		prior  *mechanism.Mechanism
		kind   string
		coords int
	}{
		{nil, mechanism.KindSubsampledGaussian, 200 * (4 + 3)},
		{&prior, mechanism.KindComposite, 200*(4+3) + 1},
	} {
		priced = nil
		q, err := plan.Quote(tc.prior, mechanism.Avgmix{Into: "out", N: 1000, NSource: mechanism.NAsserted}, 1e-6, price)
		if err != nil {
			t.Fatal(err)
		}
		if len(priced) != 1 || q.Epsilon != 2.5 || q.Delta != 1e-6 || q.Mechanism.Kind != tc.kind {
			t.Errorf("quote %+v priced %d times", q, len(priced))
		}
		if q.NoiseTV != release.NoiseTVOf(tc.coords) {
			t.Errorf("noise_tv %v, want that of %d coordinates", q.NoiseTV, tc.coords)
		}
		rec, ok := q.Params.(mechanism.Avgmix)
		if !ok || rec.Into != "out" || rec.T != 200 || rec.D != 4 || rec.K != 3 || rec.M != plan.M ||
			rec.SigmaApplied != plan.Sigma || rec.MuCLT != q.Mechanism.GDPMu() {
			t.Errorf("params record %+v", q.Params)
		}
		parts := q.Mechanism.Components()
		if last := parts[len(parts)-1]; !reflect.DeepEqual(last, plan.Mechanism) {
			t.Errorf("charged %+v, the plan's mechanism is %+v", last, plan.Mechanism)
		}
	}
	// A pricer's failure is the quote's.
	bad := errors.New("no price")
	if _, err := plan.Quote(nil, mechanism.Avgmix{}, 1e-6, func(mechanism.Mechanism, float64) (float64, error) { return 0, bad }); !errors.Is(err, bad) {
		t.Errorf("failing pricer: %v", err)
	}
}
