package main

// The experiment: releases at each budget, the classifier trained on them,
// and its accuracy.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/mat"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

// result is one row of the table.
type result struct {
	Mu, Epsilon    float64 // budget and its epsilon at delta
	RigorousEps    float64 // rigorous epsilon of the plan's mechanism at delta
	CLTMu          float64
	M              int
	Sigma          float64 // effective noise multiplier of one step
	SigmaX, SigmaY float64
	Accuracy       float64
	Seconds        float64 // plan, release, fit and test
	Fixed          bool    // m was fixed by -m, not m*
	Phases         string  // timing breakdown
}

// run loads and preprocesses the data, and evaluates the raw baseline and
// every release. Progress goes to logw.
func run(o options, logw io.Writer) (*report, error) {
	if len(o.Mus) == 0 || len(o.Mus) > 1<<15 {
		return nil, fmt.Errorf("between 1 and %d budgets needed, got %d", 1<<15, len(o.Mus))
	}
	if !(o.Cx > 0) || !(o.Cy > 0) {
		return nil, errors.New("cx and cy must be positive")
	}
	rep := &report{}
	var train, test *images
	var err error
	if o.Synthetic {
		rep.Source = "GENERATED data (-synthetic): "
	} else {
		train, test, err = loadFashion(o.DataDir)
		switch {
		case errors.Is(err, errNoData):
			fmt.Fprintf(logw, "data directory %s not found: using generated data of the same shape\n", o.DataDir)
			rep.Source = fmt.Sprintf("GENERATED data (%s not found): ", o.DataDir)
		case err != nil:
			return nil, err
		default:
			rep.Source = "Fashion-MNIST from " + o.DataDir
		}
	}
	center := o.Center
	if train == nil {
		if train, test, err = generate(o.GenN, o.GenTest, o.GenD, o.Seed); err != nil {
			return nil, err
		}
		rep.Source += fmt.Sprintf("K = %d Gaussian mixture with simplex-ETF class means (as release/avgmix's utility test)", numClasses)
		center = 0 // centred by construction
	}
	rep.N, rep.NTest, rep.DIn = train.n, test.n, train.d

	var proj *mat.Dense
	if o.Proj > 0 {
		proj = projection(o.Proj, train.d, o.ProjSeed)
	}
	t0 := time.Now()
	xTrain, d := preprocess(train, center, proj, o.Cx, o.RowNorm)
	xTest, _ := preprocess(test, center, proj, o.Cx, o.RowNorm)
	yTrain := oneHot(train.labels)
	rep.D = d
	rep.Prep = describePrep(center, o, train.d)
	fmt.Fprintf(logw, "%s: %d train, %d test, d = %d -> %d; preprocessed in %.1f s\n",
		rep.Source, train.n, test.n, train.d, d, time.Since(t0).Seconds())

	// Non-private baseline on the clipped, preprocessed training rows.
	t0 = time.Now()
	w, err := fitRidge(xTrain, yTrain, train.n, d, numClasses, o.Ridge)
	if err != nil {
		return nil, fmt.Errorf("raw fit: %w", err)
	}
	rep.RawAcc = accuracy(w, xTest, test.labels, d)
	rep.RawSeconds = time.Since(t0).Seconds()
	fmt.Fprintf(logw, "raw: accuracy %.4f (%.1f s)\n", rep.RawAcc, rep.RawSeconds)

	// Release 2i uses m* at the i-th budget, release 2i+1 the fixed m, so
	// that -m does not change the noise of the m* releases.
	type job struct {
		mu    float64
		m     int
		index int
	}
	var jobs []job
	for i, mu := range o.Mus {
		jobs = append(jobs, job{mu, 0, 2 * i})
		if o.FixedM > 0 {
			jobs = append(jobs, job{mu, o.FixedM, 2*i + 1})
		}
	}
	xWork := make([]float32, len(xTrain))
	yWork := make([]float32, len(yTrain))
	for _, jb := range jobs {
		t0 = time.Now()
		r, err := evaluate(o, jb.mu, jb.m, jb.index, xTrain, yTrain, xWork, yWork, train.n, d, xTest, test.labels)
		if err != nil {
			return nil, fmt.Errorf("mu = %v, m = %d: %w", jb.mu, jb.m, err)
		}
		r.Seconds = time.Since(t0).Seconds()
		r.Fixed = jb.m > 0
		rep.Results = append(rep.Results, r)
		fmt.Fprintf(logw, "mu = %v: m = %d, sigma = %.4f, accuracy %.4f (%.1f s: %s)\n", r.Mu, r.M, r.Sigma, r.Accuracy, r.Seconds, r.Phases)
	}
	return rep, nil
}

