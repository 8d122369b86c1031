package pipeline

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	mrand "math/rand/v2"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

// DefaultCombineBytes bounds the accumulators a sampling DoFn keeps per
// bundle. T*(d+K)*8 bytes hold one per output, which combines best.
const DefaultCombineBytes = 512 << 20

// Sums is the exact float64 sum of the clipped rows (features then labels)
// that joined one output. A nil V stands for zero sums.
type Sums struct {
	V []float64
}

// Sums travel through the shuffle in one of two encodings (the first byte
// says which):
//
//	sumsRaw:    the float64 values, 8 bytes each, little-endian
//	sumsScaled: an exponent e (zig-zag varint), then each value v as the
//	            zig-zag varint of v / 2^e, an exact integer
//
// The values are sums of quantised rows, multiples of one power of two far
// smaller than themselves, so sumsScaled is exact and takes 3 to 5 bytes a
// value instead of 8 (a zero takes one); it is used whenever every v / 2^e
// fits an int64. Runners pay per byte shuffled (prism several times over).
const (
	sumsRaw    = 0
	sumsScaled = 1
)

func encodeSums(s Sums) []byte {
	if len(s.V) == 0 {
		return nil
	}
	// e: the exponent of the lowest set bit over all values.
	e, top := math.MaxInt32, math.MinInt32
	for _, v := range s.V {
		if v == 0 {
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			e = math.MinInt32
			break
		}
		fr, ex := math.Frexp(v) // v = fr 2^ex, |fr| in [0.5, 1)
		m := int64(math.Ldexp(fr, 53))
		low := ex - 53 + bits.TrailingZeros64(uint64(m))
		e, top = min(e, low), max(top, ex)
	}
	if e == math.MaxInt32 { // all zeros
		e, top = 0, 0
	}
	if e != math.MinInt32 && top-e <= 62 {
		b := binary.AppendVarint([]byte{sumsScaled}, int64(e))
		for _, v := range s.V {
			b = binary.AppendVarint(b, int64(math.Ldexp(v, -e)))
		}
		return b
	}
	b := make([]byte, 1, 1+8*len(s.V))
	b[0] = sumsRaw
	for _, v := range s.V {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func decodeSums(b []byte) (Sums, error) {
	if len(b) == 0 {
		return Sums{}, nil
	}
	switch b[0] {
	case sumsRaw:
		b = b[1:]
		if len(b)%8 != 0 {
			return Sums{}, fmt.Errorf("sums: %d bytes is not a whole number of float64 values", len(b))
		}
		v := make([]float64, len(b)/8)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return Sums{V: v}, nil
	case sumsScaled:
		e, k := binary.Varint(b[1:])
		if k <= 0 || e < -1100 || e > 1100 {
			return Sums{}, errors.New("sums: a malformed exponent")
		}
		b = b[1+k:]
		v := make([]float64, 0, len(b)/3)
		for len(b) > 0 {
			q, k := binary.Varint(b)
			if k <= 0 {
				return Sums{}, errors.New("sums: a malformed value")
			}
			v, b = append(v, math.Ldexp(float64(q), int(e))), b[k:]
		}
		return Sums{V: v}, nil
	}
	return Sums{}, fmt.Errorf("sums: unknown encoding %d", b[0])
}

// AvgmixOptions are the tuning knobs of [Avgmix]; none affects the law.
type AvgmixOptions struct {
	// Staging is the directory (local, or any Beam filesystem) the noisy
	// rows are written to, as Parts files part-NNNNN.
	Staging string
	// Parts is the number of staging files; 0 means 16.
	Parts int
	// CombineBytes bounds each sampling DoFn's accumulators; 0 means
	// DefaultCombineBytes.
	CombineBytes int
	// BlockBytes is the size of one shuffled element: the sums of as many
	// consecutive outputs as fit; 0 means DefaultBlockBytes.
	BlockBytes int
}

// DefaultBlockBytes is the size of the blocks of consecutive outputs whose
// sums travel through the shuffle as one element. Runners pay per element
// and per key (prism, with T = 60000 outputs one key each, spent most of its
// time on that bookkeeping); blocks of half a MiB keep both small.
const DefaultBlockBytes = 512 << 10

// blockOutputs is the number of outputs per block for rows of width values.
func blockOutputs(blockBytes, width int) int { return max(1, blockBytes/(8*width)) }

// Avgmix adds the avgmix release of plan over the rows of src to the
// pipeline. The driver must have charged plan.Mechanism before running it.
// The T noisy rows land in opts.Staging; read them with [ReadAvgmix].
func Avgmix(s beam.Scope, plan *avgmix.Plan, src Source, opts AvgmixOptions) (err error) {
	defer func() { // the SDK reports construction errors by panicking
		if r := recover(); r != nil {
			err = fmt.Errorf("avgmix pipeline: %v", r)
		}
	}()
	if plan == nil || plan.T < 1 || plan.D < 1 || plan.K < 1 || plan.M < 1 {
		return errors.New("avgmix pipeline: the plan is not a valid avgmix plan (use avgmix.NewPlan)")
	}
	if opts.Staging == "" {
		return errors.New("avgmix pipeline: a staging directory is required")
	}
	parts := opts.Parts
	if parts == 0 {
		parts = 16
	}
	if parts < 1 {
		return fmt.Errorf("avgmix pipeline: parts must be >= 1, got %d", parts)
	}
	cb := opts.CombineBytes
	if cb == 0 {
		cb = DefaultCombineBytes
	}
	bb := opts.BlockBytes
	if bb == 0 {
		bb = DefaultBlockBytes
	}
	if cb < 0 || bb < 0 {
		return fmt.Errorf("avgmix pipeline: combine and block sizes must be positive, got %d and %d", cb, bb)
	}
	block := blockOutputs(bb, plan.D+plan.K)
	var choices []byte
	if plan.Sampling == avgmix.Hierarchical {
		co := plan.ClassOutputs()
		if co == nil {
			return errors.New("avgmix pipeline: a hierarchical plan without its class choices (use avgmix.NewPlan)")
		}
		choices = encodeChoices(co)
	}
	s = s.Scope("dpsql.avgmix")
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return fmt.Errorf("avgmix pipeline: encoding the plan: %w", err)
	}
	shards := beam.CreateList(s.Scope("shards"), src.Shards())
	rows := beam.ParDo(s.Scope("read"), &readFn{D: plan.D, K: plan.K}, shards)
	side := beam.Create(s.Scope("class choices"), choices)
	partial := beam.ParDo(s.Scope("clip and sample"), &sampleFn{PlanJSON: planJSON, CombineBytes: cb, Block: block}, rows, beam.SideInput{Input: side})
	empty := beam.ParDo(s.Scope("outputs"), &outputsFn{T: plan.T, Block: block}, beam.Impulse(s))
	sums := beam.CombinePerKey(s.Scope("sum"), &sumFn{}, beam.Flatten(s, partial, empty))
	recs := beam.ParDo(s.Scope("noise"), &finishFn{PlanJSON: planJSON, Parts: parts, Block: block}, sums)
	beam.ParDo0(s.Scope("write"), &writeFn{Dir: opts.Staging}, beam.GroupByKey(s, recs))
	return nil
}

// encodeChoices packs the class choices: for each class, its count then its
// outputs, as uint32.
func encodeChoices(co [][]int32) []byte {
	var b []byte
	for _, outs := range co {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(outs)))
		for _, t := range outs {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
	}
	return b
}

