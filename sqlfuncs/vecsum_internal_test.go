package sqlfuncs

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/vector"
)

// TestVecSumClipExact checks the guarantee the charge relies on: every
// row's fixed-point contribution q*u has L2 norm at most clip, exactly (in
// big-number arithmetic), also for rows whose float norm sits on the bound,
// a few ulps above it, or is huge.
func TestVecSumClipExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, clip := range []float64{1, 0.1, 3.7, 1e-20, 12345.678, 0x1p-100, 0x1p100} {
		a := &vecSumAgg{}
		if err := a.start("dp_vec_sum", clip, 1.0); err != nil {
			t.Fatal(err)
		}
		for trial := range 2000 {
			d := 1 + r.IntN(64)
			v := make([]float32, d)
			var ss float64
			for i := range v {
				v[i] = float32(r.NormFloat64())
				ss += float64(v[i]) * float64(v[i])
			}
			// Scale to norm clip times a factor near 1 (or far from it).
			f := []float64{1, 1 + 1e-7, 1 - 1e-7, 1 + 1e-15, 1e30, 1e-3}[trial%6]
			s := clip * f / math.Sqrt(ss)
			finite := true
			for i := range v {
				v[i] = float32(float64(v[i]) * s)
				finite = finite && !math.IsInf(float64(v[i]), 0)
			}
			if !finite { // DecodeVector refuses such rows
				continue
			}
			q := make([]int64, d)
			a.clipRow(v, q)
			norm2 := new(big.Float).SetPrec(512)
			for _, x := range q {
				y := new(big.Float).SetPrec(512).SetFloat64(float64(x) * a.unit) // exact: u is a power of two
				norm2.Add(norm2, new(big.Float).SetPrec(512).Mul(y, y))
			}
			c2 := new(big.Float).SetPrec(512).SetFloat64(clip)
			c2.Mul(c2, c2)
			if norm2.Cmp(c2) > 0 {
				t.Fatalf("clip %v, row %v: ||q u||^2 = %s > clip^2 = %s", clip, v, norm2.Text('g', 30), c2.Text('g', 30))
			}
			// And the step loses little: within d steps of the clipped norm.
			want := math.Min(math.Sqrt(ss)*s, clip)
			got, _ := norm2.Float64()
			if math.Sqrt(got) < want-float64(d)*a.unit*2 && !math.IsInf(want, 0) {
				t.Fatalf("clip %v: clipped norm %v, want about %v", clip, math.Sqrt(got), want)
			}
		}
	}
}

// TestFeaturesJoin checks that the chunks joined by features hold the rows in
// order, across chunk boundaries (chunks of d = 300 are mapped, not from the
// heap, and each is unmapped once copied).
func TestFeaturesJoin(t *testing.T) {
	const d = 300
	r := vectorRows{fn: "test"}
	defer r.free()
	n := 2*chunkRows + 5
	for i := 0; i < n; i++ {
		row := make([]float32, d)
		row[0], row[1], row[2] = float32(i), float32(-i), 1
		if err := r.add(vector.Encode(row), int64(i%2), `{}`); err != nil {
			t.Fatal(err)
		}
	}
	if chunkRows*d < sqlite.HugeThreshold {
		t.Fatalf("chunks of %d values would come from the heap", chunkRows*d)
	}
	x := r.features()
	if len(x) != n*d {
		t.Fatalf("%d values, want %d", len(x), n*d)
	}
	for i := 0; i < n; i++ {
		if x[i*d] != float32(i) || x[i*d+1] != float32(-i) || x[i*d+2] != 1 {
			t.Fatalf("row %d starts %v", i, x[i*d:i*d+3])
		}
	}
}
