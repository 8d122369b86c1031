package avgmix

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpsql/dpsql/release"
)

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestClipRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []float64{1, 0.37, 1000, 0x1p-90} {
		for _, dim := range []int{1, 3, 64, 785} {
			for _, scale := range []float64{0.01, 0.5, 0.999999, 1, 2, 1e6} {
				row := make([]float32, dim)
				for j := range row {
					row[j] = float32(r.NormFloat64())
				}
				f := float32(scale * c / norm(row))
				for j := range row {
					row[j] *= f
				}
				orig := slices.Clone(row)
				if err := clipRows(row, dim, c); err != nil {
					t.Fatal(err)
				}
				h := quantStep(c)
				if nr := norm(row); nr > c {
					t.Errorf("c=%v dim=%d scale=%v: clipped norm %v > c", c, dim, scale, nr)
				}
				var dot float64
				for j := range row {
					k := float64(row[j]) / h
					if k != math.Trunc(k) || math.Abs(k) >= 1<<24 {
						t.Fatalf("c=%v: value %v is not a multiple of h = %v below 2^24 steps", c, row[j], h)
					}
					if math.Abs(float64(row[j])) > math.Abs(float64(orig[j])) {
						t.Fatalf("c=%v: |%v| grew to |%v|", c, orig[j], row[j])
					}
					dot += float64(row[j]) * float64(orig[j])
				}
				on := norm(orig)
				if on <= c*(1-clipMargin) {
					// Only truncated: each coordinate moves by less than h.
					for j := range row {
						if math.Abs(float64(row[j]-orig[j])) >= h {
							t.Fatalf("c=%v: short row changed by %v >= h", c, row[j]-orig[j])
						}
					}
				} else if nr := norm(row); nr < c*(1-1e-6) && nr < c-2*h*math.Sqrt(float64(dim)) {
					t.Errorf("c=%v dim=%d: long row (norm %v) clipped to %v, want about c", c, dim, on, nr)
				}
				if cos := dot / (on * norm(row)); norm(row) > 100*h && cos < 1-1e-6 {
					t.Errorf("c=%v dim=%d: direction changed, cos = %v", c, dim, cos)
				}
			}
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		row := []float32{1, bad, 0}
		if err := clipRows(row, 3, 1); err == nil {
			t.Errorf("row with %v accepted", bad)
		}
	}
}

func TestSkipper(t *testing.T) {
	const n, draws = 1000, 20000
	rng := seededNoise(t, 7).Rand()
	for _, q := range []float64{0.05, 0.5, 0.003} {
		sk := newSkipper(q)
		counts := make([]int, n)
		var s1, s2 float64
		for range draws {
			c, prev := 0, -1
			for pos := sk.next(rng, -1, n); pos < n; pos = sk.next(rng, pos, n) {
				if pos <= prev || pos < 0 {
					t.Fatalf("q=%v: positions not strictly increasing: %d after %d", q, pos, prev)
				}
				prev = pos
				counts[pos]++
				c++
			}
			s1 += float64(c)
			s2 += float64(c) * float64(c)
		}
		// Subset size ~ Binomial(n, q).
		mean := s1 / draws
		variance := s2/draws - mean*mean
		wantMean, wantVar := n*q, n*q*(1-q)
		if math.Abs(mean-wantMean) > 5*math.Sqrt(wantVar/draws) {
			t.Errorf("q=%v: mean size %v, want %v", q, mean, wantMean)
		}
		if math.Abs(variance/wantVar-1) > 0.06 {
			t.Errorf("q=%v: size variance %v, want %v", q, variance, wantVar)
		}
		// Each position equally likely. A position's count is
		// Binomial(draws, q), of variance expect*(1-q), so the normalised
		// sum of squares is close to chi-square with n-1 degrees of freedom.
		expect := s1 / n
		var chi2 float64
		for _, c := range counts {
			chi2 += (float64(c) - expect) * (float64(c) - expect) / (expect * (1 - q))
		}
		if dof := float64(n - 1); math.Abs(chi2-dof) > 6*math.Sqrt(2*dof) {
			t.Errorf("q=%v: chi-square of position counts %v with %v degrees of freedom", q, chi2, dof)
		}
	}
	// q = 1 takes everything; an empty pool gives nothing.
	sk := newSkipper(1)
	got := 0
	for pos := sk.next(rng, -1, 10); pos < 10; pos = sk.next(rng, pos, 10) {
		if pos != got {
			t.Fatalf("q=1: position %d, want %d", pos, got)
		}
		got++
	}
	if got != 10 {
		t.Errorf("q=1 took %d of 10", got)
	}
	if pos := newSkipper(0.5).next(rng, -1, 0); pos != 0 {
		t.Errorf("empty pool gave position %d", pos)
	}
}

