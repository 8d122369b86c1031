// Command avgmix measures the utility of NeuroMixGDP releases (package
// release/avgmix, seed paper 003) on real Fashion-MNIST: it releases T = n
// noisy averages of random subsets of the 60000 training images at several
// privacy budgets, trains a linear least-squares classifier on each release,
// and reports its accuracy on the 10000 test images, next to the same
// classifier trained on the (clipped) raw training set.
//
// # Data
//
// The four gzipped IDX files (train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
// t10k-labels-idx1-ubyte.gz) are read from -data
// (/usr/share/datasets/fashion-mnist by default); pixels are divided by 255.
// If the directory does not exist, or with -synthetic, the program uses
// generated data of the same shape instead and says so: a K = 10 Gaussian
// mixture whose class means form a simplex equiangular tight frame (the
// neural-collapse geometry of NeuroMixGDP (Li, Cao, Yao, arXiv:2202.06467)), as in release/avgmix's utility test.
//
// # Preprocessing
//
// Every image, training or test, goes through the same public, per-row map:
//
//  1. subtract the public constant -center (0.5 by default) from every pixel
//     (Fashion-MNIST only; the generated data are centred by construction).
//     The constant is fixed in advance; subtracting the data mean instead
//     would make every row depend on every other row, and the release's
//     sensitivity analysis would no longer hold;
//  2. optionally (-proj P > 0) multiply by a P x d Gaussian matrix with
//     N(0, 1/P) entries drawn from the public seed -projseed, before and
//     independently of the data. PCA or random features fitted to the
//     training set would leak and are not offered;
//  3. scale the row to L2 norm Cx (-rownorm, default on; otherwise clip it
//     to norm Cx as Algorithm 1 does). Centred Fashion-MNIST rows have
//     norms of several units, so with Cx = 1 clipping would rescale almost
//     every row anyway; scaling all of them keeps the rows comparable.
//
// Each step is a fixed function of one row, so a neighbouring data set
// (one row added or removed) still differs in one preprocessed row of norm
// at most Cx, which is what the plan's accounting assumes. Labels are
// one-hot, so their norm is Cy = 1.
//
// # Release and accounting
//
// For each mu in -mus, the budget is quoted as (epsilon, delta) with
// epsilon = accountant.Epsilon(mu, delta) (the epsilon of mu-GDP), and the
// plan's noise is calibrated to it by the rigorous PLD accountant,
// accountant.CalibrateSubsampledSigma. Each budget is released twice: with
// the paper's m* (avgmix.DefaultM, about 124 mu for n = T = 60000) and, for
// comparison, with the fixed -m (64 by default; -m 0 skips it). The table
// reports the rigorous epsilon of the plan's Mechanism at delta
// (accountant.RigorousEpsilon; it is at most the target, up to the
// calibration's tolerance) and its central-limit mu (Plan.CLTMu), which is
// informative only.
//
// The noise is seeded (-seed s: the m* release at the i-th budget uses
// release.NewSeededNoise(s*65536 + 2i), the fixed-m one s*65536 + 2i + 1, so
// that different -seed values never share a stream and -m does not change
// the m* rows) so that the table is reproducible. Seeded noise exists only in
// builds tagged dpsql_testseed (go run -tags dpsql_testseed ./examples/avgmix);
// without the tag -seed still seeds generated data, and the noise comes from
// crypto/rand.
// Seeded noise is a test hook: with it the output is an experiment, not a
// private release. -seed 0 draws the noise from crypto/rand
// (release.NewNoise).
//
// # Classifier
//
// Ridge regression of the (noisy) labels on the (noisy) features with a
// bias column, solved by the normal equations and a Cholesky factorisation;
// the ridge is -ridge times the mean diagonal of the feature Gram matrix
// (the bias is not penalised). The prediction is the argmax of the K scores.
// Training on a release is post-processing and costs no budget.
//
// Usage:
//
//	go run ./examples/avgmix
//	go run ./examples/avgmix -mus 1,8 -m 64 -seed 7
package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dpsql/dpsql/internal/synth"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/mat"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/internal/idx"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

// numClasses is K, for Fashion-MNIST and for the generated mixture.
const numClasses = 10

