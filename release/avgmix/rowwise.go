package avgmix

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"

	"github.com/dpsql/dpsql/release"
)

// The row-at-a-time pieces of [Release], for an engine that sees one row at a
// time on many machines (dpsql-beam): clip a row ([Plan.ClipRow]), draw the
// outputs it joins ([Plan.SampleRow]), sum the clipped rows of each output
// exactly in float64 in any order, and finish each output's sums
// ([Plan.Finish]). Together they have exactly the law of Release: every
// (row, output) pair is included independently with probability Q (for
// hierarchical sampling, only the outputs that chose the row's class), the
// sums are exact, and the noise and the division by m are Release's own.
// They read only the Plan's exported fields, so a Plan that was copied or
// serialised (as JSON) and decoded again works the same.

// ClipRow clips the feature row x to L2 norm Cx and the label row y to Cy, in
// place, and quantises them as [Release] does.
func (pl *Plan) ClipRow(x, y []float32) error {
	if len(x) != pl.D || len(y) != pl.K {
		return fmt.Errorf("avgmix: a row has %d features and %d labels, the plan %d and %d", len(x), len(y), pl.D, pl.K)
	}
	if err := clipRows(x, pl.D, pl.Cx); err != nil {
		return fmt.Errorf("avgmix: features: %w", err)
	}
	if err := clipRows(y, pl.K, pl.Cy); err != nil {
		return fmt.Errorf("avgmix: labels: %w", err)
	}
	return nil
}

// ClassOf returns the class of a label row as hierarchical sampling sees it:
// the index of its largest coordinate, the first on ties. Call it on the
// clipped row, as [Release] does.
func ClassOf(y []float32) int { return classOf(y) }

// SampleRow calls emit(t) for each output t the row joins, in increasing
// order, each independently with probability Q. pool lists the candidate
// outputs in increasing order: nil means all of 0..T-1 (Poisson sampling);
// for hierarchical sampling pass ClassOutputs()[ClassOf(y)] for the row's
// clipped label y. r must be a secure stream, e.g. [release.Noise.Rand].
func (pl *Plan) SampleRow(r *mrand.Rand, pool []int32, emit func(t int)) {
	sk := newSkipper(pl.Q)
	if pool == nil {
		for pos := sk.next(r, -1, pl.T); pos < pl.T; pos = sk.next(r, pos, pl.T) {
			emit(pos)
		}
		return
	}
	n := len(pool)
	for pos := sk.next(r, -1, n); pos < n; pos = sk.next(r, pos, n) {
		emit(int(pool[pos]))
	}
}

// ClassOutputs returns, for each class k, the outputs that chose k in
// increasing order (hierarchical sampling; nil for Poisson). The choices are
// the data-independent draw NewPlan made; an engine passes them to its
// workers for [Plan.SampleRow].
func (pl *Plan) ClassOutputs() [][]int32 {
	if pl.Sampling != Hierarchical || len(pl.classes) != pl.T*pl.words {
		return nil
	}
	out := make([][]int32, pl.K)
	for k, c := range pl.ClassSteps {
		out[k] = make([]int32, 0, c)
	}
	for t := range pl.T {
		forEachClass(pl.classesOf(t), func(k int) { out[k] = append(out[k], int32(t)) })
	}
	return out
}

// Finish turns the exact sums of outputs (sx: n rows of D, sy: n rows of K,
// n >= 1) into released rows in out (n rows of D+K: features then labels):
// Gaussian noise of scale Cx*SigmaX on each feature sum and Cy*SigmaY on each
// label sum, drawn by [release.Noise.AddGaussian], then division by the fixed
// m. sx and sy are overwritten. An output no row joined has zero sums.
func (pl *Plan) Finish(noise *release.Noise, sx, sy []float64, out []float32) error {
	if noise == nil {
		return errors.New("avgmix: nil noise")
	}
	if pl.D < 1 || pl.K < 1 || pl.M < 1 {
		return errors.New("avgmix: plan: sizes out of range (use NewPlan)")
	}
	n := len(sx) / pl.D
	if n < 1 || len(sx) != n*pl.D || len(sy) != n*pl.K || len(out) != n*(pl.D+pl.K) {
		return fmt.Errorf("avgmix: Finish needs whole rows: %d feature sums, %d label sums and %d outputs for D = %d, K = %d", len(sx), len(sy), len(out), pl.D, pl.K)
	}
	if !(pl.noiseX() >= minNoise) || !(pl.noiseY() >= minNoise) || !finite(pl.noiseX()) || !finite(pl.noiseY()) {
		return errors.New("avgmix: plan: noise scales out of range")
	}
	pl.finish(noise, sx, sy, out)
	return nil
}

// finish adds the noise to the exact sums and divides by m; see Finish.
func (pl *Plan) finish(noise *release.Noise, sx, sy []float64, out []float32) {
	// The sums are exact; one row's sensitivities are Cx and Cy, and each
	// output has its own independent noise.
	noise.AddGaussian(sx, pl.noiseX())
	noise.AddGaussian(sy, pl.noiseY())
	D, K := pl.D, pl.K
	invM := 1 / float64(pl.M)
	for o := range len(sx) / D {
		dst := out[o*(D+K) : (o+1)*(D+K)]
		for j, v := range sx[o*D : (o+1)*D] {
			dst[j] = float32(v * invM)
		}
		for j, v := range sy[o*K : (o+1)*K] {
			dst[D+j] = float32(v * invM)
		}
	}
}
