package avgmix

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/dpsql/dpsql/release"
)

// Data is the table to release from: N rows, row-major. X holds N*D
// features, Y holds N*K labels (one-hot or soft). Release overwrites both
// with their clipped, quantised values.
//
// Instead of X, the features may come as XChunks: consecutive chunks of whole
// rows, every chunk but the last holding exactly ChunkRows rows (a power of
// two). A caller that buffers rows as they arrive (dpsql's SQL aggregate) then
// needs no second, contiguous copy of the table.
type Data struct {
	X         []float32
	XChunks   [][]float32
	ChunkRows int
	D         int
	Y         []float32
	K         int
	N         int
}

// rows indexes the features of Data, contiguous or chunked.
type rows struct {
	chunks [][]float32
	shift  uint
	mask   int
	d      int
}

func newRows(data Data) (rows, error) {
	if data.XChunks == nil {
		if len(data.X) != data.N*data.D {
			return rows{}, fmt.Errorf("avgmix: data has %d rows but %d feature values (want %d)", data.N, len(data.X), data.N*data.D)
		}
		return rows{chunks: [][]float32{data.X}, shift: 62, mask: 1<<62 - 1, d: data.D}, nil
	}
	if data.X != nil {
		return rows{}, errors.New("avgmix: give the features as X or as XChunks, not both")
	}
	c := data.ChunkRows
	if c < 1 || c&(c-1) != 0 {
		return rows{}, fmt.Errorf("avgmix: ChunkRows must be a power of two, got %d", c)
	}
	n := 0
	for i, ch := range data.XChunks {
		r := len(ch) / max(data.D, 1)
		if len(ch) != r*data.D || (i < len(data.XChunks)-1 && r != c) || r > c {
			return rows{}, fmt.Errorf("avgmix: feature chunk %d has %d values; chunks hold whole rows, %d rows each but the last", i, len(ch), c)
		}
		n += r
	}
	if n != data.N {
		return rows{}, fmt.Errorf("avgmix: data has %d rows but its feature chunks hold %d", data.N, n)
	}
	shift := uint(0)
	for 1<<shift < c {
		shift++
	}
	return rows{chunks: data.XChunks, shift: shift, mask: c - 1, d: data.D}, nil
}

// at returns a pointer to the first feature of row i.
func (r *rows) at(i int) *float32 {
	return &r.chunks[i>>r.shift][(i&r.mask)*r.d]
}

// workers is the number of goroutines that compute outputs. Two saturate the
// memory bandwidth of the gather on the machines measured (see bench_test.go);
// being fixed, it also makes a seeded release reproducible.
const workers = 2

// batchBytes bounds the float64 sums of one batch, which should stay in the
// L2 cache while the noise is added.
const batchBytes = 1 << 19

// maxBatch is the largest number of outputs in a batch.
const maxBatch = 256

// batchSize returns the number of outputs per batch for rows of width floats.
func batchSize(width int) int {
	return max(1, min(maxBatch, batchBytes/(8*width)))
}

