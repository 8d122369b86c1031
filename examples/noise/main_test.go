package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareSmall runs one row of the table and checks its ordering: the
// optimised noise is below truncated Laplace on both losses, truncated
// Laplace below Laplace, and the Gaussian E[noise^2] is sigma^2.
func TestCompareSmall(t *testing.T) {
	r, err := Compare(1, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.OptAbs < r.TLapAbs && r.TLapAbs < r.LapAbs) || !(r.OptSq < r.TLapSq && r.TLapSq < r.LapSq) {
		t.Errorf("row %+v out of order", r)
	}
	if r.LapAbs != 1 || r.LapSq != 2 {
		t.Errorf("Laplace at epsilon 1: %v, %v", r.LapAbs, r.LapSq)
	}
	var buf bytes.Buffer
	if err := run(&buf, []float64{2}, []float64{0.01}, ""); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[2], "| 2 | 0.01 |") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestFigureWritesPNG(t *testing.T) {
	dir := t.TempDir()
	f := figures()[1] // sensitivity 10, the smaller instance
	path := filepath.Join(dir, f.file)
	if err := f.draw(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Errorf("PNG: %d bytes, %v", len(b), err)
	}
}
