// Package synth draws the synthetic data of dpsql's tests and examples: a
// K-class Gaussian mixture in d dimensions whose class means form a simplex
// equiangular tight frame, the neural-collapse geometry of NeuroMixGDP (Li,
// Cao, Yao, "NeuroMixGDP: A Neural Collapse-Inspired Random Mixup for
// Private Data Release", arXiv:2202.06467). It is the one generator of that
// data: release/avgmix's utility test and examples/avgmix both draw from it.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// ETF is the mixture: class c has mean Means[c] = a sqrt(K/(K-1)) (e_c - 1/K)
// (norm a), rotated into R^d by a random orthonormal frame, and within-class
// noise N(0, S^2 I_d).
type ETF struct {
	Means [][]float64 // K rows of d
	S     float64
}

// NewETF draws the frame from r: K orthonormal rows in R^d (d >= K >= 2),
// by QR of a d x K Gaussian matrix.
func NewETF(r *rand.Rand, K, d int, a, s float64) (*ETF, error) {
	if K < 2 || d < K {
		return nil, fmt.Errorf("synth: need 2 <= K <= d, got K = %d, d = %d", K, d)
	}
	g := mat.NewDense(d, K, nil)
	for i := range d {
		for j := range K {
			g.Set(i, j, r.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	f := a * math.Sqrt(float64(K)/float64(K-1))
	e := &ETF{Means: make([][]float64, K), S: s}
	for c := range K {
		e.Means[c] = make([]float64, d)
		for j := range d {
			var v float64
			for l := range K {
				w := -1 / float64(K)
				if l == c {
					w++
				}
				v += w * q.At(j, l)
			}
			e.Means[c][j] = f * v
		}
	}
	return e, nil
}

// Draw returns n rows (row-major, n x d) and their classes, which cycle
// 0..K-1, with noise drawn from r row by row.
func (e *ETF) Draw(r *rand.Rand, n int) (x []float32, classes []int) {
	K, d := len(e.Means), len(e.Means[0])
	x = make([]float32, n*d)
	classes = make([]int, n)
	for i := range n {
		c := i % K
		classes[i] = c
		for j := range d {
			x[i*d+j] = float32(e.Means[c][j] + e.S*r.NormFloat64())
		}
	}
	return x, classes
}
