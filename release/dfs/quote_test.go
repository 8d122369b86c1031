package dfs

import (
	"math"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Params.Quote charges one replace-one Gaussian of
// sqrt((2 mu_select)^2 + mu_release^2 + mu_labels^2), priced once at the
// scope's delta, with every part recorded.
func TestParamsQuote(t *testing.T) {
	for _, labels := range []string{LabelsPrivate, LabelsPublic} {
		p := Params{M: 2, Classes: 3, MuSelect: 0.5, MuRelease: 1, C: 1, Score: ScoreT, Labels: labels}
		if labels == LabelsPrivate {
			p.EpsLabels = 1
		}
		calls := 0
		q, err := p.Quote(10, 100, mechanism.SelectTopm{Into: "sel"}, 1e-6, func(m mechanism.Mechanism, delta float64) (float64, error) {
			calls++
			return 3, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := q.Params.(mechanism.SelectTopm)
		want := math.Sqrt(4*rec.MuSelect*rec.MuSelect + rec.MuRelease*rec.MuRelease + rec.MuLabels*rec.MuLabels)
		if calls != 1 || q.Epsilon != 3 || q.Delta != 1e-6 || q.Mechanism.Kind != mechanism.KindGaussian ||
			q.Mechanism.Neighbours != mechanism.ReplaceOne || math.Abs(q.Mechanism.Mu-want) > 1e-15 {
			t.Errorf("%s: quote %+v, want mu %v priced once", labels, q, want)
		}
		if !(rec.MuSelect <= p.MuSelect*(1+1e-12)) || !(rec.MuRelease <= p.MuRelease) || (labels == LabelsPrivate) != (rec.MuLabels > 0) {
			t.Errorf("%s: parts %v %v %v", labels, rec.MuSelect, rec.MuRelease, rec.MuLabels)
		}
		nparts := 4 // counts, sums, sums of squares (t score), features
		if labels == LabelsPrivate {
			nparts++
		}
		if len(rec.Components) != nparts || rec.Into != "sel" || rec.N != 100 || !rec.NPublic {
			t.Errorf("%s: record %+v", labels, rec)
		}
		if tv := release.NoiseTVOf(3*11 + 3*10 + 100*2); q.NoiseTV != tv {
			t.Errorf("%s: noise_tv %v, want %v", labels, q.NoiseTV, tv)
		}
	}
}
