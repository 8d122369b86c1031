package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPipelineGenerated runs the whole pipeline (generated data, rigorous
// calibration, release, least squares, test accuracy) at reduced size: n = T
// = 3000 rows of d = 64 from the simplex-ETF mixture, 1000 test rows.
func TestPipelineGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: four releases and classifiers (about 20 s); release/avgmix tests the mechanism in -short")
	}
	start := time.Now()
	o := defaultOptions()
	o.Synthetic = true
	o.GenN, o.GenTest, o.GenD = 3000, 1000, 64
	o.Mus = []float64{0.5, 8}
	o.FixedM = 16
	rep, err := run(o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 {
		t.Fatalf("got %d results, want 4", len(rep.Results))
	}
	for _, r := range rep.Results {
		t.Logf("mu %v: epsilon %.3f (rigorous %.3f), CLT mu %.3f, m %d, sigma %.4f, accuracy %.4f",
			r.Mu, r.Epsilon, r.RigorousEps, r.CLTMu, r.M, r.Sigma, r.Accuracy)
		// The rigorous epsilon of the charged mechanism stays at the target
		// (the calibration's tolerance is a relative 1e-4 on sigma).
		if !(r.RigorousEps <= r.Epsilon*1.001) {
			t.Errorf("mu %v, m %d: rigorous epsilon %v above the target %v", r.Mu, r.M, r.RigorousEps, r.Epsilon)
		}
	}
	t.Logf("raw accuracy %.4f; took %v", rep.RawAcc, time.Since(start))
	low, high := rep.Results[0], rep.Results[2] // m* at mu = 0.5 and mu = 8
	if low.Mu != 0.5 || high.Mu != 8 || low.Fixed || high.Fixed {
		t.Fatalf("unexpected result order: %+v", rep.Results)
	}
	if rep.RawAcc < 0.9 {
		t.Errorf("raw accuracy %.4f, want at least 0.9", rep.RawAcc)
	}
	// Over seeds 1-10 raw accuracy ran 0.950-0.961, mu = 8 0.941-0.953 and
	// mu = 0.5 0.870-0.905; the bounds leave room.
	if high.Accuracy < rep.RawAcc-0.05 {
		t.Errorf("mu = 8: accuracy %.4f, more than 0.05 below raw %.4f", high.Accuracy, rep.RawAcc)
	}
	chance := 1.0 / numClasses
	if low.Accuracy < chance+0.2 {
		t.Errorf("mu = 0.5: accuracy %.4f, not clearly above chance %.2f", low.Accuracy, chance)
	}
	if low.Accuracy > high.Accuracy+0.03 {
		t.Errorf("mu = 0.5 (%.4f) clearly beats mu = 8 (%.4f)", low.Accuracy, high.Accuracy)
	}
}

// writeGz writes the big-endian header words and the bytes, gzipped.
func writeGz(t *testing.T, path string, hdr []uint32, body []byte) {
	t.Helper()
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	if err := binary.Write(z, binary.BigEndian, hdr); err != nil {
		t.Fatal(err)
	}
	if _, err := z.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadFashion reads tiny IDX files in the Fashion-MNIST layout, and
// checks that a missing directory is reported as such (the fallback to
// generated data) and a bad magic number as an error.
func TestLoadFashion(t *testing.T) {
	dir := t.TempDir()
	writeGz(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"), []uint32{0x803, 3, 2, 2}, []byte{0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8})
	writeGz(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), []uint32{0x801, 3}, []byte{9, 0, 4})
	writeGz(t, filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), []uint32{0x803, 1, 2, 2}, []byte{255, 255, 0, 0})
	writeGz(t, filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), []uint32{0x801, 1}, []byte{7})
	train, test, err := loadFashion(dir)
	if err != nil {
		t.Fatal(err)
	}
	if train.n != 3 || train.d != 4 || test.n != 1 || test.d != 4 {
		t.Fatalf("shapes %dx%d and %dx%d", train.n, train.d, test.n, test.d)
	}
	if train.x[1] != 1 || train.x[2] != 0.2 || train.labels[0] != 9 || test.labels[0] != 7 {
		t.Errorf("values: %v %v %v", train.x[:4], train.labels, test.labels)
	}

	if _, _, err := loadFashion(filepath.Join(dir, "absent")); !errors.Is(err, errNoData) {
		t.Errorf("missing directory: %v, want errNoData", err)
	}
	writeGz(t, filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), []uint32{0x803, 1}, []byte{7})
	if _, _, err := loadFashion(dir); err == nil || errors.Is(err, errNoData) {
		t.Errorf("bad magic: %v, want an error other than errNoData", err)
	}
	if err := os.Remove(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadFashion(dir); err == nil || errors.Is(err, errNoData) {
		t.Errorf("missing file: %v, want an error other than errNoData", err)
	}
}

// TestMusDefault checks that the -mus default, written from the options,
// parses back to them.
func TestMusDefault(t *testing.T) {
	want := defaultOptions().Mus
	got, err := parseFloats(formatFloats(want))
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("parseFloats(%q) = %v, %v; want %v", formatFloats(want), got, err, want)
	}
}
