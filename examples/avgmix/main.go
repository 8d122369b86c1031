// Command avgmix measures the utility of NeuroMixGDP releases (package
// release/avgmix; Li, Cao, Yao, arXiv:2202.06467) on real Fashion-MNIST: it releases T = n
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
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
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
