package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/release/avgmix"
)

// TestSumsCoder: sums round-trip exactly in either encoding, and sums of
// quantised rows take the compact one.
func TestSumsCoder(t *testing.T) {
	quantised := make([]float64, 794)
	for i := range quantised {
		quantised[i] = math.Ldexp(float64(i*7919%(1<<22)), -23) * float64(1+i%40) // sums of up to 40 values on 2^-23
	}
	for _, tc := range []struct {
		name   string
		v      []float64
		scaled bool
	}{
		{"empty", nil, false},
		{"zeros", make([]float64, 5), true},
		{"mixed", []float64{1, -2.5, 0x1p-40, 0}, true},
		{"quantised", quantised, true},
		{"subnormal", []float64{5e-324, -1e-310}, true},
		{"wide range", []float64{0x1p-40, 0x1p40}, false},
		{"infinite", []float64{1, math.Inf(1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeSums(Sums{V: tc.v})
			got, err := decodeSums(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.V) != len(tc.v) {
				t.Fatalf("%d values back for %d", len(got.V), len(tc.v))
			}
			for i := range tc.v {
				if math.Float64bits(got.V[i]) != math.Float64bits(tc.v[i]) {
					t.Fatalf("value %d: %v back for %v", i, got.V[i], tc.v[i])
				}
			}
			if len(b) > 0 && (b[0] == sumsScaled) != tc.scaled {
				t.Fatalf("encoding %d", b[0])
			}
			if tc.name == "quantised" && len(b) > 5*len(tc.v) {
				t.Fatalf("%d bytes for %d quantised sums", len(b), len(tc.v))
			}
		})
	}
	for _, bad := range [][]byte{{sumsRaw, 1, 2, 3}, {sumsScaled, 0x80}, {sumsScaled, 0, 0x80}, {7}} {
		if _, err := decodeSums(bad); err == nil {
			t.Fatalf("decoded % x", bad)
		}
	}
}

// FuzzDecodeSums: no input makes the decoder panic, and what it accepts
// re-encodes to the same values.
func FuzzDecodeSums(f *testing.F) {
	f.Add(encodeSums(Sums{V: []float64{1, 0.5}}))
	f.Add(encodeSums(Sums{V: []float64{0x1p-40, 0x1p40}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSums(b)
		if err != nil {
			return
		}
		back, err := decodeSums(encodeSums(s))
		if err != nil || len(back.V) != len(s.V) {
			t.Fatalf("re-encoding failed: %v", err)
		}
		for i := range s.V {
			if math.Float64bits(back.V[i]) != math.Float64bits(s.V[i]) && !math.IsNaN(s.V[i]) {
				t.Fatalf("value %d: %v became %v", i, s.V[i], back.V[i])
			}
		}
	})
}

func TestSumFnMerges(t *testing.T) {
	f := &sumFn{}
	must := func(s Sums, err error) Sums {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in := []float64{1, 2}
	a := must(f.MergeAccumulators(Sums{}, Sums{V: in}))
	b := must(f.MergeAccumulators(a, Sums{V: []float64{0.5, -2}}))
	if !reflect.DeepEqual(b.V, []float64{1.5, 0}) || !reflect.DeepEqual(in, []float64{1, 2}) {
		t.Fatalf("merged %v (input now %v)", b.V, in)
	}
	if c := must(f.MergeAccumulators(b, Sums{})); !reflect.DeepEqual(c.V, []float64{1.5, 0}) {
		t.Fatalf("merging empty sums changed %v to %v", b.V, c.V)
	}
	if _, err := f.MergeAccumulators(b, Sums{V: []float64{1}}); err == nil {
		t.Fatal("merged sums of different lengths")
	}
}

// TestFinishFnBlocks: each block's records cover exactly its outputs (the
// last block is shorter), each once, in staging format; empty sums are
// released as noise around zero; sums of the wrong length are refused.
func TestFinishFnBlocks(t *testing.T) {
	plan, err := avgmix.NewPlan(nil, 100, 2, 1, avgmix.Params{T: 7, M: 4, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	pj, _ := json.Marshal(plan)
	f := &finishFn{PlanJSON: pj, Parts: 2, Block: 3}
	if err := f.Setup(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	parts := map[int][]byte{}
	for bl, n := range []int{3, 3, 1} {
		sums := Sums{}
		if bl == 1 {
			sums.V = make([]float64, n*3)
			for i := range sums.V {
				sums.V[i] = 1e6 // far above the noise: the division by m shows
			}
		}
		var part int
		var rec []byte
		if err := f.ProcessElement(bl, sums, func(p int, b []byte) { part, rec = p, b }); err != nil {
			t.Fatal(err)
		}
		if part != bl%2 || len(rec) != n*(4+4*3) {
			t.Fatalf("block %d: part %d, %d bytes", bl, part, len(rec))
		}
		parts[part] = append(parts[part], rec...)
	}
	for p, b := range parts {
		if err := os.WriteFile(partName(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = ReadAvgmix(context.Background(), dir, plan, func(o int, x, y []float32) error {
		big := o >= 3 && o < 6
		for _, v := range append(x, y...) {
			if big != (math.Abs(float64(v)-1e6/4) < 1e3) {
				t.Errorf("output %d released %v", o, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ProcessElement(2, Sums{V: make([]float64, 6)}, func(int, []byte) {}); err == nil {
		t.Fatal("a block of the wrong length was released")
	}
	if err := f.ProcessElement(3, Sums{}, func(int, []byte) {}); err == nil {
		t.Fatal("a block past T was released")
	}
}

func TestChoicesCoder(t *testing.T) {
	co := [][]int32{{0, 3, 9}, {}, {1}}
	got, err := decodeChoices(encodeChoices(co), 3)
	if err != nil || !reflect.DeepEqual(got, co) {
		t.Fatalf("%v round-trips to %v, %v", co, got, err)
	}
	enc := encodeChoices(co)
	for _, bad := range [][]byte{enc[:len(enc)-1], append(enc, 0), enc[:2]} {
		if _, err := decodeChoices(bad, 3); err == nil {
			t.Fatalf("decoded a damaged side input of %d bytes", len(bad))
		}
	}
}

// TestReadAvgmix: the staged output is imported only when every output is
// there exactly once.
func TestReadAvgmix(t *testing.T) {
	plan := &avgmix.Plan{T: 3, D: 2, K: 1}
	rec := func(t int) []byte { return encodeRecord(t, []float32{float32(t), 1, -1}) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, tc := range []struct {
		name  string
		parts [][]byte
		err   string
	}{
		{"complete", [][]byte{cat(rec(2), rec(0)), rec(1)}, ""},
		{"missing", [][]byte{cat(rec(2), rec(0))}, "1 of the 3 outputs are missing"},
		{"repeated", [][]byte{cat(rec(2), rec(0)), cat(rec(1), rec(0))}, "repeated"},
		{"out of range", [][]byte{cat(rec(2), rec(0), rec(1), rec(5))}, "out of range"},
		{"truncated", [][]byte{cat(rec(2), rec(0), rec(1))[:30]}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, p := range tc.parts {
				if err := os.WriteFile(partName(dir, i), p, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[int][]float32{}
			err := ReadAvgmix(context.Background(), dir, plan, func(i int, x, y []float32) error {
				seen[i] = append(append([]float32(nil), x...), y...)
				return nil
			})
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					if !reflect.DeepEqual(seen[i], []float32{float32(i), 1, -1}) {
						t.Fatalf("output %d read as %v", i, seen[i])
					}
				}
				if err := RemoveStaging(context.Background(), dir); err != nil {
					t.Fatal(err)
				}
				if m, _ := filepath.Glob(filepath.Join(dir, "part-*")); len(m) != 0 {
					t.Fatalf("staging parts left: %v", m)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzReadAvgmix: no staged file makes the reader panic, and whatever it
// accepts holds each output exactly once.
func FuzzReadAvgmix(f *testing.F) {
	f.Add(append(encodeRecord(1, []float32{1, 2}), encodeRecord(0, []float32{3, 4})...))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(partName(dir, 0), data, 0o644); err != nil {
			t.Fatal(err)
		}
		plan := &avgmix.Plan{T: 2, D: 1, K: 1}
		seen := map[int]int{}
		err := ReadAvgmix(context.Background(), dir, plan, func(i int, _, _ []float32) error {
			seen[i]++
			return nil
		})
		if err == nil && (len(seen) != 2 || seen[0] != 1 || seen[1] != 1) {
			t.Fatalf("accepted outputs %v", seen)
		}
	})
}
