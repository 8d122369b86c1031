package dfs

import (
	"fmt"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Accounting states how a call's parts compose into its one charge.
const Accounting = "one replace_one gaussian: mu = sqrt((2 mu_select)^2 + mu_release^2 + mu_labels^2); the add/remove selection is 2 mu_select-GDP for a replacement (group privacy), composed adaptively with the replace-one release"

// Quote prices a whole call (Select, then ReleaseRows) on n rows of d
// features, before any data is read: one replace-one Gaussian of
// mu = sqrt((2 mu_select)^2 + mu_release^2 + mu_labels^2) (see
// [Accounting]), certified by price at the scope's delta. rec holds the
// caller's fields of the params record (into, source columns, order);
// Quote fills in the call's. The samplers' total-variation bound covers the
// selection's noisy statistics and the n M released coordinates.
func (p Params) Quote(d, n int, rec mechanism.SelectTopm, delta float64, price mechanism.Pricer) (mechanism.Quote, error) {
	selM, err := p.SelectMechanisms(d)
	if err != nil {
		return mechanism.Quote{}, err
	}
	relM, err := p.ReleaseMechanisms()
	if err != nil {
		return mechanism.Quote{}, err
	}
	if n < 1 || n > MaxRows {
		return mechanism.Quote{}, fmt.Errorf("dfs: n must lie in [1, %d], got %d", MaxRows, n)
	}
	component := func(part string, m mechanism.Mechanism, replaceOneMu float64) mechanism.SelectTopmComponent {
		m.Neighbours = mechanism.NeighboursOf(m.Neighbours)
		return mechanism.SelectTopmComponent{Mechanism: m, Part: part, MuReplaceOne: replaceOneMu}
	}
	parts := []string{"select_counts", "select_sums", "select_sumsq"}
	var selMus []float64
	rec.Components = nil
	for i, m := range selM {
		selMus = append(selMus, m.GDPMu())
		rec.Components = append(rec.Components, component(parts[i], m, 2*m.GDPMu()))
	}
	rec.MuSelect = mechanism.ComposeMu(selMus...)
	rec.MuRelease = relM[0].GDPMu()
	rec.Components = append(rec.Components, component("release_features", relM[0], rec.MuRelease))
	rec.MuLabels, rec.EpsLabels = 0, 0
	if len(relM) > 1 {
		rec.MuLabels = relM[1].GDPMu()
		rec.Components = append(rec.Components, component("release_labels", relM[1], rec.MuLabels))
		rec.EpsLabels = p.EpsLabels
	}
	rec.N, rec.NPublic, rec.D, rec.M, rec.Classes = n, true, d, p.M, p.Classes
	rec.Score, rec.C, rec.CRelease, rec.Labels = p.Score, p.C, p.ReleaseBound(), p.Labels
	rec.MuSelectRequested, rec.MuReleaseRequested = p.MuSelect, p.MuRelease
	rec.SigmaRelease, rec.Accounting = relM[0].Sigma, Accounting
	m := mechanism.Mechanism{
		Kind:       mechanism.KindGaussian,
		Mu:         mechanism.ComposeMu(2*rec.MuSelect, rec.MuRelease, rec.MuLabels),
		Neighbours: mechanism.ReplaceOne,
	}
	coords := p.Classes * (d + 1) // class counts and sums
	if p.Score == ScoreT {
		coords += p.Classes * d // sums of squares
	}
	return mechanism.NewQuote(m, delta, price, release.NoiseTVOf(coords+n*p.M), rec)
}