// evaluate plans, releases and scores one release. xWork and yWork are
// scratch copies of the training data (Release clips them in place).
func evaluate(o options, mu float64, m, index int, xTrain, yTrain, xWork, yWork []float32, n, d int, xTest []float32, testLabels []uint8) (result, error) {
	t0 := time.Now()
	eps, err := accountant.Epsilon(mu, o.Delta)
	if err != nil {
		return result{}, err
	}
	plan, err := avgmix.NewPlan(nil, n, d, numClasses, avgmix.Params{
		T: n, M: m, Mu: mu, Cx: o.Cx, Cy: o.Cy,
		Calibrate: func(q float64, steps int) (float64, error) {
			return accountant.CalibrateSubsampledSigma(q, steps, eps, o.Delta)
		},
	})
	if err != nil {
		return result{}, err
	}
	rig, err := accountant.RigorousEpsilon([]mechanism.Mechanism{plan.Mechanism}, o.Delta)
	if err != nil {
		return result{}, err
	}
	tPlan := time.Now()
	noise := release.NewNoise()
	if o.Seed != 0 {
		noise = seededNoise(o.Seed<<16 + uint64(index))
	}
	copy(xWork, xTrain)
	copy(yWork, yTrain)
	data := avgmix.Data{X: xWork, D: d, Y: yWork, K: numClasses, N: n}
	// Collect the release: T rows of d features and K labels.
	relX := make([]float32, plan.T*d)
	relY := make([]float32, plan.T*numClasses)
	err = avgmix.Release(noise, data, plan, func(i int, x, y []float32) error {
		copy(relX[i*d:], x)
		copy(relY[i*numClasses:], y)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	tRel := time.Now()
	w, err := fitRidge(relX, relY, plan.T, d, numClasses, o.Ridge)
	if err != nil {
		return result{}, err
	}
	tFit := time.Now()
	return result{
		Mu: mu, Epsilon: eps, RigorousEps: rig, CLTMu: plan.CLTMu,
		M: plan.M, Sigma: plan.Sigma, SigmaX: plan.SigmaX, SigmaY: plan.SigmaY,
		Accuracy: accuracy(w, xTest, testLabels, d),
		Phases: fmt.Sprintf("plan and accounting %.1f s, release %.1f s, fit %.1f s, test %.1f s",
			tPlan.Sub(t0).Seconds(), tRel.Sub(tPlan).Seconds(), tFit.Sub(tRel).Seconds(), time.Since(tFit).Seconds()),
	}, nil
}

// numCPU is the number of goroutines used for row-parallel loops.
func numCPU() int { return max(1, runtime.GOMAXPROCS(0)) }

// parallelRows splits [0, n) into numCPU ranges and runs f on each.
func parallelRows(n int, f func(lo, hi int)) {
	w := numCPU()
	per := (n + w - 1) / w
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := min(k*per, n), min((k+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// gramBlock is the number of rows per float32 block product in fitRidge.
const gramBlock = 4096

// fitRidge returns W ((d+1) x K, last row the intercept) minimising
// ||[X 1] W - Y||^2 + lambda ||W_features||^2 with
// lambda = ridge * trace(X^T X)/d, by the normal equations. The Gram matrix
// [X 1]^T [X 1] and [X 1]^T Y are formed block by block: each block of
// gramBlock rows by a float32 matrix product (gonum's Sgemm, about 2.5 times
// as fast as Dgemm here), the blocks summed in float64.
func fitRidge(x, y []float32, n, d, K int, ridge float64) (*mat.Dense, error) {
	p := d + 1
	gram := make([]float64, p*p)
	xty := make([]float64, p*K)
	B := min(gramBlock, n)
	at := blas32.General{Rows: p, Cols: B, Stride: B, Data: make([]float32, p*B)}
	yb := blas32.General{Rows: B, Cols: K, Stride: K, Data: make([]float32, B*K)}
	g32 := blas32.General{Rows: p, Cols: p, Stride: p, Data: make([]float32, p*p)}
	c32 := blas32.General{Rows: p, Cols: K, Stride: K, Data: make([]float32, p*K)}
	for lo := 0; lo < n; lo += B {
		rows := min(B, n-lo)
		// The block's [X 1]^T, p x rows, and its Y, rows x K.
		a := blas32.General{Rows: p, Cols: rows, Stride: B, Data: at.Data}
		parallelRows(p, func(jlo, jhi int) {
			for j := jlo; j < jhi; j++ {
				dst := at.Data[j*B : j*B+rows]
				if j == d {
					for i := range dst {
						dst[i] = 1
					}
					continue
				}
				for i := range dst {
					dst[i] = x[(lo+i)*d+j]
				}
			}
		})
		ybl := blas32.General{Rows: rows, Cols: K, Stride: K, Data: yb.Data[:rows*K]}
		copy(ybl.Data, y[lo*K:(lo+rows)*K])
		blas32.Gemm(blas.NoTrans, blas.Trans, 1, a, a, 0, g32)
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, a, ybl, 0, c32)
		for i, v := range g32.Data {
			gram[i] += float64(v)
		}
		for i, v := range c32.Data {
			xty[i] += float64(v)
		}
	}
	var tr float64
	for j := range d {
		tr += gram[j*p+j]
	}
	lambda := ridge * tr / float64(d)
	sym := mat.NewSymDense(p, nil)
	for i := range p {
		for j := i; j < p; j++ {
			sym.SetSym(i, j, gram[i*p+j])
		}
		if i < d {
			sym.SetSym(i, i, gram[i*p+i]+lambda)
		}
	}
	var ch mat.Cholesky
	if ok := ch.Factorize(sym); !ok {
		return nil, errors.New("normal equations are not positive definite (raise -ridge)")
	}
	var w mat.Dense
	if err := ch.SolveTo(&w, mat.NewDense(p, K, xty)); err != nil {
		return nil, err
	}
	return &w, nil
}

// accuracy is the fraction of test rows whose argmax score x W + b is their
// label.
func accuracy(w *mat.Dense, x []float32, labels []uint8, d int) float64 {
	n := len(labels)
	xd := mat.NewDense(n, d, nil)
	for i, v := range x {
		xd.RawMatrix().Data[i] = float64(v)
	}
	var s mat.Dense
	s.Mul(xd, w.Slice(0, d, 0, numClasses))
	right := 0
	for i := range n {
		best, bestV := 0, math.Inf(-1)
		for c := range numClasses {
			if v := s.At(i, c) + w.At(d, c); v > bestV {
				best, bestV = c, v
			}
		}
		if best == int(labels[i]) {
			right++
		}
	}
	return float64(right) / float64(n)
}
