package dfs

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/dpsql/dpsql/internal/normal"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Score names accepted in [Params.Score].
const (
	// ScoreDistance ranks feature j by the largest distance between two noisy
	// class means, max over class pairs |mean_a[j] - mean_b[j]| (Algorithm 2;
	// for two classes Algorithm 1).
	ScoreDistance = "distance"
	// ScoreT ranks feature j by the largest two-sample t-statistic over class
	// pairs, computed from noisy sums, sums of squares and counts (the
	// t-statistic baseline, equation (16)).
	ScoreT = "t"
)

// Label options accepted in [Params.Labels].
const (
	// LabelsPublic releases labels in clear. This assumes the labels are
	// known to the adversary: only the features are protected.
	LabelsPublic = "public"
	// LabelsPrivate releases each label through K-ary randomized response
	// with [Params.EpsLabels].
	LabelsPrivate = "private"
)

// Limits on the shapes this package accepts. MaxRows keeps every integer sum
// below 2^53, so that it converts to float64 exactly.
const (
	MaxDim  = 1 << 22
	MaxRows = 1 << 28
)

// Budget shares of MuSelect^2 (GDP composes in squares): the class counts get
// countShare, the rest goes to the sums, or is split evenly between sums and
// sums of squares for the t-score.
const countShare = 0.1

// statBits fixes the integer grid of the statistics: a row clipped to norm C
// is truncated toward zero onto multiples of C 2^-statBits.
const statBits = 24

const statScale = float64(1 << statBits)

// Params are the public parameters of a selection and release.
type Params struct {
	// M is the number of features kept, 1 <= M <= d.
	M int
	// Score is ScoreDistance or ScoreT.
	Score string
	// MuSelect is the GDP parameter of the selection under add/remove
	// neighbours (all its noisy statistics together).
	MuSelect float64
	// MuRelease is the GDP parameter of the per-row feature release under
	// replace-one neighbours (see [Params.ReleaseMechanisms]).
	MuRelease float64
	// C is the public L2 bound whole rows are clipped to for the selection.
	C float64
	// CRelease is the public L2 bound the M kept coordinates of a row are
	// clipped to for the release; 0 means C.
	CRelease float64
	// Classes is the number of classes K >= 2; labels lie in [0, K).
	Classes int
	// Labels is LabelsPublic or LabelsPrivate (release only).
	Labels string
	// EpsLabels is the epsilon of the randomized response on labels when
	// Labels is LabelsPrivate.
	EpsLabels float64
}

// Data is a table of N rows of D float32 features, row-major in X, with one
// label in [0, Classes) per row.
type Data struct {
	X      []float32
	D      int
	Labels []int
	N      int
}

// Stats are the noisy class-wise statistics a selection is ranked from, in
// the data's units, computed from rows clipped to norm C.
type Stats struct {
	Classes, D int
	// Counts[k] is the noisy number of rows of class k.
	Counts []float64
	// Sums[k*D+j] is the noisy sum of feature j over the clipped rows of class k.
	Sums []float64
	// SumSq[k*D+j] is the noisy sum of squares of feature j over the clipped
	// rows of class k (ScoreT only, nil otherwise).
	SumSq []float64
	// Noise scales (standard deviations) of the three statistics.
	SigmaCount, SigmaSum, SigmaSumSq float64
}

// Selection is the result of [Select].
type Selection struct {
	// Indices are the M kept features, best score first.
	Indices []int
	// Scores[i] is the score of Indices[i].
	Scores []float64
	// AllScores[j] is the score of feature j.
	AllScores []float64
	// Stats are the noisy statistics the scores were computed from.
	Stats Stats
}

