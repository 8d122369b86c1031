package main

import (
	"fmt"
	"math"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/dfs"
)

// Methods compared.
const (
	methodDFS      = "DFS"                       // private selection (distance score) + private release
	methodT        = "t-statistic"               // private selection (t score) + private release
	methodFirst    = "no selection (first m)"    // the first m features, whole budget on the release
	methodExactDFS = "DFS, exact means (not DP)" // the paper's leaky selection, release charged only
	methodClean    = "no noise, DFS exact"       // noise-free reference: exact ranking, raw data
	methodCleanAll = "no noise, first m"         // noise-free reference: first m features, raw data
)

// privateMethods are compared at a budget; cleanMethods ignore it.
var (
	privateMethods = []string{methodDFS, methodT, methodFirst, methodExactDFS}
	cleanMethods   = []string{methodClean, methodCleanAll}
)

// model is the synthetic Gaussian model of "Larger Model Causes Lower Classification Accuracy Under Differential Privacy: Reason and Solution" (ICLR 2022 submission, the conference version of arXiv:2111.13895), Section 4.1: two classes
// N(mu_k, diag(a_1k..a_pk)) with a_jk ~ Exponential, mu_0 = 0 and mu_1 drawn
// coordinate-wise from (1-c) delta_0 + c Laplace(0, 1/2) (density
// proportional to exp(-2|x|)).
type model struct {
	p        int
	sd0, sd1 []float64
	mean1    []float64
}

func newModel(r *mrand.Rand, p int, varMean, c float64) model {
	m := model{p: p, sd0: make([]float64, p), sd1: make([]float64, p), mean1: make([]float64, p)}
	for j := 0; j < p; j++ {
		m.sd0[j] = math.Sqrt(varMean * r.ExpFloat64())
		m.sd1[j] = math.Sqrt(varMean * r.ExpFloat64())
		if r.Float64() < c {
			// Laplace(0, b = 1/2): exponential magnitude of mean 1/2, random sign.
			v := 0.5 * r.ExpFloat64()
			if r.IntN(2) == 0 {
				v = -v
			}
			m.mean1[j] = v
		}
	}
	return m
}

// sample draws perClass rows of each class (class 0 first).
func (m model) sample(r *mrand.Rand, perClass int) dfs.Data {
	n := 2 * perClass
	x := make([]float32, n*m.p)
	labels := make([]int, n)
	for i := 0; i < n; i++ {
		k := i / perClass
		labels[i] = k
		row := x[i*m.p : (i+1)*m.p]
		for j := range row {
			if k == 0 {
				row[j] = float32(m.sd0[j] * r.NormFloat64())
			} else {
				row[j] = float32(m.mean1[j] + m.sd1[j]*r.NormFloat64())
			}
		}
	}
	return dfs.Data{X: x, D: m.p, Labels: labels, N: n}
}

// config fixes one experiment.
type config struct {
	P, NTrain, NTest, Reps int
	VarMean, C             float64 // model: mean of the variances, share of nonzero mean differences
	Delta                  float64 // delta at which epsilon is quoted
	SelShare               float64 // share of mu_total^2 the private selection spends, as (2 MuSelect)^2
	CSelect                float64 // clip bound of whole rows for the selection
	CReleasePerFeature     float64 // clip bound of the m kept features: this times sqrt(m)
	Seed                   uint64
}

// budget splits a total replace-one GDP mu between selection and release:
// the selection is MuSelect-GDP under add/remove, hence (2 MuSelect)-GDP under
// replace-one (group of two); the release is MuRelease-GDP under replace-one;
// together sqrt((2 MuSelect)^2 + MuRelease^2) = muTotal.
func (c config) budget(muTotal float64) (muSelect, muRelease float64) {
	return math.Sqrt(c.SelShare) * muTotal / 2, math.Sqrt(1-c.SelShare) * muTotal
}

func (c config) cRelease(m int) float64 { return c.CReleasePerFeature * math.Sqrt(float64(m)) }