func decodeChoices(b []byte, k int) ([][]int32, error) {
	co := make([][]int32, k)
	for c := range k {
		if len(b) < 4 {
			return nil, errors.New("class choices: truncated side input")
		}
		n := int(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if len(b) < 4*n {
			return nil, errors.New("class choices: truncated side input")
		}
		co[c] = make([]int32, n)
		for i := range n {
			co[c][i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		b = b[4*n:]
	}
	if len(b) != 0 {
		return nil, errors.New("class choices: trailing bytes in the side input")
	}
	return co, nil
}

// sampleFn clips each row, draws the outputs it joins, and adds it to those
// outputs' accumulators, one dense array per block of Block consecutive
// outputs, which it emits (keyed by block) when the bundle ends or when they
// outgrow CombineBytes.
type sampleFn struct {
	// PlanJSON is the plan as JSON: a Go struct field of the plan's type
	// would make Beam infer a schema for the (recursive) mechanism type.
	PlanJSON     []byte
	CombineBytes int
	Block        int

	plan  avgmix.Plan
	r     *mrand.Rand
	acc   map[int][]float64 // block -> Block rows of D+K sums (fewer in the last block)
	pools [][]int32
	x, y  []float32
}

// Setup decodes the plan and seeds the DoFn instance's secure stream from
// crypto/rand.
func (f *sampleFn) Setup() error {
	if err := json.Unmarshal(f.PlanJSON, &f.plan); err != nil {
		return fmt.Errorf("avgmix pipeline: decoding the plan: %w", err)
	}
	if f.Block < 1 {
		return fmt.Errorf("avgmix pipeline: %d outputs per block", f.Block)
	}
	f.r = release.NewNoise().Rand()
	return nil
}

func (f *sampleFn) StartBundle(_ context.Context, _ []byte, _ func(int, Sums)) {
	f.acc = map[int][]float64{}
}

func (f *sampleFn) ProcessElement(_ context.Context, b Rows, choices []byte, emit func(int, Sums)) error {
	pl := &f.plan
	D, K := pl.D, pl.K
	if len(b.X) != b.N*D || len(b.Y) != b.N*K {
		return fmt.Errorf("avgmix pipeline: a block of %d rows with %d feature and %d label values", b.N, len(b.X), len(b.Y))
	}
	if pl.Sampling == avgmix.Hierarchical && f.pools == nil {
		co, err := decodeChoices(choices, K)
		if err != nil {
			return fmt.Errorf("avgmix pipeline: %w", err)
		}
		f.pools = co
	}
	if f.x == nil {
		f.x, f.y = make([]float32, D), make([]float32, K)
	}
	width := D + K
	limit := max(1, f.CombineBytes/(8*width*f.Block)) // blocks held at once
	for i := range b.N {
		x, y := f.x, f.y
		copy(x, b.X[i*D:(i+1)*D])
		copy(y, b.Y[i*K:(i+1)*K])
		if err := pl.ClipRow(x, y); err != nil {
			return fmt.Errorf("avgmix pipeline: %w", err)
		}
		var pool []int32
		if f.pools != nil {
			pool = f.pools[avgmix.ClassOf(y)]
			if len(pool) == 0 {
				continue
			}
		}
		cur, curBlock := []float64(nil), -1
		pl.SampleRow(f.r, pool, func(t int) {
			if bl := t / f.Block; bl != curBlock {
				curBlock = bl
				cur = f.acc[bl]
				if cur == nil {
					n := min(f.Block, pl.T-bl*f.Block)
					cur = make([]float64, n*width)
					f.acc[bl] = cur
				}
			}
			a := cur[(t%f.Block)*width : (t%f.Block+1)*width]
			fa, la := a[:D:D], a[D:]
			for j, v := range x {
				fa[j] += float64(v)
			}
			for j, v := range y {
				la[j] += float64(v)
			}
		})
		if len(f.acc) >= limit {
			f.flush(emit)
		}
	}
	return nil
}

func (f *sampleFn) FinishBundle(_ context.Context, _ []byte, emit func(int, Sums)) {
	f.flush(emit)
}

func (f *sampleFn) flush(emit func(int, Sums)) {
	for bl, a := range f.acc {
		emit(bl, Sums{V: a})
	}
	clear(f.acc)
}

// outputsFn emits every block of outputs with empty sums, so that each
// output is released once whether or not any row joined it.
type outputsFn struct {
	T, Block int
}

func (f *outputsFn) ProcessElement(_ []byte, emit func(int, Sums)) {
	for bl := range (f.T + f.Block - 1) / f.Block {
		emit(bl, Sums{})
	}
}

// sumFn adds partial sums. The values are quantised so these float64 sums
// are exact, whatever the order.
type sumFn struct{}

func (*sumFn) MergeAccumulators(a, b Sums) (Sums, error) {
	switch {
	case b.V == nil:
		return a, nil
	case a.V == nil:
		return Sums{V: append([]float64(nil), b.V...)}, nil
	case len(a.V) != len(b.V):
		return a, fmt.Errorf("avgmix pipeline: merging sums of %d and %d values", len(a.V), len(b.V))
	}
	for i, v := range b.V {
		a.V[i] += v
	}
	return a, nil
}

// finishFn adds the noise to a block's exact sums, divides by m, and keys
// the block's records by its staging part.
type finishFn struct {
	PlanJSON []byte // see sampleFn
	Parts    int
	Block    int

	plan   avgmix.Plan
	noise  *release.Noise
	sx, sy []float64
	out    []float32
}

// Setup seeds the DoFn instance's secure noise from crypto/rand.
func (f *finishFn) Setup() error {
	if err := json.Unmarshal(f.PlanJSON, &f.plan); err != nil {
		return fmt.Errorf("avgmix pipeline: decoding the plan: %w", err)
	}
	f.noise = release.NewNoise()
	f.sx, f.sy = make([]float64, f.Block*f.plan.D), make([]float64, f.Block*f.plan.K)
	f.out = make([]float32, f.Block*(f.plan.D+f.plan.K))
	return nil
}

func (f *finishFn) ProcessElement(bl int, s Sums, emit func(int, []byte)) error {
	D, K := f.plan.D, f.plan.K
	first := bl * f.Block
	n := min(f.Block, f.plan.T-first)
	if bl < 0 || n < 1 {
		return fmt.Errorf("avgmix pipeline: block %d is outside the %d outputs", bl, f.plan.T)
	}
	sx, sy, out := f.sx[:n*D], f.sy[:n*K], f.out[:n*(D+K)]
	switch len(s.V) {
	case 0:
		clear(sx)
		clear(sy)
	case n * (D + K):
		for o := range n {
			row := s.V[o*(D+K) : (o+1)*(D+K)]
			copy(sx[o*D:(o+1)*D], row[:D])
			copy(sy[o*K:(o+1)*K], row[D:])
		}
	default:
		return fmt.Errorf("avgmix pipeline: block %d has %d sums, want %d", bl, len(s.V), n*(D+K))
	}
	if err := f.plan.Finish(f.noise, sx, sy, out); err != nil {
		return err
	}
	rec := make([]byte, 0, n*(4+4*(D+K)))
	for o := range n {
		rec = appendRecord(rec, first+o, out[o*(D+K):(o+1)*(D+K)])
	}
	emit(bl%f.Parts, rec)
	return nil
}

// encodeRecord is the staging format of one released row: the output index
// as uint32, then the D+K float32 values, little-endian.
func encodeRecord(t int, row []float32) []byte { return appendRecord(nil, t, row) }

// appendRecord appends the staging record of output t to b.
func appendRecord(b []byte, t int, row []float32) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(t))
	for _, v := range row {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func init() {
	beam.RegisterCoder(reflect.TypeOf(Sums{}), encodeSums, decodeSums)
	register.DoFn4x1[context.Context, Rows, []byte, func(int, Sums), error](&sampleFn{})
	register.DoFn2x0[[]byte, func(int, Sums)](&outputsFn{})
	register.Combiner1[Sums](&sumFn{})
	register.DoFn3x1[int, Sums, func(int, []byte), error](&finishFn{})
	register.Emitter2[int, Sums]()
	register.Emitter2[int, []byte]()
}
