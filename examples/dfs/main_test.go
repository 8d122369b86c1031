package main

import (
	"testing"
	"time"
)

// TestReproductionClaims runs the synthetic experiment at reduced size
// (p = 500 instead of 3000) and asserts the claims of "Larger Model Causes Lower Classification Accuracy Under Differential Privacy: Reason and Solution" (ICLR 2022 submission, the conference version of arXiv:2111.13895), Section 4.1
// that survive sound differential privacy. The paper's 30 training points
// per class leave private selection no signal at these budgets (see the
// tables of the full run), so the private claims are checked with 1000 per
// class.
func TestReproductionClaims(t *testing.T) {
	start := time.Now()
	c := config{P: 500, NTest: 200, Reps: 60, VarMean: 10, C: 0.88, Delta: 1e-4, SelShare: 0.5, Seed: 3}
	c.CSelect = 70.71067811865476 // sqrt(p * varmean)
	c.CReleasePerFeature = 3.1622776601683795
	mu := muOf(4, c.Delta) // epsilon = 4 at delta = 1e-4, as in Fig. 4a

	// Noise-free (Fig. 3, noiseless): ranking by the class-mean distance
	// beats the first m features at m = 20.
	c.NTrain = 30
	clean := []cell{{methodClean, 20, 0}, {methodCleanAll, 20, 0}}
	res, err := c.sweep(clean)
	if err != nil {
		t.Fatal(err)
	}
	dfsClean, _ := res.mean(clean[0])
	firstClean, _ := res.mean(clean[1])
	t.Logf("noise-free, 30/class, m = 20: DFS exact %.3f, first 20 %.3f", dfsClean, firstClean)
	if !(dfsClean < firstClean-0.1) {
		t.Errorf("noise-free DFS (%.3f) does not beat the first 20 features (%.3f)", dfsClean, firstClean)
	}

	// Under noise: private DFS with 20 features beats all 500 features
	// (no selection, the whole budget on the release).
	c.NTrain = 1000
	grid := []cell{{methodDFS, 20, mu}, {methodT, 20, mu}, {methodFirst, c.P, mu}, {methodFirst, 20, mu}}
	res, err = c.sweep(grid)
	if err != nil {
		t.Fatal(err)
	}
	dfs, dfsSE := res.mean(grid[0])
	tstat, tSE := res.mean(grid[1])
	all, allSE := res.mean(grid[2])
	first, _ := res.mean(grid[3])
	t.Logf("epsilon 4 (mu %.3f), 1000/class: DFS@20 %.3f±%.3f, t@20 %.3f±%.3f, first 20 %.3f, all %d %.3f±%.3f",
		mu, dfs, dfsSE, tstat, tSE, first, c.P, all, allSE)
	if !(dfs < all-0.15) {
		t.Errorf("private DFS with 20 features (%.3f) does not clearly beat all %d features (%.3f)", dfs, c.P, all)
	}
	if !(dfs < first-0.1) {
		t.Errorf("private DFS with 20 features (%.3f) does not beat the first 20 features (%.3f)", dfs, first)
	}
	// DFS against the t-statistic is reported, not asserted: at this budget
	// the two are within a few standard errors of each other.
	t.Logf("took %v", time.Since(start))
}
