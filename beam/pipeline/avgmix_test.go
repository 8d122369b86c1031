package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/release/avgmix"
)

func TestSumsCoder(t *testing.T) {
	for _, s := range []Sums{{}, {V: []float64{1, -2.5, 0x1p-40}}} {
		got, err := decodeSums(encodeSums(s))
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("%v round-trips to %v, %v", s, got, err)
		}
	}
	if _, err := decodeSums(make([]byte, 7)); err == nil {
		t.Fatal("7 bytes decoded as sums")
	}
}

func TestSumFnMerges(t *testing.T) {
	f := &sumFn{}
	a := f.MergeAccumulators(Sums{}, Sums{V: []float64{1, 2}})
	b := f.MergeAccumulators(a, Sums{V: []float64{0.5, -2}})
	if !reflect.DeepEqual(b.V, []float64{1.5, 0}) {
		t.Fatalf("merged %v", b.V)
	}
	if c := f.MergeAccumulators(b, Sums{}); !reflect.DeepEqual(c.V, []float64{1.5, 0}) {
		t.Fatalf("merging empty sums changed %v to %v", b.V, c.V)
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
