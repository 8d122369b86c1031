package avgmix

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/release"
)

// jsonCopy returns the Plan as a worker sees it after the plan was serialised
// with a pipeline: exported fields only.
func jsonCopy(t *testing.T, pl *Plan) *Plan {
	t.Helper()
	b, err := json.Marshal(pl)
	if err != nil {
		t.Fatal(err)
	}
	var out Plan
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestClipRow(t *testing.T) {
	pl, err := NewPlan(nil, 100, 3, 2, Params{T: 10, M: 5, Mu: 1, Cx: 2, Cy: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	w := jsonCopy(t, pl)
	for _, tc := range []struct {
		name string
		x, y []float32
		err  string
	}{
		{"long rows are clipped", []float32{30, 40, 0}, []float32{1, 1}, ""},
		{"short rows stay", []float32{0.1, 0.2, 0.3}, []float32{0, 0.25}, ""},
		{"NaN feature", []float32{float32(math.NaN()), 0, 0}, []float32{1, 0}, "NaN"},
		{"Inf label", []float32{1, 0, 0}, []float32{float32(math.Inf(1)), 0}, "labels"},
		{"wrong width", []float32{1, 0}, []float32{1, 0}, "2 features"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := slices.Clone(tc.x), slices.Clone(tc.y)
			err := w.ClipRow(x, y)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if norm(x) > 2 || norm(y) > 0.5 {
				t.Fatalf("norms %v, %v above 2, 0.5", norm(x), norm(y))
			}
			// Release's own clipping gives the same bits.
			x2, y2 := slices.Clone(tc.x), slices.Clone(tc.y)
			if err := clipRows(x2, 3, 2); err != nil {
				t.Fatal(err)
			}
			if err := clipRows(y2, 2, 0.5); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(x, x2) || !slices.Equal(y, y2) {
				t.Fatalf("ClipRow gave %v %v, Release's clipping %v %v", x, y, x2, y2)
			}
		})
	}
}

// TestSampleRow checks the law of the outputs a row joins: every output with
// probability Q, independently, in increasing order, and only within the pool.
func TestSampleRow(t *testing.T) {
	const n, T, rowsDrawn = 1000, 200, 20000
	pl, err := NewPlan(nil, n, 1, 1, Params{T: T, M: 30, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := jsonCopy(t, pl)
	r := seededNoise(t, 3).Rand()
	counts := make([]int, T)
	var s1, s2 float64
	for range rowsDrawn {
		prev, c := -1, 0
		w.SampleRow(r, nil, func(o int) {
			if o <= prev || o >= T {
				t.Fatalf("output %d after %d", o, prev)
			}
			prev = o
			counts[o]++
			c++
		})
		s1 += float64(c)
		s2 += float64(c * c)
	}
	q := 30.0 / n
	mean, variance := s1/rowsDrawn, s2/rowsDrawn-(s1/rowsDrawn)*(s1/rowsDrawn)
	if want := T * q; math.Abs(mean-want) > 5*math.Sqrt(T*q*(1-q)/rowsDrawn) {
		t.Errorf("a row joins %v outputs on average, want %v", mean, want)
	}
	if want := T * q * (1 - q); math.Abs(variance/want-1) > 0.06 {
		t.Errorf("variance of outputs joined %v, want %v", variance, want)
	}
	for o, c := range counts {
		if e := rowsDrawn * q; math.Abs(float64(c)-e) > 6*math.Sqrt(e) {
			t.Errorf("output %d drew %d rows, want about %v", o, c, e)
		}
	}
	pool := []int32{3, 17, 18, 150}
	hits := map[int]int{}
	for range rowsDrawn {
		w.SampleRow(r, pool, func(o int) { hits[o]++ })
	}
	for o, c := range hits {
		if !slices.Contains(pool, int32(o)) {
			t.Fatalf("output %d outside the pool %v", o, pool)
		}
		if e := rowsDrawn * q; math.Abs(float64(c)-e) > 6*math.Sqrt(e) {
			t.Errorf("pool output %d drew %d rows, want about %v", o, c, e)
		}
	}
}

func TestClassOutputs(t *testing.T) {
	pl, err := NewPlan(seededNoise(t, 5), 1000, 2, 5, Params{T: 300, M: 20, Mu: 1, Sampling: Hierarchical, P: 0.4})
	if err != nil {
		t.Fatal(err)
	}
	co := pl.ClassOutputs()
	if len(co) != 5 {
		t.Fatalf("%d classes, want 5", len(co))
	}
	for k, outs := range co {
		if len(outs) != pl.ClassSteps[k] || !slices.IsSorted(outs) {
			t.Fatalf("class %d: %d outputs (want %d), sorted %v", k, len(outs), pl.ClassSteps[k], slices.IsSorted(outs))
		}
		for _, o := range outs {
			if !pl.chose(int(o), k) {
				t.Fatalf("class %d lists output %d, which did not choose it", k, o)
			}
		}
	}
	if p, _ := NewPlan(nil, 10, 1, 1, Params{T: 3, Mu: 1}); p.ClassOutputs() != nil {
		t.Fatal("Poisson plans have no class choices")
	}
}

// TestFinish checks that a decoded plan finishes sums with Release's law:
// the same bits as the original plan for the same stream, mean sum/m and
// standard deviations Cx*SigmaX/m and Cy*SigmaY/m.
func TestFinish(t *testing.T) {
	pl, err := NewPlan(nil, 1000, 4, 2, Params{T: 50, M: 10, Mu: 0.5, Cx: 3})
	if err != nil {
		t.Fatal(err)
	}
	w := jsonCopy(t, pl)
	const outs = 5000
	sx, sy := make([]float64, outs*4), make([]float64, outs*2)
	for i := range sx {
		sx[i] = 7
	}
	out := make([]float32, outs*6)
	if err := w.Finish(seededNoise(t, 9), slices.Clone(sx), slices.Clone(sy), out); err != nil {
		t.Fatal(err)
	}
	out2 := make([]float32, outs*6)
	if err := pl.Finish(seededNoise(t, 9), slices.Clone(sx), slices.Clone(sy), out2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, out2) {
		t.Fatal("a decoded plan finishes differently from the original")
	}
	check := func(name string, vals []float64, mean, sd float64) {
		var s1, s2 float64
		for _, v := range vals {
			s1 += v
			s2 += v * v
		}
		n := float64(len(vals))
		m, v := s1/n, s2/n-(s1/n)*(s1/n)
		if math.Abs(m-mean) > 5*sd/math.Sqrt(n) || math.Abs(v/(sd*sd)-1) > 5*math.Sqrt(2/n) {
			t.Errorf("%s: mean %v sd %v, want %v and %v", name, m, math.Sqrt(v), mean, sd)
		}
	}
	var fx, fy []float64
	for o := range outs {
		for j := range 6 {
			if j < 4 {
				fx = append(fx, float64(out[o*6+j]))
			} else {
				fy = append(fy, float64(out[o*6+j]))
			}
		}
	}
	check("features", fx, 0.7, pl.Cx*pl.SigmaX/10)
	check("labels", fy, 0, pl.Cy*pl.SigmaY/10)
	for _, tc := range []struct {
		name       string
		sx, sy     int
		out        int
		noise      *release.Noise
		wantSubstr string
	}{
		{"partial row", 3, 2, 6, release.NewNoise(), "whole rows"},
		{"no rows", 0, 0, 0, release.NewNoise(), "whole rows"},
		{"nil noise", 4, 2, 6, nil, "nil noise"},
	} {
		err := w.Finish(tc.noise, make([]float64, tc.sx), make([]float64, tc.sy), make([]float32, tc.out))
		if err == nil || !strings.Contains(err.Error(), tc.wantSubstr) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantSubstr)
		}
	}
}
