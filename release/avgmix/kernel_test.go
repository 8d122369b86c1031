package avgmix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// unitKernels lists the unit kernels this machine runs, by name.
func unitKernels() map[string]func(acc []int32, g *group) {
	ks := map[string]func(acc []int32, g *group){
		"go":       func(acc []int32, g *group) { addUnitsGo(acc, g, 0, len(acc)) },
		"dispatch": addUnits,
	}
	for name, k := range simdUnitKernels() {
		ks[name] = k
	}
	return ks
}

// floatSums is the reference: acc[j] plus the float64 sum of the float32
// values rows[i][j], the law of the float64 gather the unit kernels replaced.
func floatSums(acc []float64, rows [][]float32) []float64 {
	out := slices.Clone(acc)
	for _, r := range rows {
		for j, v := range r {
			out[j] += float64(v)
		}
	}
	return out
}

// unitsOf returns the rows as units of h (see group): each value must be a
// multiple of h below 2^24 steps.
func unitsOf(t *testing.T, rows [][]float32, h float64) [][]float32 {
	t.Helper()
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = make([]float32, len(r))
		u := unitRow(&out[i][0], len(r))
		for j, v := range r {
			q := float64(v) / h
			if q != math.Trunc(q) || math.Abs(q) >= 1<<24 {
				t.Fatalf("value %v is not a multiple of %v below 2^24 steps", v, h)
			}
			u[j] = int32(q)
		}
	}
	return out
}

// checkKernels runs every kernel on 8 rows (units of the float rows, step h),
// prefetch rows included, and compares the result times h with floatSums.
func checkKernels(t *testing.T, rows [][]float32, h float64, start []int32) {
	t.Helper()
	dim := len(rows[0])
	units := unitsOf(t, rows, h)
	var g group
	for i := range g {
		g[i] = &units[i%len(units)][0] // 8-31 stand for the rows to prefetch
	}
	base := make([]float64, dim)
	for j, s := range start {
		base[j] = float64(s) * h
	}
	want := floatSums(base, rows[:8])
	for name, k := range unitKernels() {
		acc := slices.Clone(start)
		k(acc, &g)
		for j := range dim {
			if got := float64(acc[j]) * h; got != want[j] {
				t.Fatalf("%s kernel, dim %d: sum %d is %v, the float64 sum %v", name, dim, j, got, want[j])
			}
		}
	}
}

// TestUnitKernels checks every kernel against the float64 sums of the same
// rows: clipped random rows and rows at the edges, ±(2^24 - 1) h, for widths
// around the kernels' 16-value steps.
func TestUnitKernels(t *testing.T) {
	if !useAVX2 {
		t.Log("AVX2 not available: only the portable kernel runs")
	}
	r := rand.New(rand.NewPCG(5, 5))
	for _, dim := range []int{1, 2, 7, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 784, 785} {
		for _, c := range []float64{1, 0.8, 3e-20, 7e12} {
			h := quantStep(c)
			rows := make([][]float32, 16)
			for i := range rows {
				rows[i] = make([]float32, dim)
				for j := range dim {
					rows[i][j] = float32(r.NormFloat64() * c)
				}
				if err := clipRows(rows[i], dim, c); err != nil {
					t.Fatal(err)
				}
			}
			start := make([]int32, dim)
			for j := range start {
				start[j] = int32(r.IntN(1<<27) - 1<<26)
			}
			t.Run(fmt.Sprint(dim, "/", c), func(t *testing.T) { checkKernels(t, rows, h, start) })

			// Edges: every row at +max or -max, alternating by column, and
			// mixed signs; 8 such rows and a start of 7 more fit an int32.
			edge := float32(float64(1<<24-1) * h)
			for i := range rows {
				for j := range dim {
					switch {
					case i < 8:
						rows[i][j] = edge
						if j%2 == 1 {
							rows[i][j] = -edge
						}
					default:
						rows[i][j] = []float32{edge, -edge, 0, float32(h)}[r.IntN(4)]
					}
				}
			}
			for j := range start {
				start[j] = 7 * (1<<24 - 1)
				if j%2 == 1 {
					start[j] = -start[j]
				}
			}
			t.Run(fmt.Sprint(dim, "/", c, "/edges"), func(t *testing.T) { checkKernels(t, rows, h, start) })
		}
	}
}

