package dfs

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/dpsql/dpsql/release"
)

// releaseBlock is the number of rows one goroutine noises at a time, each
// block with its own split of the noise stream.
const releaseBlock = 1024

// ReleaseRows releases every row of data, restricted to the selected features
// sel.Indices (in that order), with Gaussian noise, and calls emit once per
// row, in row order. Each row's kept coordinates are first scaled to L2 norm
// below p.CRelease (p.C when 0); noise of scale sigma =
// [release.GaussianSigma](2 CRelease, MuRelease, M) is then added on the
// noise grid, so the release is MuRelease-GDP under replace-one neighbours
// (see [Params.ReleaseMechanisms] for the charge). With p.Labels =
// LabelsPrivate each label goes through K-ary randomized response: kept with
// probability at most e^eps/(e^eps+K-1), otherwise replaced by one of the
// other K-1 labels uniformly; with LabelsPublic it is emitted as is.
//
// The slice passed to emit is reused after emit returns. An error from emit
// stops the release and is returned. Every other error is returned before any
// noise is drawn or any row emitted.
func ReleaseRows(noise *release.Noise, data Data, sel Selection, p Params, emit func(i int, x []float32, label int) error) error {
	if err := data.check(); err != nil {
		return err
	}
	if err := p.checkRelease(); err != nil {
		return err
	}
	idx := sel.Indices
	if len(idx) != p.M {
		return fmt.Errorf("dfs: the selection holds %d features, but m = %d", len(idx), p.M)
	}
	seen := make(map[int]bool, len(idx))
	for _, j := range idx {
		if j < 0 || j >= data.D {
			return fmt.Errorf("dfs: selected feature %d outside [0, %d)", j, data.D)
		}
		if seen[j] {
			return fmt.Errorf("dfs: feature %d selected twice", j)
		}
		seen[j] = true
	}
	sigma, err := p.releaseSigma()
	if err != nil {
		return err
	}
	if err := checkRows(data, idx, p.Classes); err != nil {
		return err
	}
	threshold := uint64(0)
	if p.Labels == LabelsPrivate {
		threshold = keepThreshold(p.EpsLabels, p.Classes)
	}

	m, n := p.M, data.N
	nblocks := (n + releaseBlock - 1) / releaseBlock
	w := runtime.GOMAXPROCS(0)
	if w > nblocks {
		w = nblocks
	}
	type buffer struct {
		x      []float32
		labels []int
	}
	bufs := make([]buffer, w)
	for b := range bufs {
		bufs[b] = buffer{make([]float32, releaseBlock*m), make([]int, releaseBlock)}
	}
	cr := p.ReleaseBound()
	for first := 0; first < nblocks; first += w {
		nb := min(w, nblocks-first)
		noises := make([]*release.Noise, nb)
		for b := range noises {
			noises[b] = noise.Split()
		}
		var wg sync.WaitGroup
		for b := 0; b < nb; b++ {
			wg.Add(1)
			go func(b int) {
				defer wg.Done()
				lo := (first + b) * releaseBlock
				hi := min(lo+releaseBlock, n)
				fillBlock(noises[b], data, idx, cr, sigma, p.Labels == LabelsPrivate, threshold, p.Classes, lo, hi, bufs[b].x, bufs[b].labels)
			}(b)
		}
		wg.Wait()
		for b := 0; b < nb; b++ {
			lo := (first + b) * releaseBlock
			hi := min(lo+releaseBlock, n)
			for i := lo; i < hi; i++ {
				r := i - lo
				if err := emit(i, bufs[b].x[r*m:(r+1)*m:(r+1)*m], bufs[b].labels[r]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkRows validates labels and the kept features of every row.
func checkRows(data Data, idx []int, k int) error {
	d := data.D
	for i := 0; i < data.N; i++ {
		if lab := data.Labels[i]; lab < 0 || lab >= k {
			return fmt.Errorf("dfs: row %d has label %d, outside [0, %d)", i, lab, k)
		}
		row := data.X[i*d : i*d+d]
		for _, j := range idx {
			if v := float64(row[j]); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("dfs: row %d holds a NaN or infinite value in feature %d", i, j)
			}
		}
	}
	return nil
}

// keepThreshold returns T such that keeping a label when a uniform 53-bit
// integer is below T keeps it with probability T/2^53 <= e^eps/(e^eps+K-1).
// Lowering the keep probability only lowers the likelihood ratio
// keep/(1-keep)*(K-1), so the response stays eps-DP; the margin of 8 units
// covers the rounding of the floating-point probability.
func keepThreshold(eps float64, k int) uint64 {
	keep := 1 / (1 + float64(k-1)*math.Exp(-eps))
	t := math.Floor(keep*0x1p53) - 8
	if t < 0 {
		return 0
	}
	return uint64(t)
}

// fillBlock clips, gathers and noises rows [lo, hi) into x, and draws their labels.
func fillBlock(noise *release.Noise, data Data, idx []int, cr, sigma float64, private bool, threshold uint64, k, lo, hi int, x []float32, labels []int) {
	d, m := data.D, len(idx)
	for i := lo; i < hi; i++ {
		clipGather(x[(i-lo)*m:(i-lo+1)*m], data.X[i*d:i*d+d], idx, cr)
		lab := data.Labels[i]
		labels[i-lo] = lab
		if private {
			if noise.Rand().Uint64()>>11 >= threshold {
				o := noise.Rand().IntN(k - 1)
				if o >= lab {
					o++
				}
				labels[i-lo] = o
			}
		}
	}
	noise.AddGaussian32(x[:(hi-lo)*m], sigma)
}

// clipGather writes the coordinates idx of row to dst, scaled so that their
// L2 norm is below cr. The factor 1 - 2^-20 keeps the norm below cr despite
// the rounding of the norm, of the float64 product and of the float32 result
// (relative errors about 2^-53 (m+3) and 2^-24).
func clipGather(dst, row []float32, idx []int, cr float64) {
	const shrink = 1 - 0x1p-20
	var ss float64
	for _, j := range idx {
		v := float64(row[j])
		ss += v * v
	}
	kappa := shrink * cr / math.Max(math.Sqrt(ss), cr)
	for r, j := range idx {
		dst[r] = float32(float64(row[j]) * kappa)
	}
}