// Release computes the T rows of plan from data and passes them to emit in
// order, i = 0..T-1, one call at a time, from the workers' goroutines: a
// panic there, in emit or a worker, is re-raised on the caller's as a
// *[WorkerPanic], and emit's runtime.Goexit ends the caller's goroutine. The
// slices x (length D) and y (length K) are reused after emit returns: copy
// them to keep them. If emit returns an error, Release stops and returns it.
//
// Release first clips and quantises data.X and data.Y in place (also when it
// later fails; a zero feature is left as +0). While it runs, data.X holds
// the features' int32 units instead (see group), so nothing else may read
// it. data.N need not equal plan.N: the inclusion rate is the plan's, fixed
// from the public n.
//
// noise supplies the sampling decisions and the Gaussian noise; Release splits
// it into one stream per worker.
func Release(noise *release.Noise, data Data, plan *Plan, emit func(i int, x, y []float32) error) error {
	if noise == nil {
		return errors.New("avgmix: nil noise")
	}
	if emit == nil {
		return errors.New("avgmix: nil emit function")
	}
	if err := plan.check(); err != nil {
		return err
	}
	if data.D != plan.D || data.K != plan.K {
		return fmt.Errorf("avgmix: data has %d feature and %d label coordinates, the plan %d and %d", data.D, data.K, plan.D, plan.K)
	}
	if data.N < 0 || data.N > MaxRows {
		return fmt.Errorf("avgmix: data must have between 0 and %d rows, has %d", MaxRows, data.N)
	}
	if len(data.Y) != data.N*data.K {
		return fmt.Errorf("avgmix: data has %d rows but %d label values (want %d)", data.N, len(data.Y), data.N*data.K)
	}
	xr, err := newRows(data)
	if err != nil {
		return err
	}
	if err := clipData(data, xr, plan); err != nil {
		return err
	}
	defer forRanges(data.N, func(_, lo, hi int) { restoreUnits(xr, plan.Cx, lo, hi) })

	var classStart []int
	var classRows []int32
	if plan.Sampling == Hierarchical {
		classStart, classRows = groupByClass(data)
	}
	zero := make([]float32, max(data.D, data.K))
	B := batchSize(data.D + data.K)
	nb := (plan.T + B - 1) / B
	width := data.D + data.K

	// The workers take turns at emit, in batch order: a worker computes its
	// next batch while the other one emits, then waits for the turn. Emitting
	// from the workers rather than from a goroutine of its own keeps as many
	// goroutines busy as there are workers: a third one, waiting in SQLite
	// (cgo) for most of its time, found on its return both of GOMAXPROCS = 2
	// processors taken by the workers and waited for one, up to a
	// preemption's 10 ms, while the workers, their buffers full, waited for it
	// (dp_avgmix at Fashion-MNIST's shape: the workers were busy 0.55 s of a
	// 1.03 s loop).
	turn := make([]chan struct{}, workers) // holds the one token: whose turn it is
	for w := range turn {
		turn[w] = make(chan struct{}, 1)
	}
	turn[0] <- struct{}{}
	stopped := make(chan struct{}) // closed when emit fails or a worker panics
	var (
		failOnce sync.Once
		failure  workerFailure // the first failure; read after wg.Wait
	)
	fail := func(f workerFailure) {
		failOnce.Do(func() {
			failure = f
			close(stopped)
		})
	}
	var wg sync.WaitGroup
	for w := range workers {
		wk := &worker{
			pl: plan, data: data, x: xr, noise: noise.Split(), zero: zero,
			classStart: classStart, classRows: classRows,
			sumX: make([]float64, B*data.D), sumY: make([]float64, B*data.K),
			units: make([]int32, data.D),
		}
		wk.r = wk.noise.Rand()
		wk.sk = newSkipper(plan.Q)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// A panic in emit or in the worker's own code, or emit's
			// runtime.Goexit (a test's t.FailNow), must stop the other
			// worker too, which would otherwise wait for the turn forever,
			// and reach the caller's goroutine; a panic not recovered here
			// would end the process, past sqlfuncs' recover at the SQL
			// boundary.
			finished := false
			defer func() {
				if !finished {
					r := recover()
					fail(workerFailure{panicked: true, goexit: r == nil, value: r, stack: debug.Stack()})
				}
			}()
			buf := make([]float32, B*width)
			for b := w; b < nb; b += workers {
				select {
				case <-stopped:
					finished = true
					return
				default:
				}
				t0 := b * B
				if testBeforeBatch != nil {
					testBeforeBatch(b)
				}
				wk.batch(t0, min(t0+B, plan.T), buf)
				select {
				case <-turn[w]:
				case <-stopped:
					finished = true
					return
				}
				// Only the token's holder emits.
				if err := emitBatch(emit, buf, t0, min(B, plan.T-t0), data.D, width); err != nil {
					fail(workerFailure{err: err})
					finished = true
					return
				}
				turn[(w+1)%workers] <- struct{}{}
			}
			finished = true
		}(w)
	}
	wg.Wait()
	switch {
	case failure.goexit:
		runtime.Goexit()
	case failure.panicked:
		panic(&WorkerPanic{Value: failure.value, Stack: failure.stack})
	}
	return failure.err
}

// testBeforeBatch, when set (by tests only), is called by a worker before it
// computes batch b.
var testBeforeBatch func(b int)