// FuzzUnitKernels compares the kernels with the float64 sums on rows of any
// width below 100 and any units below 2^24 in magnitude.
func FuzzUnitKernels(f *testing.F) {
	f.Add(uint8(17), []byte{1, 2, 3})
	f.Add(uint8(16), []byte{0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x80, 0})
	f.Add(uint8(1), []byte{})
	f.Fuzz(func(t *testing.T, dim uint8, seed []byte) {
		d := int(dim)%100 + 1
		var s [32]byte
		copy(s[:], seed)
		r := rand.New(rand.NewChaCha8(s))
		h := quantStep(1)
		rows := make([][]float32, 8)
		for i := range rows {
			rows[i] = make([]float32, d)
			for j := range d {
				var u int32
				switch r.IntN(3) {
				case 0:
					u = int32(r.IntN(1<<25-1)) - (1<<24 - 1)
				case 1:
					u = []int32{1<<24 - 1, -(1<<24 - 1), 0, 1, -1}[r.IntN(5)]
				default:
					if len(seed) > 0 {
						u = int32(binary.LittleEndian.Uint32(append(slices.Clone(seed), 0, 0, 0, 0)) % (1<<25 - 1))
						u -= 1<<24 - 1
					}
				}
				rows[i][j] = float32(float64(u) * h)
			}
		}
		start := make([]int32, d)
		for j := range start {
			start[j] = int32(r.IntN(15*(1<<24)) - 7*(1<<24))
		}
		checkKernels(t, rows, h, start)
	})
}

// TestWorkerSumExact checks the gather of one output against the float64
// sums of its rows, for outputs of 0 to 300 rows: beyond maxUnitRows the
// int32 sums are flushed, and rows at the edge value would overflow them
// otherwise.
func TestWorkerSumExact(t *testing.T) {
	const n, d, k = 40, 37, 3
	r := rand.New(rand.NewPCG(8, 9))
	data := tinyData(8, n, d, k, 1)
	c := 0.75
	h := quantStep(c)
	edge := float32(float64(1<<24-1) * h) // the largest units, norms aside
	for i := range n / 2 {                // rows 0..n/4-1 at +edge, the next n/4 at -edge
		for j := range d {
			data.X[i*d+j] = edge
			if i >= n/4 {
				data.X[i*d+j] = -edge
			}
		}
	}
	floats := slices.Clone(data.X)
	for i := n / 2; i < n; i++ {
		if err := clipRows(floats[i*d:(i+1)*d], d, c); err != nil {
			t.Fatal(err)
		}
	}
	units := slices.Clone(floats)
	for i := range n {
		u := unitRow(&units[i*d], d)
		for j := range d {
			u[j] = int32(float64(floats[i*d+j]) / h)
		}
	}
	data.X = units
	xr, err := newRows(data)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{data: data, x: xr, zero: make([]float32, max(d, k)), units: make([]int32, d)}
	for _, size := range []int{0, 1, 7, 8, 9, 64, 119, 120, 121, 127, 128, 129, 300} {
		w.idx = w.idx[:0]
		var picked [][]float32
		for range size {
			i := r.IntN(n)
			if size >= 120 {
				i = r.IntN(n / 4) // the +edge rows
			}
			w.idx = append(w.idx, int32(i))
			picked = append(picked, floats[i*d:(i+1)*d])
		}
		want := floatSums(make([]float64, d), picked)
		acc, accY := make([]float64, d), make([]float64, k)
		w.sum(0, size, h, acc, accY)
		if !slices.Equal(acc, want) {
			t.Errorf("%d rows: the unit sums differ from the float64 sums", size)
		}
		if size == 300 && slices.Max(want)/h < math.MaxInt32 {
			t.Fatalf("300 rows: the test rows do not pass the int32 limit (max sum %v units)", slices.Max(want)/h)
		}
	}
}