// options configures one run.
type options struct {
	DataDir   string    // directory of the IDX files
	Synthetic bool      // use generated data even if DataDir exists
	Mus       []float64 // GDP budgets
	FixedM    int       // if > 0, also release with this m
	Delta     float64   // delta of the epsilon column and of the calibration
	Seed      uint64    // noise seed (0: crypto noise); data seed of generated data
	Cx, Cy    float64   // clip bounds
	Center    float64   // public constant subtracted from every pixel (IDX data)
	RowNorm   bool      // scale each row to norm Cx (else clip to Cx)
	Proj      int       // > 0: public random projection to this dimension
	ProjSeed  uint64    // seed of the projection matrix
	Ridge     float64   // ridge, relative to the mean diagonal of the feature Gram matrix

	// Shape of the generated data.
	GenN, GenTest, GenD int
}

func defaultOptions() options {
	return options{
		DataDir:  "/usr/share/datasets/fashion-mnist",
		Mus:      []float64{0.5, 1, 2, 4, 8},
		Delta:    1e-5,
		FixedM:   64,
		Seed:     1,
		Cx:       1,
		Cy:       1,
		Center:   0.5,
		RowNorm:  true,
		ProjSeed: 20240611,
		Ridge:    1e-3,
		GenN:     60000,
		GenTest:  10000,
		GenD:     784,
	}
}

func main() {
	log.SetFlags(0)
	o := defaultOptions()
	flag.StringVar(&o.DataDir, "data", o.DataDir, "directory of the gzipped Fashion-MNIST IDX files")
	flag.BoolVar(&o.Synthetic, "synthetic", false, "use generated data of the same shape even if -data exists")
	musFlag := flag.String("mus", formatFloats(o.Mus), "comma-separated GDP budgets mu")
	flag.IntVar(&o.FixedM, "m", o.FixedM, "also release with this fixed mixup degree (0: only the default m*)")
	flag.Float64Var(&o.Delta, "delta", o.Delta, "delta of the (epsilon, delta) budget")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "noise seed: the m* release at the i-th budget uses seed*65536+2i, the fixed-m one seed*65536+2i+1 (0: crypto/rand noise); also seeds generated data")
	flag.Float64Var(&o.Cx, "cx", o.Cx, "L2 clip bound of feature rows")
	flag.Float64Var(&o.Cy, "cy", o.Cy, "L2 clip bound of label rows")
	flag.Float64Var(&o.Center, "center", o.Center, "public constant subtracted from every pixel (Fashion-MNIST only)")
	flag.BoolVar(&o.RowNorm, "rownorm", o.RowNorm, "scale every feature row to norm cx (false: clip to cx)")
	flag.IntVar(&o.Proj, "proj", 0, "project features to this dimension by a public seeded Gaussian matrix (0: none)")
	flag.Uint64Var(&o.ProjSeed, "projseed", o.ProjSeed, "seed of the public projection matrix")
	flag.Float64Var(&o.Ridge, "ridge", o.Ridge, "ridge penalty relative to the mean diagonal of the Gram matrix")
	flag.IntVar(&o.GenN, "gen-n", o.GenN, "training rows of the generated data")
	flag.IntVar(&o.GenTest, "gen-test", o.GenTest, "test rows of the generated data")
	flag.IntVar(&o.GenD, "gen-d", o.GenD, "dimension of the generated data")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("unexpected arguments %q", flag.Args())
	}
	var err error
	if o.Mus, err = parseFloats(*musFlag); err != nil {
		log.Fatalf("-mus: %v", err)
	}
	start := time.Now()
	rep, err := run(o, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	rep.write(os.Stdout, o)
	fmt.Printf("\ncommand: %s\n", commandLine())
	fmt.Printf("wall time: %.1f s (%d cores)\n", time.Since(start).Seconds(), numCPU())
}

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

// report is the outcome of a run.
type report struct {
	Source     string // description of the data
	N, NTest   int
	DIn, D     int // input and preprocessed feature dimensions
	RawAcc     float64
	RawSeconds float64
	Results    []result
	Prep       string
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
	rig, err := accountant.RigorousEpsilon([]accountant.Mechanism{plan.Mechanism}, o.Delta)
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

// images is a set of labelled rows, row-major.
type images struct {
	x      []float32
	n, d   int
	labels []uint8
}

// errNoData reports that the data directory does not exist.
var errNoData = errors.New("data directory not found")

// loadFashion reads the four gzipped IDX files from dir. If dir does not
// exist the error wraps errNoData; a missing file in an existing directory
// is an ordinary error.
func loadFashion(dir string) (train, test *images, err error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: %s", errNoData, dir)
	} else if err != nil {
		return nil, nil, err
	}
	load := func(img, lab string) (*images, error) {
		x, n, d, err := readIDXImages(filepath.Join(dir, img))
		if err != nil {
			return nil, err
		}
		labels, err := readIDXLabels(filepath.Join(dir, lab))
		if err != nil {
			return nil, err
		}
		if len(labels) != n {
			return nil, fmt.Errorf("%s has %d images but %s has %d labels", img, n, lab, len(labels))
		}
		for i, l := range labels {
			if int(l) >= numClasses {
				return nil, fmt.Errorf("%s: label %d of row %d is not below %d", lab, l, i, numClasses)
			}
		}
		return &images{x: x, n: n, d: d, labels: labels}, nil
	}
	if train, err = load("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"); err != nil {
		return nil, nil, err
	}
	if test, err = load("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"); err != nil {
		return nil, nil, err
	}
	if train.d != test.d {
		return nil, nil, fmt.Errorf("training images have %d pixels, test images %d", train.d, test.d)
	}
	return train, test, nil
}