func finitePos(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// ReleaseBound is the L2 bound the m released features are clipped to:
// CRelease, or C when CRelease is 0.
func (p Params) ReleaseBound() float64 {
	if p.CRelease == 0 {
		return p.C
	}
	return p.CRelease
}

// checkSelect validates the parameters the selection uses, for d features.
func (p Params) checkSelect(d int) error {
	if d < 1 || d > MaxDim {
		return fmt.Errorf("dfs: dimension must lie in [1, %d], got %d", MaxDim, d)
	}
	if p.M < 1 || p.M > d {
		return fmt.Errorf("dfs: m must lie in [1, d = %d], got %d", d, p.M)
	}
	if p.Score != ScoreDistance && p.Score != ScoreT {
		return fmt.Errorf("dfs: unknown score %q (want %q or %q)", p.Score, ScoreDistance, ScoreT)
	}
	if p.Classes < 2 {
		return fmt.Errorf("dfs: need at least two classes, got %d", p.Classes)
	}
	if !finitePos(p.C) {
		return fmt.Errorf("dfs: clipping bound C must be positive and finite, got %v", p.C)
	}
	if !finitePos(p.MuSelect) {
		return fmt.Errorf("dfs: MuSelect must be positive and finite, got %v", p.MuSelect)
	}
	return nil
}

// checkRelease validates the parameters the release uses.
func (p Params) checkRelease() error {
	if p.M < 1 {
		return fmt.Errorf("dfs: m must be at least 1, got %d", p.M)
	}
	if p.Classes < 2 {
		return fmt.Errorf("dfs: need at least two classes, got %d", p.Classes)
	}
	if p.CRelease != 0 && !finitePos(p.CRelease) {
		return fmt.Errorf("dfs: CRelease must be 0 (use C) or positive and finite, got %v", p.CRelease)
	}
	if !finitePos(p.ReleaseBound()) {
		return fmt.Errorf("dfs: clipping bound C must be positive and finite, got %v", p.C)
	}
	if !finitePos(p.MuRelease) {
		return fmt.Errorf("dfs: MuRelease must be positive and finite, got %v", p.MuRelease)
	}
	switch p.Labels {
	case LabelsPublic:
	case LabelsPrivate:
		if !finitePos(p.EpsLabels) {
			return fmt.Errorf("dfs: EpsLabels must be positive and finite with private labels, got %v", p.EpsLabels)
		}
	default:
		return fmt.Errorf("dfs: labels option must be %q or %q, got %q", LabelsPublic, LabelsPrivate, p.Labels)
	}
	return nil
}

func (d Data) check() error {
	if d.D < 1 || d.D > MaxDim {
		return fmt.Errorf("dfs: dimension must lie in [1, %d], got %d", MaxDim, d.D)
	}
	if d.N < 0 || d.N > MaxRows {
		return fmt.Errorf("dfs: number of rows must lie in [0, %d], got %d", MaxRows, d.N)
	}
	if len(d.X) != d.N*d.D {
		return fmt.Errorf("dfs: %d values do not make %d rows of dimension %d", len(d.X), d.N, d.D)
	}
	if len(d.Labels) != d.N {
		return fmt.Errorf("dfs: %d labels for %d rows", len(d.Labels), d.N)
	}
	return nil
}

// selectCal is the noise calibration of a selection, in the integer units of
// the statistics.
type selectCal struct {
	sigmaSum, sigmaSq, sigmaCount float64
	muSum, muSq, muCount          float64
}

func (p Params) selectCal(d int) (selectCal, error) {
	var c selectCal
	shareSum, shareSq := 1-countShare, 0.0
	if p.Score == ScoreT {
		shareSum, shareSq = (1-countShare)/2, (1-countShare)/2
	}
	var err error
	// Counts: one row changes one class count by 1.
	if c.sigmaCount, err = release.GaussianSigma(1, p.MuSelect*math.Sqrt(countShare), 1); err != nil {
		return c, fmt.Errorf("dfs: calibrating the counts: %w", err)
	}
	c.muCount = release.GaussianMu(1, c.sigmaCount, 1)
	// Sums: one row changes one class's d-vector of sums by its quantised
	// clipped row, of L2 norm <= 2^statBits units.
	if c.sigmaSum, err = release.GaussianSigma(statScale, p.MuSelect*math.Sqrt(shareSum), d); err != nil {
		return c, fmt.Errorf("dfs: calibrating the sums: %w", err)
	}
	c.muSum = release.GaussianMu(statScale, c.sigmaSum, d)
	if shareSq > 0 {
		// Sums of squares: one row adds r_j = floor(q_j^2 / 2^statBits) >= 0 to
		// its class, and ||r||_2 <= ||r||_1 <= ||q||^2 / 2^statBits <= 2^statBits
		// units of C^2 2^-statBits, i.e. L2 sensitivity C^2.
		if c.sigmaSq, err = release.GaussianSigma(statScale, p.MuSelect*math.Sqrt(shareSq), d); err != nil {
			return c, fmt.Errorf("dfs: calibrating the sums of squares: %w", err)
		}
		c.muSq = release.GaussianMu(statScale, c.sigmaSq, d)
	}
	if mechanism.ComposeMu(c.muCount, c.muSum, c.muSq) > p.MuSelect*(1+1e-12) {
		return c, errors.New("dfs: internal error: selection calibration exceeds MuSelect")
	}
	return c, nil
}

func gaussianMech(sens, sigma float64, dim int, unit float64, neighbours string) mechanism.Mechanism {
	return mechanism.Mechanism{
		Kind:        mechanism.KindGaussian,
		Mu:          release.GaussianMu(sens, sigma, dim),
		Sensitivity: release.GridSensitivity(sens, sigma, dim) * unit,
		Sigma:       sigma * unit,
		Neighbours:  neighbours,
	}
}

// SelectMechanisms describes the selection on d features for the accountant,
// before any data is read: one Gaussian entry per noisy statistic (counts,
// sums, and sums of squares for ScoreT), under add/remove neighbours. Mu is
// authoritative; Sensitivity (which includes the noise grid's rounding) and
// Sigma are given in the data's units for the record. The entries compose to
// at most MuSelect.
func (p Params) SelectMechanisms(d int) ([]mechanism.Mechanism, error) {
	if err := p.checkSelect(d); err != nil {
		return nil, err
	}
	c, err := p.selectCal(d)
	if err != nil {
		return nil, err
	}
	unit := p.C / statScale
	ms := []mechanism.Mechanism{
		gaussianMech(1, c.sigmaCount, 1, 1, mechanism.AddRemove),
		gaussianMech(statScale, c.sigmaSum, d, unit, mechanism.AddRemove),
	}
	if p.Score == ScoreT {
		ms = append(ms, gaussianMech(statScale, c.sigmaSq, d, p.C*p.C/statScale, mechanism.AddRemove))
	}
	return ms, nil
}

// ReleaseMechanisms describes the per-row release of [ReleaseRows] for the
// accountant, before any data is read. The first entry is the feature
// release: Gaussian noise on rows clipped to CRelease, whose replace-one L2
// sensitivity is 2 CRelease (plus the grid's rounding, included in
// Sensitivity), so Mu is its exact GDP parameter under replace-one neighbours
// and is at most MuRelease. With private labels a second entry describes the
// randomized response: an EpsLabels-DP mechanism, recorded as the Gaussian
// that dominates it, Mu = [RandomizedResponseMu](EpsLabels), since the
// accountant has no kind for pure eps-DP yet.
//
// Both entries carry Neighbours = "replace_one" and a Mu that already
// measures a replacement; the ledger charges it as stated (see
// [mechanism.ReplaceOne]).
func (p Params) ReleaseMechanisms() ([]mechanism.Mechanism, error) {
	if err := p.checkRelease(); err != nil {
		return nil, err
	}
	sigma, err := p.releaseSigma()
	if err != nil {
		return nil, err
	}
	ms := []mechanism.Mechanism{gaussianMech(2*p.ReleaseBound(), sigma, p.M, 1, mechanism.ReplaceOne)}
	if p.Labels == LabelsPrivate {
		ms = append(ms, mechanism.Mechanism{
			Kind:       mechanism.KindGaussian,
			Mu:         RandomizedResponseMu(p.EpsLabels),
			Neighbours: mechanism.ReplaceOne,
		})
	}
	return ms, nil
}

func (p Params) releaseSigma() (float64, error) {
	sigma, err := release.GaussianSigma(2*p.ReleaseBound(), p.MuRelease, p.M)
	if err != nil {
		return 0, fmt.Errorf("dfs: calibrating the release: %w", err)
	}
	return sigma, nil
}

// RandomizedResponseMu returns the smallest mu such that every eps-DP
// mechanism is mu-GDP: mu = 2 Phi^-1(e^eps/(1+e^eps)). The trade-off function
// of eps-DP is piecewise linear with its kink at the symmetric point
// alpha = 1/(1+e^eps); the convex, symmetric G_mu lies below it exactly when
// G_mu's own symmetric point Phi(-mu/2) is at most 1/(1+e^eps). The value is
// rounded up slightly for safety. eps must be positive and finite.
func RandomizedResponseMu(eps float64) float64 {
	// Solve log Phi(-x) = log(1/(1+e^eps)) for x = mu/2 by bisection on the
	// accurate tail of normal.LogPhi (math.Erfcinv loses precision for
	// tiny arguments), keeping the upper end of the bracket.
	target := -(eps + math.Log1p(math.Exp(-eps)))
	lo, hi := 0.0, 1.0
	for normal.LogPhi(-hi) > target {
		lo, hi = hi, 2*hi
	}
	for i := 0; i < 200 && hi-lo > 1e-15*hi; i++ {
		mid := lo + (hi-lo)/2
		if normal.LogPhi(-mid) > target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return 2 * hi * (1 + 1e-12)
}

// Select chooses p.M features privately. In one parallel pass over the rows it
// clips each row to norm p.C, accumulates exact class-wise sums (and sums of
// squares for ScoreT) and counts, adds Gaussian noise to them, and ranks the
// features from the noisy statistics. It spends p.MuSelect under add/remove
// neighbours (see SelectMechanisms). All errors are returned before any noise is
// drawn.
func Select(noise *release.Noise, data Data, p Params) (Selection, error) {
	if err := data.check(); err != nil {
		return Selection{}, err
	}
	if err := p.checkSelect(data.D); err != nil {
		return Selection{}, err
	}
	cal, err := p.selectCal(data.D)
	if err != nil {
		return Selection{}, err
	}
	counts, sums, sq, err := exactStats(data, p.C, p.Classes, p.Score == ScoreT)
	if err != nil {
		return Selection{}, err
	}
	// Noise is drawn only from here on.
	st := Stats{Classes: p.Classes, D: data.D}
	st.Counts = noisy(noise, counts, cal.sigmaCount, 1)
	st.SigmaCount = cal.sigmaCount
	unit := p.C / statScale
	st.Sums = noisy(noise, sums, cal.sigmaSum, unit)
	st.SigmaSum = cal.sigmaSum * unit
	if sq != nil {
		unitSq := p.C * p.C / statScale
		st.SumSq = noisy(noise, sq, cal.sigmaSq, unitSq)
		st.SigmaSumSq = cal.sigmaSq * unitSq
	}
	scores := st.scores(p.Score)
	idx := TopM(scores, p.M)
	sel := Selection{Indices: idx, Scores: make([]float64, len(idx)), AllScores: scores, Stats: st}
	for i, j := range idx {
		sel.Scores[i] = scores[j]
	}
	return sel, nil
}

// noisy converts exact integer statistics to float64 (exactly: they are below
// 2^53), adds Gaussian noise of scale sigma on the release grid, and scales
// the result to the data's units (post-processing).
func noisy(noise *release.Noise, x []int64, sigma, unit float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	noise.AddGaussian(out, sigma)
	if unit != 1 {
		for i := range out {
			out[i] *= unit
		}
	}
	return out
}

// TopM returns the indices of the m largest scores, largest first, ties
// broken by the smaller index.
func TopM(scores []float64, m int) []int {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	if m > len(idx) {
		m = len(idx)
	}
	return idx[:m:m]
}

// activeClasses returns the classes whose noisy count is at least minCount;
// when fewer than two are, all classes. This is post-processing of the noisy
// counts: an empty class is never refused, only left out of the score.
func (s Stats) activeClasses(minCount float64) []int {
	var act []int
	for k, c := range s.Counts {
		if c >= minCount {
			act = append(act, k)
		}
	}
	if len(act) < 2 {
		act = act[:0]
		for k := range s.Counts {
			act = append(act, k)
		}
	}
	return act
}

// scores computes every feature's score from the noisy statistics.
func (s Stats) scores(score string) []float64 {
	d := s.D
	out := make([]float64, d)
	switch score {
	case ScoreDistance:
		act := s.activeClasses(1)
		lo := make([]float64, d)
		hi := make([]float64, d)
		for i, k := range act {
			inv := 1 / math.Max(s.Counts[k], 1)
			row := s.Sums[k*d : k*d+d]
			for j, v := range row {
				m := v * inv
				if i == 0 || m < lo[j] {
					lo[j] = m
				}
				if i == 0 || m > hi[j] {
					hi[j] = m
				}
			}
		}
		for j := range out {
			out[j] = hi[j] - lo[j]
		}
	case ScoreT:
		act := s.activeClasses(2)
		means := make([][]float64, len(act))
		vars := make([][]float64, len(act))
		ns := make([]float64, len(act))
		for i, k := range act {
			n := math.Max(s.Counts[k], 2)
			ns[i] = n
			// Floor the variance at the noise level of the second moment,
			// sigma_sumsq / n, so that noise cannot make it vanish.
			floor := math.Max(s.SigmaSumSq/n, math.SmallestNonzeroFloat64)
			means[i] = make([]float64, d)
			vars[i] = make([]float64, d)
			for j := 0; j < d; j++ {
				sum, sq := s.Sums[k*d+j], s.SumSq[k*d+j]
				m := sum / n
				means[i][j] = m
				vars[i][j] = math.Max((sq-sum*m)/(n-1), floor)
			}
		}
		for a := range act {
			for b := a + 1; b < len(act); b++ {
				for j := 0; j < d; j++ {
					t := math.Abs(means[a][j]-means[b][j]) / math.Sqrt(vars[a][j]/ns[a]+vars[b][j]/ns[b])
					if t > out[j] {
						out[j] = t
					}
				}
			}
		}
	}
	return out
}

// workers returns how many goroutines to use for n rows of work.
func workers(n, minPer int) int {
	w := runtime.GOMAXPROCS(0)
	if max := (n + minPer - 1) / minPer; max < w {
		w = max
	}
	if w < 1 {
		w = 1
	}
	return w
}

// sumSquares returns the sum of squares of a row, in float64.
func sumSquares(row []float32) float64 {
	var a, b, c, e float64
	j := 0
	for ; j+4 <= len(row); j += 4 {
		x0, x1, x2, x3 := float64(row[j]), float64(row[j+1]), float64(row[j+2]), float64(row[j+3])
		a += x0 * x0
		b += x1 * x1
		c += x2 * x2
		e += x3 * x3
	}
	for ; j < len(row); j++ {
		x := float64(row[j])
		a += x * x
	}
	return (a + b) + (c + e)
}

// rowError reports a malformed row; the lowest row index wins so that the
// message does not depend on scheduling.
type rowError struct {
	row int
	err error
}

func firstError(errs []rowError) error {
	best := -1
	for i, e := range errs {
		if e.err != nil && (best < 0 || e.row < errs[best].row) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return errs[best].err
}

// exactStats computes the class counts and the class-wise sums (and sums of
// squares) of the rows clipped to norm c and truncated onto the grid
// c 2^-statBits, exactly, in int64. It is the only pass over the data.
func exactStats(data Data, c float64, k int, wantSq bool) (counts, sums, sq []int64, err error) {
	n, d := data.N, data.D
	w := workers(n, 256)
	type part struct{ counts, sums, sq []int64 }
	parts := make([]part, w)
	errs := make([]rowError, w)
	// Scale to grid units: x * 2^statBits / max(||x||, c), shrunk by 2^-30 so
	// that the rounding of the norm and of the product (relative d*2^-53 for
	// d <= MaxDim) cannot lift the quantised norm above 2^statBits.
	const shrink = 1 - 0x1p-30
	var wg sync.WaitGroup
	for t := 0; t < w; t++ {
		lo, hi := n*t/w, n*(t+1)/w
		wg.Add(1)
		go func(t, lo, hi int) {
			defer wg.Done()
			pc := make([]int64, k)
			ps := make([]int64, k*d)
			var pq []int64
			if wantSq {
				pq = make([]int64, k*d)
			}
			for i := lo; i < hi; i++ {
				lab := data.Labels[i]
				if lab < 0 || lab >= k {
					errs[t] = rowError{i, fmt.Errorf("dfs: row %d has label %d, outside [0, %d)", i, lab, k)}
					return
				}
				row := data.X[i*d : i*d+d]
				ss := sumSquares(row)
				if !(ss <= math.MaxFloat64) {
					errs[t] = rowError{i, fmt.Errorf("dfs: row %d holds a NaN or infinite value", i)}
					return
				}
				kappa := statScale * shrink / math.Max(math.Sqrt(ss), c)
				s := ps[lab*d : lab*d+d]
				if pq == nil {
					s = s[:len(row)]
					for j, v := range row {
						s[j] += int64(float64(v) * kappa)
					}
				} else {
					q := pq[lab*d : lab*d+d]
					s, q = s[:len(row)], q[:len(row)]
					for j, v := range row {
						x := int64(float64(v) * kappa)
						s[j] += x
						q[j] += (x * x) >> statBits
					}
				}
				pc[lab]++
			}
			parts[t] = part{pc, ps, pq}
		}(t, lo, hi)
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, nil, nil, err
	}
	counts, sums, sq = parts[0].counts, parts[0].sums, parts[0].sq
	for _, pt := range parts[1:] {
		for i, v := range pt.counts {
			counts[i] += v
		}
		for i, v := range pt.sums {
			sums[i] += v
		}
		for i, v := range pt.sq {
			sq[i] += v
		}
	}
	return counts, sums, sq, nil
}

// Apply returns the coordinates indices of x, in that order: dp_vec_select for
// new rows once a selection is public.
func Apply(x []float32, indices []int) ([]float32, error) {
	out := make([]float32, len(indices))
	for i, j := range indices {
		if j < 0 || j >= len(x) {
			return nil, fmt.Errorf("dfs: feature index %d outside [0, %d)", j, len(x))
		}
		out[i] = x[j]
	}
	return out, nil
}
