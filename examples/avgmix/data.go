package main

// The data: Fashion-MNIST from its IDX files, or the synthetic mixture of
// internal/synth, and the public per-row preprocessing.

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/dpsql/dpsql/internal/synth"
	"gonum.org/v1/gonum/mat"

	"github.com/dpsql/dpsql/internal/idx"
)

// errNoData reports that the data directory does not exist.
var errNoData = errors.New("data directory not found")

// images is a set of labelled rows, row-major.
type images struct {
	x      []float32
	n, d   int
	labels []uint8
}

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
// drawn by internal/synth, as release/avgmix's utility test. Classes cycle 0..K-1.
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
