package accountant

import (
	"errors"
	"fmt"

	"github.com/dpsql/dpsql/mechanism"
)

// One neighbour relation per scope: an entry is accounted in its scope's
// relation, as stated when they agree; an add/remove entry in a replace-one
// scope is converted (Gaussian and external: 2 mu; Laplace: 2 epsilon;
// subsampled Gaussian: the replace-one pair); anything else is refused. Why
// is written once, in docs/privacy-model.md, paragraph "One neighbour relation per scope".

// ErrNeighbours reports an entry whose neighbour relation its scope cannot
// account.
var ErrNeighbours = errors.New("wrong neighbour relation for this scope")

// InScope returns m as it is accounted in a scope of relation rel (converted
// from add/remove to replace-one where that is sound), or an error wrapping
// [ErrNeighbours].
func InScope(scope, rel string, m mechanism.Mechanism) (mechanism.Mechanism, error) {
	mrel := m.Neighbours
	if mrel == "" && m.Kind == mechanism.KindComposite && len(m.Parts) > 0 {
		mrel = m.Parts[0].Neighbours // Validate: the parts share one relation
	}
	if mrel == "" {
		mrel = mechanism.AddRemove
	}
	if rel == "" {
		rel = mechanism.AddRemove
	}
	switch {
	case mrel == rel:
		return m, nil
	case rel == mechanism.AddRemove:
		return mechanism.Mechanism{}, fmt.Errorf("%w: scope %q protects add/remove neighbours (one person's row added or removed), but this %s release is private only for replace-one neighbours (one row replaced by another, the number of rows public), so it has no guarantee in this scope and nothing was charged; charge it in a replace-one scope: SELECT dp_init(1.0, 1e-5, 'rows', 'replace_one'), then dp_use_scope('rows') (or dpsql init DB --scope rows --mu 1 --neighbours replace_one)",
			ErrNeighbours, scope, m.Kind)
	}
	// An add/remove entry in a replace-one scope.
	c := m
	c.Neighbours = mechanism.ReplaceOne
	switch m.Kind {
	case mechanism.KindGaussian, mechanism.KindExternal:
		return mechanism.Mechanism{Kind: m.Kind, Mu: 2 * m.GDPMu(), Neighbours: mechanism.ReplaceOne}, nil
	case mechanism.KindLaplace:
		c.Epsilon, c.Sensitivity = 2*m.Epsilon, 2*m.Sensitivity
		return c, nil
	case mechanism.KindSubsampledGaussian:
		return c, nil
	}
	return mechanism.Mechanism{}, fmt.Errorf("%w: scope %q protects replace-one neighbours and a %s entry has no replace-one accounting; charge it in an add/remove scope", ErrNeighbours, scope, m.Kind)
}