// TestReleaseLeavesClippedFloats checks that the features hold their clipped
// floats (clipRows' values; zeros as +0) after Release, whether it succeeds,
// stops on an emit error, or fails clipping a later row, chunked or not; the
// gather's units never leak.
func TestReleaseLeavesClippedFloats(t *testing.T) {
	const n, d, k = 300, 21, 3
	plan, err := NewPlan(nil, n, d, k, Params{T: 50, M: 10, Mu: 1, Cx: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	emitErr := errors.New("stop")
	for _, tc := range []struct {
		name   string
		nanRow int // -1: none
		emit   func(int, []float32, []float32) error
	}{
		{"success", -1, func(int, []float32, []float32) error { return nil }},
		{"emit error", -1, func(int, []float32, []float32) error { return emitErr }},
		{"NaN in worker 0's range", 100, nil},
		{"NaN in worker 1's range", 299, nil},
	} {
		for _, chunk := range []int{0, 16} {
			t.Run(fmt.Sprint(tc.name, "/chunks of ", chunk), func(t *testing.T) {
				data := tinyData(9, n, d, k, 1)
				if tc.nanRow >= 0 {
					data.X[tc.nanRow*d+3] = float32(math.NaN())
				}
				want := slices.Clone(data.X)
				for i := range n {
					if i != tc.nanRow {
						_ = clipRows(want[i*d:(i+1)*d], d, plan.Cx)
					}
				}
				orig := data.X
				if chunk > 0 {
					data = chunked(data, chunk)
				}
				emit := tc.emit
				if emit == nil {
					emit = func(int, []float32, []float32) error { return nil }
				}
				if err := Release(seededNoise(t, 4), data, plan, emit); err == nil && tc.name != "success" {
					t.Fatal("Release succeeded")
				}
				got := orig
				if chunk > 0 {
					got = slices.Concat(data.XChunks...)
				}
				for i := range n {
					// Rows after a failed one may be left unclipped; the
					// others must be clipRows' values.
					if tc.nanRow >= 0 && i >= tc.nanRow && (i < n/2) == (tc.nanRow < n/2) {
						continue
					}
					for j := range d {
						g, w := got[i*d+j], want[i*d+j]
						if g != w || (g == 0 && math.Signbit(float64(g))) {
							t.Fatalf("row %d, feature %d: %v (bits %#x) after Release, want %v", i, j, g, math.Float32bits(g), w)
						}
					}
				}
			})
		}
	}
}

// TestUnitSums checks every version of unitSums against exact arithmetic:
// acc + u is an integer below 2^53 and h a power of two, so (acc + u) h is
// computed exactly (big.Float), and u must come back zero.
func TestUnitSums(t *testing.T) {
	ks := simdUnitSums()
	ks["go"] = unitSumsGo
	ks["dispatch"] = unitSums
	r := rand.New(rand.NewPCG(6, 7))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 784, 785} {
		for _, h := range []float64{1, 0x1p-24, 0x1p-124, 0x1p76} {
			acc := make([]float64, n+3) // longer than u: only the first n change
			u := make([]int32, n)
			for j := range acc {
				acc[j] = float64(r.Int64N(1<<50) - 1<<49)
			}
			for j := range u {
				u[j] = []int32{math.MaxInt32, math.MinInt32 + 1, 0, -1, int32(r.Uint32())}[r.IntN(5)]
			}
			want := slices.Clone(acc)
			for j, v := range u {
				s := new(big.Float).SetFloat64(acc[j])
				s.Add(s, new(big.Float).SetInt64(int64(v)))
				s.Mul(s, new(big.Float).SetFloat64(h))
				want[j], _ = s.Float64()
			}
			for name, k := range ks {
				a, v := slices.Clone(acc), slices.Clone(u)
				k(a[:n], v, h)
				if !slices.Equal(a, want) {
					t.Errorf("%s, n = %d, h = %v: sums differ from exact arithmetic", name, n, h)
				}
				if slices.ContainsFunc(v, func(x int32) bool { return x != 0 }) {
					t.Errorf("%s, n = %d: units not cleared", name, n)
				}
			}
		}
	}
}

// TestFromUnits checks every version of fromUnitsStep against the float64
// product rounded once to float32, for units up to ±(2^24 - 1) and the
// extreme steps of the clip bounds NewPlan accepts.
func TestFromUnits(t *testing.T) {
	ks := simdFromUnits()
	ks["go"] = fromUnitsGo
	ks["dispatch"] = fromUnitsStep
	r := rand.New(rand.NewPCG(10, 11))
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 784} {
		for _, c := range []float64{0x1p-100, 1, 0.3, 0x1p100} {
			h := quantStep(c)
			units := make([]int32, n)
			for j := range units {
				units[j] = []int32{1<<24 - 1, -(1<<24 - 1), 0, 1, -1, int32(r.IntN(1<<25-1)) - (1<<24 - 1)}[r.IntN(6)]
			}
			for name, k := range ks {
				v := make([]float32, n+2) // longer than the units: the rest stays
				copy(unitRow(unsafe.SliceData(v), n), units)
				v[n], v[n+1] = 7, 7
				k(v[:n], float32(h))
				for j, u := range units {
					if want := float32(float64(u) * h); v[j] != want || (u == 0 && math.Signbit(float64(v[j]))) {
						t.Fatalf("%s, n = %d, c = %v: unit %d became %v, want %v", name, n, c, u, v[j], want)
					}
				}
				if v[n] != 7 || v[n+1] != 7 {
					t.Fatalf("%s, n = %d: wrote past the end", name, n)
				}
			}
		}
	}
}