// runOne returns the test error of method with m features at total budget
// muTotal (replace-one GDP; ignored by the noise-free methods). ranking is
// exactDistanceRanking(train), which the exact-means methods keep the top m of.
func (c config) runOne(noise *release.Noise, train, test dfs.Data, ranking []int, method string, m int, muTotal float64) (float64, error) {
	var idx []int
	muRelease := muTotal
	cr := c.cRelease(m)
	switch method {
	case methodDFS, methodT:
		score := dfs.ScoreDistance
		if method == methodT {
			score = dfs.ScoreT
		}
		var muSel float64
		muSel, muRelease = c.budget(muTotal)
		sel, err := dfs.Select(noise, train, dfs.Params{M: m, Score: score, MuSelect: muSel, C: c.CSelect, Classes: 2})
		if err != nil {
			return 0, err
		}
		idx = sel.Indices
	case methodFirst, methodCleanAll:
		idx = make([]int, m)
		for i := range idx {
			idx[i] = i
		}
	case methodExactDFS, methodClean:
		idx = ranking[:m]
	default:
		return 0, fmt.Errorf("unknown method %q", method)
	}
	xs := make([]float32, 0, train.N*m) // one row of m features per training row
	ys := make([]int, 0, train.N)
	clean := method == methodClean || method == methodCleanAll
	if clean {
		for i := 0; i < train.N; i++ {
			v, _ := dfs.Apply(train.X[i*train.D:(i+1)*train.D], idx)
			xs = append(xs, v...)
			ys = append(ys, train.Labels[i])
		}
	} else {
		p := dfs.Params{M: m, MuRelease: muRelease, C: cr, CRelease: cr, Classes: 2, Labels: dfs.LabelsPublic}
		err := dfs.ReleaseRows(noise, train, dfs.Selection{Indices: idx}, p, func(_ int, v []float32, y int) error {
			xs = append(xs, v...)
			ys = append(ys, y)
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	f := trainFisher(xs, ys, m)
	wrong := 0
	for i := 0; i < test.N; i++ {
		v, _ := dfs.Apply(test.X[i*test.D:(i+1)*test.D], idx)
		if !clean {
			clip(v, cr)
		}
		if f.predict(v) != test.Labels[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(test.N), nil
}

// exactDistanceRanking ranks features by |mean_0 - mean_1| on the raw data:
// the paper's Algorithm 1, steps 2-4. It is not differentially private.
func exactDistanceRanking(d dfs.Data) []int {
	var mean [2][]float64
	var n [2]float64
	mean[0], mean[1] = make([]float64, d.D), make([]float64, d.D)
	for i := 0; i < d.N; i++ {
		k := d.Labels[i]
		n[k]++
		for j, v := range d.X[i*d.D : (i+1)*d.D] {
			mean[k][j] += float64(v)
		}
	}
	score := make([]float64, d.D)
	for j := range score {
		score[j] = math.Abs(mean[0][j]/n[0] - mean[1][j]/n[1])
	}
	return dfs.TopM(score, d.D)
}

// clip scales v to L2 norm at most c (test rows get the training rows'
// public transform).
func clip(v []float32, c float64) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if n := math.Sqrt(ss); n > c {
		for i := range v {
			v[i] = float32(float64(v[i]) * c / n)
		}
	}
}

// fisher is the LDA classifier of Shen, Wang, Sun, Shen, "Towards Understanding the Impact of Model Size on Differential Private Classification" (arXiv:2111.13895), Definition 4:
// delta(x) = (x - (mu0+mu1)/2)' Sigma^-1 (mu0 - mu1) with the pooled diagonal
// Sigma = diag((S0^2 + S1^2)/2); class 0 when delta(x) > 0.
type fisher struct {
	mid, w []float64
}

func trainFisher(x []float32, y []int, m int) fisher {
	var mean, sq [2][]float64
	var n [2]float64
	for k := 0; k < 2; k++ {
		mean[k], sq[k] = make([]float64, m), make([]float64, m)
	}
	for i, k := range y {
		n[k]++
		for j, v := range x[i*m : (i+1)*m] {
			mean[k][j] += float64(v)
		}
	}
	for k := 0; k < 2; k++ {
		for j := range mean[k] {
			mean[k][j] /= n[k]
		}
	}
	for i, k := range y {
		for j, v := range x[i*m : (i+1)*m] {
			d := float64(v) - mean[k][j]
			sq[k][j] += d * d
		}
	}
	f := fisher{mid: make([]float64, m), w: make([]float64, m)}
	for j := 0; j < m; j++ {
		v := (sq[0][j]/(n[0]-1) + sq[1][j]/(n[1]-1)) / 2
		if !(v > 0) {
			v = math.SmallestNonzeroFloat64
		}
		f.mid[j] = (mean[0][j] + mean[1][j]) / 2
		f.w[j] = (mean[0][j] - mean[1][j]) / v
	}
	return f
}

func (f fisher) predict(x []float32) int {
	var s float64
	for j, v := range x {
		s += (float64(v) - f.mid[j]) * f.w[j]
	}
	if s > 0 {
		return 0
	}
	return 1
}

// cell identifies one averaged result.
type cell struct {
	method string
	m      int
	mu     float64 // total replace-one mu; 0 for noise-free methods
}

// results accumulates test errors over repetitions.
type results map[cell][]float64

func (r results) mean(c cell) (mean, se float64) {
	xs := r[c]
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	if len(xs) > 1 {
		se = math.Sqrt(v / float64(len(xs)-1) / float64(len(xs)))
	}
	return mean, se
}

// sweep runs every repetition, in parallel: a fresh model, training and test
// sets, then every cell of grid. Repetition rep draws its data from a PCG
// stream seeded (Seed, rep) and its noise from release.NewSeededNoise (a test
// hook: fine for synthetic data) seeded from both, so the results do not
// depend on scheduling; Seed = 0 draws the noise from crypto/rand instead, and
// so does every build without -tags dpsql_testseed (seed_off.go).
func (c config) sweep(grid []cell) (results, error) {
	errs := make([][]float64, c.Reps)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := range next {
				e, err := c.repetition(rep, grid)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				errs[rep] = e
				mu.Unlock()
			}
		}()
	}
	for rep := 0; rep < c.Reps; rep++ {
		next <- rep
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	res := results{}
	for _, e := range errs {
		for i, g := range grid {
			res[g] = append(res[g], e[i])
		}
	}
	return res, nil
}

func (c config) repetition(rep int, grid []cell) ([]float64, error) {
	r := mrand.New(mrand.NewPCG(c.Seed, uint64(rep)))
	noise := release.NewNoise()
	if c.Seed != 0 {
		noise = seededNoise(c.Seed*1_000_003 + uint64(rep))
	}
	mod := newModel(r, c.P, c.VarMean, c.C)
	train := mod.sample(r, c.NTrain)
	test := mod.sample(r, c.NTest)
	ranking := exactDistanceRanking(train)
	out := make([]float64, len(grid))
	for i, g := range grid {
		e, err := c.runOne(noise, train, test, ranking, g.method, g.m, g.mu)
		if err != nil {
			return nil, fmt.Errorf("%s, m = %d, mu = %g: %w", g.method, g.m, g.mu, err)
		}
		out[i] = e
	}
	return out, nil
}

// uniqueMs returns the sorted distinct feature counts, capped at p.
func uniqueMs(ms []int, p int) []int {
	var out []int
	for _, m := range ms {
		if m >= 1 && m <= p {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