// workerFailure is how a worker of Release stopped early: emit's error, or a
// panic (in emit or the worker) with its value and stack, or emit's
// runtime.Goexit.
type workerFailure struct {
	err      error
	panicked bool
	goexit   bool
	value    any
	stack    []byte
}

// WorkerPanic is the value Release panics with, on its caller's goroutine,
// when emit or one of its workers panicked on theirs: the original value and
// the stack of the goroutine where it happened, which the caller's own stack
// no longer shows.
type WorkerPanic struct {
	Value any    // what emit or the worker panicked with
	Stack []byte // the panicking goroutine's stack (runtime/debug.Stack)
}

// Error returns the value and the stack where it was raised.
func (p *WorkerPanic) Error() string {
	return fmt.Sprintf("%v\n\nraised in a worker of avgmix.Release:\n%s", p.Value, p.Stack)
}

// Unwrap returns the value when it is an error.
func (p *WorkerPanic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// emitBatch passes the n rows of a computed batch, outputs t0.. of width
// floats each in buf, to emit, and returns emit's first error.
func emitBatch(emit func(i int, x, y []float32) error, buf []float32, t0, n, d, width int) error {
	for o := range n {
		row := buf[o*width : (o+1)*width]
		if err := emit(t0+o, row[:d:d], row[d:]); err != nil {
			return err
		}
	}
	return nil
}

// clipData clips and quantises the features and Y in place, on two
// goroutines. The features are left as units (see clipUnits) for the gather,
// until restoreUnits turns them back; if clipData fails, it has done that.
func clipData(data Data, xr rows, plan *Plan) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	stored := make([]int, workers) // rows [lo, lo+stored[w]) of worker w hold units
	per := (data.N + workers - 1) / workers
	for w := range workers {
		lo, hi := min(w*per, data.N), min((w+1)*per, data.N)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; {
				// The rows of [i, hi) that share i's chunk.
				end := min(hi, (i>>xr.shift+1)<<xr.shift)
				c, off := xr.chunks[i>>xr.shift], (i&xr.mask)*data.D
				n, err := clipUnits(c[off:off+(end-i)*data.D], data.D, plan.Cx)
				stored[w] += n
				if err != nil {
					errs[w] = fmt.Errorf("avgmix: features: %w", err)
					return
				}
				i = end
			}
			if err := clipRows(data.Y[lo*data.K:hi*data.K], data.K, plan.Cy); err != nil {
				errs[w] = fmt.Errorf("avgmix: labels: %w", err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		forRanges(data.N, func(w, lo, hi int) { restoreUnits(xr, plan.Cx, lo, lo+stored[w]) })
		return err
	}
	return nil
}

// forRanges splits rows 0..n-1 as clipData does and runs f on each worker's
// range [lo, hi), on its own goroutine.
func forRanges(n int, f func(w, lo, hi int)) {
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w, min(w*per, n), min((w+1)*per, n))
		}()
	}
	wg.Wait()
}

// restoreUnits turns the units of feature rows [lo, hi) back into floats.
func restoreUnits(xr rows, c float64, lo, hi int) {
	for i := lo; i < hi; {
		end := min(hi, (i>>xr.shift+1)<<xr.shift)
		ch, off := xr.chunks[i>>xr.shift], (i&xr.mask)*xr.d
		fromUnits(ch[off:off+(end-i)*xr.d], c)
		i = end
	}
}

// classOf returns the index of the largest coordinate of a label row (the
// first on ties).
func classOf(y []float32) int {
	best := 0
	for j, v := range y {
		if v > y[best] {
			best = j
		}
	}
	return best
}

// groupByClass lists the rows of each class: the rows of class k are
// rows[start[k]:start[k+1]], in increasing order.
func groupByClass(data Data) (start []int, rows []int32) {
	start = make([]int, data.K+1)
	cls := make([]int32, data.N)
	for i := range data.N {
		k := classOf(data.Y[i*data.K : (i+1)*data.K])
		cls[i] = int32(k)
		start[k+1]++
	}
	for k := range data.K {
		start[k+1] += start[k]
	}
	next := append([]int(nil), start[:data.K]...)
	rows = make([]int32, data.N)
	for i, k := range cls {
		rows[next[k]] = int32(i)
		next[k]++
	}
	return start, rows
}

