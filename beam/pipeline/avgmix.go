package pipeline

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

func encodeSums(s Sums) []byte {
	b := make([]byte, 8*len(s.V))
	for i, v := range s.V {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

func decodeSums(b []byte) (Sums, error) {
	if len(b)%8 != 0 {
		return Sums{}, fmt.Errorf("sums: %d bytes is not a whole number of float64 values", len(b))
	}
	if len(b) == 0 {
		return Sums{}, nil
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return Sums{V: v}, nil
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
}

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
	partial := beam.ParDo(s.Scope("clip and sample"), &sampleFn{PlanJSON: planJSON, CombineBytes: cb}, rows, beam.SideInput{Input: side})
	empty := beam.ParDo(s.Scope("outputs"), &outputsFn{T: plan.T}, beam.Impulse(s))
	sums := beam.CombinePerKey(s.Scope("sum"), &sumFn{}, beam.Flatten(s, partial, empty))
	recs := beam.ParDo(s.Scope("noise"), &finishFn{PlanJSON: planJSON, Parts: parts}, sums)
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
// outputs' accumulators, which it emits when the bundle ends or when they
// outgrow CombineBytes.
type sampleFn struct {
	// PlanJSON is the plan as JSON: a Go struct field of the plan's type
	// would make Beam infer a schema for the (recursive) mechanism type.
	PlanJSON     []byte
	CombineBytes int

	plan  avgmix.Plan
	r     *mrand.Rand
	acc   map[int][]float64
	pools [][]int32
	x, y  []float32
}

// Setup decodes the plan and seeds the DoFn instance's secure stream from
// crypto/rand.
func (f *sampleFn) Setup() error {
	if err := json.Unmarshal(f.PlanJSON, &f.plan); err != nil {
		return fmt.Errorf("avgmix pipeline: decoding the plan: %w", err)
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
	limit := max(1, f.CombineBytes/(8*width))
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
		pl.SampleRow(f.r, pool, func(t int) {
			a := f.acc[t]
			if a == nil {
				a = make([]float64, width)
				f.acc[t] = a
			}
			for j, v := range x {
				a[j] += float64(v)
			}
			for j, v := range y {
				a[D+j] += float64(v)
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
	for t, a := range f.acc {
		emit(t, Sums{V: a})
	}
	clear(f.acc)
}

// outputsFn emits every output index with empty sums, so that each output
// is released once whether or not any row joined it.
type outputsFn struct {
	T int
}

func (f *outputsFn) ProcessElement(_ []byte, emit func(int, Sums)) {
	for t := range f.T {
		emit(t, Sums{})
	}
}

// sumFn adds partial sums. The values are quantised so these float64 sums
// are exact, whatever the order.
type sumFn struct{}

func (*sumFn) MergeAccumulators(a, b Sums) Sums {
	switch {
	case b.V == nil:
		return a
	case a.V == nil:
		return Sums{V: append([]float64(nil), b.V...)}
	}
	for i, v := range b.V {
		a.V[i] += v
	}
	return a
}

// finishFn adds the noise to an output's exact sums, divides by m, and keys
// the record by its staging part.
type finishFn struct {
	PlanJSON []byte // see sampleFn
	Parts    int

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
	f.sx, f.sy = make([]float64, f.plan.D), make([]float64, f.plan.K)
	f.out = make([]float32, f.plan.D+f.plan.K)
	return nil
}

func (f *finishFn) ProcessElement(t int, s Sums, emit func(int, []byte)) error {
	D, K := f.plan.D, f.plan.K
	switch len(s.V) {
	case 0:
		clear(f.sx)
		clear(f.sy)
	case D + K:
		copy(f.sx, s.V[:D])
		copy(f.sy, s.V[D:])
	default:
		return fmt.Errorf("avgmix pipeline: output %d has %d sums, want %d", t, len(s.V), D+K)
	}
	if err := f.plan.Finish(f.noise, f.sx, f.sy, f.out); err != nil {
		return err
	}
	emit(t%f.Parts, encodeRecord(t, f.out))
	return nil
}

// encodeRecord is the staging format of one released row: the output index
// as uint32, then the D+K float32 values, little-endian.
func encodeRecord(t int, row []float32) []byte {
	b := make([]byte, 4+4*len(row))
	binary.LittleEndian.PutUint32(b, uint32(t))
	for i, v := range row {
		binary.LittleEndian.PutUint32(b[4+4*i:], math.Float32bits(v))
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
