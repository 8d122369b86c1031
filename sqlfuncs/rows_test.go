package sqlfuncs

import (
	"testing"

	"github.com/dpsql/dpsql/vector"
)

// Rows buffered past several chunks come back whole and in order, as chunks
// of exactly chunkRows rows (the form avgmix.Data.XChunks requires) and joined.
func TestVectorRowsChunks(t *testing.T) {
	const n, d = 2*chunkRows + 1808, 3
	r := vectorRows{fn: "test"}
	for i := 0; i < n; i++ {
		if err := r.add(vector.Encode([]float32{float32(i), float32(-i), 1}), int64(i%2), `{}`); err != nil {
			t.Fatal(err)
		}
	}
	cs := r.featureChunks()
	if len(cs) != 3 || len(cs[0]) != chunkRows*d || len(cs[1]) != chunkRows*d || len(cs[2]) != 1808*d {
		t.Fatalf("chunk sizes %d %d %d, want %d %d %d", len(cs[0]), len(cs[1]), len(cs[2]), chunkRows*d, chunkRows*d, 1808*d)
	}
	i := 0
	for _, c := range cs {
		for o := 0; o < len(c); o += d {
			if c[o] != float32(i) || c[o+1] != float32(-i) {
				t.Fatalf("row %d holds %v", i, c[o:o+d])
			}
			i++
		}
	}
	x := r.features()
	if len(x) != n*d || x[(n-1)*d] != float32(n-1) || x[chunkRows*d] != chunkRows {
		t.Errorf("joined features: %d values, last row starts %v", len(x), x[(n-1)*d])
	}
}