// worker computes batches of outputs with its own noise stream.
type worker struct {
	pl         *Plan
	data       Data
	x          rows
	noise      *release.Noise
	r          *mrand.Rand
	sk         skipper
	zero       []float32
	classStart []int
	classRows  []int32

	idx        []int32   // the batch's subsets, concatenated
	off        []int     // output o's subset is idx[off[o]:off[o+1]]
	sumX, sumY []float64 // the batch's sums, row-major
	units      []int32   // one output's feature sum in units, of at most maxUnitRows rows
}

// sample appends output t's subset to w.idx.
func (w *worker) sample(t int) {
	if w.pl.Sampling == Poisson {
		n := w.data.N
		for pos := w.sk.next(w.r, -1, n); pos < n; pos = w.sk.next(w.r, pos, n) {
			w.idx = append(w.idx, int32(pos))
		}
		return
	}
	forEachClass(w.pl.classesOf(t), func(k int) {
		pool := w.classRows[w.classStart[k]:w.classStart[k+1]]
		n := len(pool)
		for pos := w.sk.next(w.r, -1, n); pos < n; pos = w.sk.next(w.r, pos, n) {
			w.idx = append(w.idx, pool[pos])
		}
	})
}

// rowPtrs returns pointers to the features and to the first and last label
// of entry p of w.idx, or to the zero row if p is past the end.
func (w *worker) rowPtrs(p int) (x, y, yEnd *float32) {
	if p >= len(w.idx) {
		return &w.zero[0], &w.zero[0], &w.zero[0]
	}
	i := int(w.idx[p])
	return w.x.at(i), &w.data.Y[i*w.data.K], &w.data.Y[(i+1)*w.data.K-1]
}

// batch computes outputs t0..t1-1 into out, one row of D+K floats each. The
// exact sums of all the batch's outputs are formed first, then the noise is
// added to all of them in one call per scale, which keeps the sampler's table
// in cache, and finally the rows are divided by m.
func (w *worker) batch(t0, t1 int, out []float32) {
	w.idx = w.idx[:0]
	w.off = append(w.off[:0], 0)
	for t := t0; t < t1; t++ {
		w.sample(t)
		w.off = append(w.off, len(w.idx))
	}
	D, K := w.data.D, w.data.K
	nOut := t1 - t0
	sx, sy := w.sumX[:nOut*D], w.sumY[:nOut*K]
	clear(sx)
	clear(sy)
	h := quantStep(w.pl.Cx)
	for o := range nOut {
		w.sum(w.off[o], w.off[o+1], h, sx[o*D:(o+1)*D], sy[o*K:(o+1)*K])
	}
	w.pl.finish(w.noise, sx, sy, out[:nOut*(D+K)])
}

// sum adds the rows w.idx[lo:hi] into acc (features, zero on entry) and accY
// (labels), exactly: the features' units (h is their step) in int32, moved to
// float64 before maxUnitRows rows, then scaled by h. w.units is zero on entry
// and on return.
func (w *worker) sum(lo, hi int, h float64, acc, accY []float64) {
	K := w.data.K
	Y := w.data.Y
	u := w.units
	inU := 0 // rows summed in u
	var g group
	for p := lo; p < hi; p += 8 {
		if inU+8 > maxUnitRows {
			unitSums(acc, u, 1)
			inU = 0
		}
		for k := range 8 {
			if p+k < hi {
				g[k] = w.x.at(int(w.idx[p+k]))
			} else {
				g[k] = &w.zero[0]
			}
		}
		next := min(p+8, hi) // the next group: this output's, or the next output's first
		for k := range 8 {
			g[8+k], g[16+k], g[24+k] = w.rowPtrs(next + k)
		}
		addUnits(u, &g)
		inU += 8
		// This group's label rows were prefetched by the previous call.
		for _, i := range w.idx[p:min(p+8, hi)] {
			for j, v := range Y[int(i)*K : int(i)*K+K] {
				accY[j] += float64(v)
			}
		}
	}
	// The sum in units is an integer below 2^53 in magnitude, so it and its
	// product with h (a power of two) are exact: the float64 sum of the rows'
	// values, bit for bit.
	unitSums(acc, u, h)
}