// tinyData returns n rows with d features and k one-hot labels.
func tinyData(seed uint64, n, d, k int, scale float64) Data {
	r := rand.New(rand.NewPCG(seed, 3))
	x := make([]float32, n*d)
	y := make([]float32, n*k)
	for i := range n {
		for j := range d {
			x[i*d+j] = float32(scale * r.NormFloat64())
		}
		y[i*k+r.IntN(k)] = 1
	}
	return Data{X: x, D: d, Y: y, K: k, N: n}
}

func cloneData(d Data) Data {
	d.X, d.Y = slices.Clone(d.X), slices.Clone(d.Y)
	return d
}

// collect runs Release and returns the outputs as rows of D+K values.
func collect(t *testing.T, noise *release.Noise, data Data, plan *Plan) [][]float32 {
	t.Helper()
	var out [][]float32
	err := Release(noise, data, plan, func(i int, x, y []float32) error {
		if i != len(out) {
			return fmt.Errorf("emit %d after %d rows", i, len(out))
		}
		if len(x) != data.D || len(y) != data.K {
			return fmt.Errorf("row %d has %d+%d values, want %d+%d", i, len(x), len(y), data.D, data.K)
		}
		out = append(out, append(slices.Clone(x), y...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != plan.T {
		t.Fatalf("%d rows emitted, want %d", len(out), plan.T)
	}
	return out
}

// columnStats returns per-coordinate means and variances over rows.
func columnStats(rows [][]float32) (mean, variance []float64) {
	w := len(rows[0])
	mean, variance = make([]float64, w), make([]float64, w)
	for _, r := range rows {
		for j, v := range r {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(len(rows))
	}
	for _, r := range rows {
		for j, v := range r {
			d := float64(v) - mean[j]
			variance[j] += d * d
		}
	}
	for j := range variance {
		variance[j] /= float64(len(rows) - 1)
	}
	return mean, variance
}

// rowMeans returns the per-coordinate means of the (clipped) data rows.
func rowMeans(data Data) []float64 {
	m := make([]float64, data.D+data.K)
	for i := range data.N {
		for j := range data.D {
			m[j] += float64(data.X[i*data.D+j])
		}
		for j := range data.K {
			m[data.D+j] += float64(data.Y[i*data.K+j])
		}
	}
	for j := range m {
		m[j] /= float64(data.N)
	}
	return m
}

// TestReleaseAllRows uses q = 1 (m = n): every output averages all rows, so
// before noise all outputs equal the exact mean of the clipped rows, and their
// spread is the noise alone, of standard deviation Cx sigma_x/m and Cy sigma_y/m.
func TestReleaseAllRows(t *testing.T) {
	const n, d, k, T = 40, 6, 3, 6000
	data := tinyData(1, n, d, k, 0.4)
	plan, err := NewPlan(nil, n, d, k, Params{T: T, M: n, Mu: 2000, Lambda: 2, Cx: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Q != 1 {
		t.Fatalf("q = %v, want 1", plan.Q)
	}
	out := collect(t, seededNoise(t, 8), data, plan)
	mean, variance := columnStats(out)
	exact := rowMeans(data) // data is clipped now
	for j := range mean {
		sd := plan.Cx * plan.SigmaX / n
		if j >= d {
			sd = plan.Cy * plan.SigmaY / n
		}
		if math.Abs(mean[j]-exact[j]) > 5*sd/math.Sqrt(T) {
			t.Errorf("coordinate %d: mean output %v, exact mean %v (noise sd %v)", j, mean[j], exact[j], sd)
		}
		// Sample variance of T normals: relative sd sqrt(2/T) = 1.8%.
		if r := variance[j] / (sd * sd); math.Abs(r-1) > 5*math.Sqrt(2.0/T) {
			t.Errorf("coordinate %d: output variance / (C sigma/m)^2 = %v, want 1", j, r)
		}
	}
}

// TestReleaseExpectation: with Poisson sampling at rate q and weight 1/m,
// E[x~] = (1/m) sum_i q x_i = (q N/m) mean(x), which is mean(x) when the
// table has the plan's n rows and (N/n) mean(x) otherwise.
func TestReleaseExpectation(t *testing.T) {
	const n, d, k, T, m = 300, 4, 3, 20000, 30
	for _, rows := range []int{n, n / 2} {
		data := tinyData(2, rows, d, k, 1)
		plan, err := NewPlan(nil, n, d, k, Params{T: T, M: m, Mu: 50})
		if err != nil {
			t.Fatal(err)
		}
		out := collect(t, seededNoise(t, 9), data, plan)
		mean, variance := columnStats(out)
		exact := rowMeans(data)
		factor := plan.Q * float64(rows) / m
		for j := range mean {
			want := factor * exact[j]
			if tol := 5 * math.Sqrt(variance[j]/T); math.Abs(mean[j]-want) > tol {
				t.Errorf("N=%d coordinate %d: mean output %v, want %v +- %v", rows, j, mean[j], want, tol)
			}
		}
	}
}

// TestReleaseSensitivityScale checks the noise level of a real plan against
// Theorem 3.1: per coordinate variance of an output is the sampling variance
// plus (C sigma/m)^2; with constant rows the sampling variance is
// Var(|I|) c^2/m^2 = q(1-q) n c^2/m^2, known exactly.
func TestReleaseSensitivityScale(t *testing.T) {
	const n, d, k, T, m = 1000, 3, 2, 20000, 50
	data := Data{X: make([]float32, n*d), D: d, Y: make([]float32, n*k), K: k, N: n}
	for i := range n {
		data.X[i*d] = 0.5 // coordinate 0 constant, the others zero
		data.Y[i*k+1] = 1
	}
	plan, err := NewPlan(nil, n, d, k, Params{T: T, M: m, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := collect(t, seededNoise(t, 10), data, plan)
	mean, variance := columnStats(out)
	q := plan.Q
	vals := []float64{0.5, 0, 0, 0, 1}
	for j := range mean {
		noise := plan.Cx * plan.SigmaX / m
		if j >= d {
			noise = plan.Cy * plan.SigmaY / m
		}
		want := q*(1-q)*n*vals[j]*vals[j]/(m*m) + noise*noise
		if r := variance[j] / want; math.Abs(r-1) > 0.05 {
			t.Errorf("coordinate %d: variance %v, want %v (ratio %v)", j, variance[j], want, r)
		}
		if math.Abs(mean[j]-vals[j]) > 5*math.Sqrt(want/T) {
			t.Errorf("coordinate %d: mean %v, want %v", j, mean[j], vals[j])
		}
	}
}

func TestHierarchicalRelease(t *testing.T) {
	const n, d, k, T, m, P = 1000, 2, 5, 8000, 40, 0.4
	data := tinyData(3, n, d, k, 0.2)
	sizes := make([]int, k)
	for i := range n {
		sizes[classOf(data.Y[i*k:(i+1)*k])]++
	}
	plan, err := NewPlan(seededNoise(t, 11), n, d, k, Params{T: T, M: m, Mu: 4, Sampling: Hierarchical, P: P})
	if err != nil {
		t.Fatal(err)
	}
	out := collect(t, seededNoise(t, 12), cloneData(data), plan)
	// E[y~_c] = q n_c/m for outputs that chose c, 0 for the others.
	for c := range k {
		var in, outSum, nin, nout float64
		for tt, row := range out {
			if plan.chose(tt, c) {
				in += float64(row[d+c])
				nin++
			} else {
				outSum += float64(row[d+c])
				nout++
			}
		}
		want := plan.Q * float64(sizes[c]) / m
		noise := plan.Cy * plan.SigmaY / m
		sampling := math.Sqrt(plan.Q*float64(sizes[c])) / m
		if tol := 5 * math.Hypot(noise, sampling) / math.Sqrt(nin); math.Abs(in/nin-want) > tol {
			t.Errorf("class %d chosen: mean label %v, want %v +- %v", c, in/nin, want, tol)
		}
		if tol := 5 * noise / math.Sqrt(nout); math.Abs(outSum/nout) > tol {
			t.Errorf("class %d not chosen: mean label %v, want 0 +- %v", c, outSum/nout, tol)
		}
	}
	// Subsets contain only rows of the chosen classes, each once.
	clipped := cloneData(data)
	xr, err := newRows(clipped)
	if err != nil {
		t.Fatal(err)
	}
	if err := clipData(clipped, xr, plan); err != nil {
		t.Fatal(err)
	}
	start, rows := groupByClass(clipped)
	w := &worker{pl: plan, data: clipped, r: seededNoise(t, 13).Rand(), sk: newSkipper(plan.Q), classStart: start, classRows: rows}
	for tt := range 200 {
		w.idx = w.idx[:0]
		w.sample(tt)
		seen := map[int32]bool{}
		for _, i := range w.idx {
			c := classOf(clipped.Y[int(i)*k : int(i+1)*k])
			if !plan.chose(tt, c) || seen[i] {
				t.Fatalf("output %d: row %d of class %d (chosen %v, repeated %v)", tt, i, c, plan.chose(tt, c), seen[i])
			}
			seen[i] = true
		}
	}
}

func TestReleaseDeterministicAndKernel(t *testing.T) {
	const n, d, k = 500, 37, 4 // d not a multiple of 16: AVX2 body and Go tail
	data := tinyData(4, n, d, k, 1)
	plan, err := NewPlan(nil, n, d, k, Params{T: 1000, M: 20, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := collect(t, seededNoise(t, 14), cloneData(data), plan)
	b := collect(t, seededNoise(t, 14), cloneData(data), plan)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatal("two releases with the same seed differ")
	}
	c := collect(t, seededNoise(t, 15), cloneData(data), plan)
	if slices.EqualFunc(a, c, slices.Equal) {
		t.Fatal("two releases with different seeds agree")
	}
}

func TestReleaseEmitError(t *testing.T) {
	data := tinyData(5, 300, 8, 3, 1)
	plan, err := NewPlan(nil, 300, 8, 3, Params{T: 5000, M: 10, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	stop := errors.New("stop here")
	calls := 0
	err = Release(seededNoise(t, 16), data, plan, func(i int, x, y []float32) error {
		calls++
		if i == 700 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 701 {
		t.Fatalf("Release returned %v after %d calls, want the emit error after 701", err, calls)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines left, %d before", g, before)
	}
}

// TestReleaseEmitTurns: the workers call emit themselves, taking turns, so
// the calls must still come in order, 0..T-1, never two at once; emit may
// keep state between calls without a lock (sqlfuncs reuses its encoding
// buffers). The sleeps let a worker that broke the turn overtake.
func TestReleaseEmitTurns(t *testing.T) {
	data := tinyData(7, 400, 8, 3, 1)
	plan, err := NewPlan(nil, 400, 8, 3, Params{T: 3000, M: 10, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	var inside atomic.Int32
	next := 0 // written by emit only: the race detector checks the turns
	err = Release(seededNoise(t, 17), data, plan, func(i int, x, y []float32) error {
		if n := inside.Add(1); n != 1 {
			t.Errorf("row %d: %d calls of emit at once", i, n)
		}
		defer inside.Add(-1)
		if i != next {
			t.Errorf("row %d emitted, want row %d", i, next)
		}
		next = i + 1
		if i%97 == 0 {
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	})
	if err != nil || next != plan.T {
		t.Fatalf("Release: %v after %d rows, want %d", err, next, plan.T)
	}
}

func TestReleaseErrors(t *testing.T) {
	plan, err := NewPlan(nil, 10, 2, 2, Params{T: 5, M: 2, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	good := func() Data { return tinyData(6, 10, 2, 2, 1) }
	emit := func(int, []float32, []float32) error { return nil }
	nanData := good()
	nanData.X[7] = float32(math.NaN())
	infLabel := good()
	infLabel.Y[3] = float32(math.Inf(1))
	short := good()
	short.X = short.X[:19]
	wrongDim := good()
	wrongDim.D, wrongDim.X = 4, make([]float32, 40)
	tampered := *plan
	tampered.Mechanism.Sigma *= 2
	tests := []struct {
		name  string
		noise *release.Noise
		data  Data
		plan  *Plan
		emit  func(int, []float32, []float32) error
		want  string
	}{
		{"nil noise", nil, good(), plan, emit, "nil noise"},
		{"nil emit", seededNoise(t, 1), good(), plan, nil, "nil emit"},
		{"nil plan", seededNoise(t, 1), good(), nil, emit, "nil plan"},
		{"NaN feature", seededNoise(t, 1), nanData, plan, emit, "NaN"},
		{"Inf label", seededNoise(t, 1), infLabel, plan, emit, "labels"},
		{"short X", seededNoise(t, 1), short, plan, emit, "19 feature values (want 20)"},
		{"dimension mismatch", seededNoise(t, 1), wrongDim, plan, emit, "coordinates"},
		{"tampered plan", seededNoise(t, 1), good(), &tampered, emit, "below the charged"},
		{"zero plan", seededNoise(t, 1), good(), &Plan{}, emit, "plan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Release(tc.noise, tc.data, tc.plan, tc.emit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Release error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// An empty table releases pure noise.
	empty := Data{D: 2, K: 2}
	n := 0
	if err := Release(seededNoise(t, 1), empty, plan, func(int, []float32, []float32) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("empty table: %v after %d rows", err, n)
	}
}

// TestReleaseEmitPanic: an emit that panics (sqlfuncs recovers panics at the
// SQL boundary, so the process lives on) must not leave the workers running:
// they would block forever on their channels, holding the data, and the
// deferred restore of the units would race with their reads of data.X. After
// the panic no worker goroutine is left and data.X holds clipRows' floats.
func TestReleaseEmitPanic(t *testing.T) {
	const n, d, k = 300, 8, 3
	data := tinyData(5, n, d, k, 1)
	plan, err := NewPlan(nil, n, d, k, Params{T: 5000, M: 10, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(data.X)
	for i := range n {
		_ = clipRows(want[i*d:(i+1)*d], d, plan.Cx)
	}
	before := runtime.NumGoroutine()
	func() {
		defer func() {
			// The value comes with the stack of the worker that panicked,
			// which the caller's own stack (what sqlfuncs' guard prints)
			// does not show.
			r := recover()
			wp, ok := r.(*WorkerPanic)
			if !ok || wp.Value != "emit panicked" {
				t.Fatalf("recovered %v, want the emit's panic as a *WorkerPanic", r)
			}
			if !strings.Contains(string(wp.Stack), "TestReleaseEmitPanic.func") || !strings.Contains(wp.Error(), "emit panicked") {
				t.Errorf("the panic's stack does not show emit:\n%s", wp.Error())
			}
		}()
		_ = Release(seededNoise(t, 16), data, plan, func(i int, x, y []float32) error {
			if i == 700 {
				panic("emit panicked")
			}
			return nil
		})
	}()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines left after the panic, %d before", g, before)
	}
	for i, g := range data.X {
		if g != want[i] || (g == 0 && math.Signbit(float64(g))) {
			t.Fatalf("value %d: %v after the panic, want %v", i, g, want[i])
		}
	}
}

// TestReleaseWorkerPanic: a panic in a worker's own code (a bug in the
// mixing), while the other worker waits for its turn or emits, reaches the
// caller's goroutine, where sqlfuncs recovers it at the SQL boundary; not
// recovered on the worker's goroutine, it ended the process. No goroutine
// is left behind, and emit saw a prefix of the rows, in order.
func TestReleaseWorkerPanic(t *testing.T) {
	data := tinyData(5, 300, 8, 3, 1)
	plan, err := NewPlan(nil, 300, 8, 3, Params{T: 5000, M: 10, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	B := batchSize(data.D + data.K)
	for _, bad := range []int{0, 1, 3, (plan.T+B-1)/B - 1} { // both workers, first and last batches
		t.Run(fmt.Sprint("batch ", bad), func(t *testing.T) {
			testBeforeBatch = func(b int) {
				if b == bad {
					panic(fmt.Sprintf("batch %d broke", b))
				}
			}
			defer func() { testBeforeBatch = nil }()
			before := runtime.NumGoroutine()
			next := 0
			func() {
				defer func() {
					r := recover()
					wp, ok := r.(*WorkerPanic)
					if !ok || wp.Value != fmt.Sprintf("batch %d broke", bad) || !strings.Contains(string(wp.Stack), "TestReleaseWorkerPanic.func") {
						t.Fatalf("recovered %v, want the worker's panic with its stack", r)
					}
				}()
				_ = Release(seededNoise(t, 16), cloneData(data), plan, func(i int, x, y []float32) error {
					if i != next {
						t.Errorf("row %d emitted, want %d", i, next)
					}
					next++
					return nil
				})
				t.Fatal("Release returned although a worker panicked")
			}()
			if next > bad*B {
				t.Errorf("%d rows emitted, but batch %d (rows %d..) was never computed", next, bad, bad*B)
			}
			waitGoroutines(t, before)
		})
	}
}

// TestReleaseEmitGoexit: an emit that calls runtime.Goexit (t.FailNow in a
// test's emit) ends the caller's goroutine, as it did when emit ran there,
// instead of leaving the other worker waiting for the turn and Release for
// the workers, forever.
func TestReleaseEmitGoexit(t *testing.T) {
	data := tinyData(5, 300, 8, 3, 1)
	plan, err := NewPlan(nil, 300, 8, 3, Params{T: 5000, M: 10, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	exited, returned := make(chan struct{}), false
	go func() {
		defer close(exited)
		_ = Release(seededNoise(t, 16), data, plan, func(i int, x, y []float32) error {
			if i == 700 {
				runtime.Goexit()
			}
			return nil
		})
		returned = true
	}()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("Release still runs 30 s after emit's runtime.Goexit")
	}
	if returned {
		t.Error("Release returned after emit's runtime.Goexit; the caller's goroutine should have exited")
	}
	waitGoroutines(t, before)
}

// waitGoroutines fails t unless the goroutines are back to before within 2 s.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines left, %d before", g, before)
	}
}

// TestReleaseEmitErrorExits: emit's error on the first or last row, with
// one batch or many, T below a batch and T = 1 (one worker has no batch),
// and on an empty table: Release returns that error after exactly the rows
// up to it, in order, and leaves no goroutine behind.
func TestReleaseEmitErrorExits(t *testing.T) {
	const d, k = 8, 3
	B := batchSize(d + k)
	for _, tc := range []struct {
		name   string
		n, T   int
		failAt int
	}{
		{"T = 1", 300, 1, 0},
		{"T below a batch, first row", 300, B / 2, 0},
		{"T below a batch, last row", 300, B / 2, B/2 - 1},
		{"one full batch, last row", 300, B, B - 1},
		{"two batches, first row of the second", 300, 2 * B, B},
		{"many batches, first row", 300, 7*B + 5, 0},
		{"many batches, last row", 300, 7*B + 5, 7*B + 4},
		{"empty table, last row", 0, 3*B + 1, 3 * B},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tinyData(5, tc.n, d, k, 1)
			plan, err := NewPlan(nil, 300, d, k, Params{T: tc.T, M: 10, Mu: 1})
			if err != nil {
				t.Fatal(err)
			}
			before := runtime.NumGoroutine()
			stop := errors.New("stop here")
			next := 0
			err = Release(seededNoise(t, 16), data, plan, func(i int, x, y []float32) error {
				if i != next {
					t.Errorf("row %d emitted, want %d", i, next)
				}
				next++
				if i == tc.failAt {
					return stop
				}
				return nil
			})
			if !errors.Is(err, stop) || next != tc.failAt+1 {
				t.Fatalf("Release returned %v after %d rows, want the emit error after %d", err, next, tc.failAt+1)
			}
			waitGoroutines(t, before)
		})
	}
}
