package avgmix

import (
	"slices"
	"strings"
	"testing"
)

// chunked returns data with its features split into chunks of c rows.
func chunked(data Data, c int) Data {
	data = cloneData(data)
	for lo := 0; lo < data.N; lo += c {
		hi := min(lo+c, data.N)
		data.XChunks = append(data.XChunks, data.X[lo*data.D:hi*data.D:hi*data.D])
	}
	data.X, data.ChunkRows = nil, c
	return data
}

// A release from chunked features equals the release from the same features
// stored contiguously, bit for bit, under the same seed.
func TestReleaseChunkedEqualsContiguous(t *testing.T) {
	const n, d, k = 500, 37, 4
	data := tinyData(4, n, d, k, 1)
	for _, p := range []Params{
		{T: 700, M: 20, Mu: 1},
		{T: 700, M: 20, Mu: 1, Sampling: Hierarchical, P: 0.5},
	} {
		plan, err := NewPlan(seededNoise(t, 3), n, d, k, p)
		if err != nil {
			t.Fatal(err)
		}
		want := collect(t, seededNoise(t, 21), cloneData(data), plan)
		for _, c := range []int{1, 4, 64, 512} {
			got := collect(t, seededNoise(t, 21), chunked(data, c), plan)
			if !slices.EqualFunc(want, got, slices.Equal) {
				t.Errorf("%s, chunks of %d rows: the release differs from the contiguous one", plan.Sampling, c)
			}
		}
	}
}

func TestReleaseChunkErrors(t *testing.T) {
	const n, d, k = 100, 5, 3
	data := tinyData(4, n, d, k, 1)
	plan, err := NewPlan(nil, n, d, k, Params{T: 10, M: 5, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	good := chunked(data, 32)
	short := chunked(data, 32)
	short.XChunks[1] = short.XChunks[1][:10*d]
	both := chunked(data, 32)
	both.X = data.X
	odd := chunked(data, 32)
	odd.ChunkRows = 30
	ragged := chunked(data, 32)
	ragged.XChunks[0] = ragged.XChunks[0][:len(ragged.XChunks[0])-1]
	for _, tc := range []struct {
		name string
		data Data
		want string
	}{
		{"short middle chunk", short, "chunk 1 has 50 values"},
		{"X and chunks", both, "not both"},
		{"chunk rows not a power of two", odd, "power of two"},
		{"partial row", ragged, "whole rows"},
	} {
		err := Release(seededNoise(t, 1), tc.data, plan, func(int, []float32, []float32) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := Release(seededNoise(t, 1), good, plan, func(int, []float32, []float32) error { return nil }); err != nil {
		t.Errorf("good chunks: %v", err)
	}
}