// openIDX opens a gzipped IDX file and reads its header.
func openIDX(path string) (*idx.Reader, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	z, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	r, err := idx.NewReader(z, -1)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, f.Close, nil
}

// readIDXImages reads an IDX3 file of unsigned bytes (magic 0x00000803) and
// returns its pixels divided by 255.
func readIDXImages(path string) (x []float32, n, d int, err error) {
	r, closeFn, err := openIDX(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer closeFn()
	dims := r.Dims()
	if len(dims) != 3 {
		return nil, 0, 0, fmt.Errorf("%s: %d dimensions, want 3 (magic 0x00000803)", path, len(dims))
	}
	n, d = r.Rows(), r.Dim()
	if n < 1 || n > 1<<24 || d > 1<<20 {
		return nil, 0, 0, fmt.Errorf("%s: implausible shape %d x %d x %d", path, dims[0], dims[1], dims[2])
	}
	x = make([]float32, n*d)
	for i := range n {
		if err := r.ReadRow(x[i*d:(i+1)*d], 1.0/255); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	return x, n, d, nil
}

// readIDXLabels reads an IDX1 file of unsigned bytes (magic 0x00000801).
func readIDXLabels(path string) ([]uint8, error) {
	r, closeFn, err := openIDX(path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	if n := r.Rows(); n < 1 || n > 1<<24 {
		return nil, fmt.Errorf("%s: implausible count %d", path, n)
	}
	all, err := r.ReadLabels()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	labels := make([]uint8, len(all))
	for i, l := range all {
		labels[i] = uint8(l)
	}
	return labels, nil
}

// generate draws a training and a test set from a K-class Gaussian mixture
// in d dimensions with simplex-ETF class means of norm 0.5 (rotated into R^d
// by a random orthonormal frame) and N(0, 0.15^2 I_d) within-class noise,
// the mixture of release/avgmix's utility test. Classes cycle 0..K-1.
func generate(n, nTest, d int, seed uint64) (train, test *images, err error) {
	r := rand.New(rand.NewPCG(seed, 0xfa5))
	mix, err := synth.NewETF(r, numClasses, d, 0.5, 0.15)
	if err != nil {
		return nil, nil, err
	}
	draw := func(n int) *images {
		x, classes := mix.Draw(r, n)
		im := &images{x: x, n: n, d: d, labels: make([]uint8, n)}
		for i, c := range classes {
			im.labels[i] = uint8(c)
		}
		return im
	}
	return draw(n), draw(nTest), nil
}

// projection returns a p x d matrix of N(0, 1/p) entries drawn from seed
// alone: data-independent and public.
func projection(p, d int, seed uint64) *mat.Dense {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	pm := mat.NewDense(p, d, nil)
	s := 1 / math.Sqrt(float64(p))
	for i := range p {
		for j := range d {
			pm.Set(i, j, s*r.NormFloat64())
		}
	}
	return pm
}

// preprocess applies the public per-row map of the package documentation:
// subtract center, project (if proj is not nil), then scale the row to norm
// cx (rowNorm) or clip it to cx. It returns the rows and their dimension.
func preprocess(im *images, center float64, proj *mat.Dense, cx float64, rowNorm bool) ([]float32, int) {
	d := im.d
	out := im.x
	if proj != nil {
		d, _ = proj.Dims()
	}
	res := make([]float32, im.n*d)
	parallelRows(im.n, func(lo, hi int) {
		in := make([]float64, im.d)
		row := make([]float64, d)
		for i := lo; i < hi; i++ {
			for j, v := range out[i*im.d : (i+1)*im.d] {
				in[j] = float64(v) - center
			}
			if proj != nil {
				mat.NewVecDense(d, row).MulVec(proj, mat.NewVecDense(im.d, in))
			} else {
				copy(row, in)
			}
			var ss float64
			for _, v := range row {
				ss += v * v
			}
			norm := math.Sqrt(ss)
			scale := 1.0
			if norm > 0 && (rowNorm || norm > cx) {
				scale = cx / norm
			}
			dst := res[i*d : (i+1)*d]
			for j, v := range row {
				dst[j] = float32(v * scale)
			}
		}
	})
	return res, d
}

func describePrep(center float64, o options, d int) string {
	var b strings.Builder
	if center != 0 {
		fmt.Fprintf(&b, "subtract the public constant %g from every pixel; ", center)
	}
	if o.Proj > 0 {
		fmt.Fprintf(&b, "project %d -> %d by a public Gaussian matrix (seed %d); ", d, o.Proj, o.ProjSeed)
	}
	if o.RowNorm {
		fmt.Fprintf(&b, "scale each row to L2 norm Cx = %g", o.Cx)
	} else {
		fmt.Fprintf(&b, "clip each row to L2 norm Cx = %g", o.Cx)
	}
	b.WriteString(" (the same per-row map on test rows; no statistic of the data is used)")
	return b.String()
}

// oneHot returns the one-hot label rows.
func oneHot(labels []uint8) []float32 {
	y := make([]float32, len(labels)*numClasses)
	for i, l := range labels {
		y[i*numClasses+int(l)] = 1
	}
	return y
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

// write prints the report as markdown.
func (rep *report) write(w io.Writer, o options) {
	fmt.Fprintf(w, "# NeuroMixGDP (avgmix) utility: linear classifier trained on the release\n\n")
	fmt.Fprintf(w, "- data: %s; n = T = %d training rows, %d test rows, d = %d", rep.Source, rep.N, rep.NTest, rep.DIn)
	if rep.D != rep.DIn {
		fmt.Fprintf(w, " (%d after projection)", rep.D)
	}
	fmt.Fprintf(w, ", K = %d\n", numClasses)
	fmt.Fprintf(w, "- preprocessing: %s\n", rep.Prep)
	fmt.Fprintf(w, "- release: Poisson sampling, Cx = %g, Cy = %g, lambda = 1; noise calibrated by accountant.CalibrateSubsampledSigma to (epsilon, %g)-DP, epsilon = accountant.Epsilon(mu, %g); m = m* (avgmix.DefaultM)", o.Cx, o.Cy, o.Delta, o.Delta)
	if o.FixedM > 0 {
		fmt.Fprintf(w, " and m = %d", o.FixedM)
	}
	fmt.Fprintln(w)
	if o.Seed != 0 {
		fmt.Fprintf(w, "- noise: seed %d, %s\n", o.Seed, noiseNote)
	} else {
		fmt.Fprintf(w, "- noise: crypto/rand (release.NewNoise)\n")
	}
	fmt.Fprintf(w, "- classifier: least squares x -> one-hot y with a bias column, ridge %g x mean Gram diagonal, argmax of the scores\n\n", o.Ridge)
	fmt.Fprintf(w, "| mu | epsilon (delta=%g) | rigorous epsilon | CLT mu | m | sigma | test accuracy |\n", o.Delta)
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Results {
		rule := "m*"
		if r.Fixed {
			rule = "fixed"
		}
		fmt.Fprintf(w, "| %g | %.3f | %.3f | %.3f | %d (%s) | %.4f | %.4f |\n",
			r.Mu, r.Epsilon, r.RigorousEps, r.CLTMu, r.M, rule, r.Sigma, r.Accuracy)
	}
	fmt.Fprintf(w, "| raw (non-private) | - | - | - | - | - | %.4f |\n", rep.RawAcc)
	fmt.Fprintf(w, "\nsigma is the effective noise multiplier of one step (sigma_x = sigma_y = sigma sqrt 2 up to the grid slack); the noise on an output's average is Cx sigma_x / m per feature coordinate.\n")
	fmt.Fprintf(w, "seconds per row (plan + calibration + release + fit + test):")
	for _, r := range rep.Results {
		fmt.Fprintf(w, " %.1f", r.Seconds)
	}
	fmt.Fprintf(w, "; raw fit %.1f\n", rep.RawSeconds)
}

// commandLine reconstructs the command, quoting arguments for a POSIX shell.
func commandLine() string {
	parts := []string{"go run ./examples/avgmix"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// formatFloats writes xs as parseFloats reads them.
func formatFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("budget %v is not a positive finite number", v)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no budgets")
	}
	return out, nil
}
