package pipeline

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	mrand "math/rand/v2"
	"net/url"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/release"
)

// AggregateOptions are the knobs of [Aggregate]; none affects the law.
type AggregateOptions struct {
	// DB is the database file holding the protected table; every worker
	// reads its shard of the table from it, read-only. Unused when Shards
	// has files.
	DB string
	// Parts is the number of shards the table is read in (by rowid); 0
	// means 4.
	Parts int
	// Shards, when it has files, holds the table's rows instead of DB.
	Shards Shards
	// Staging and StagingParts: where the released rows are written, as in
	// AvgmixOptions; 0 parts means 4.
	Staging      string
	StagingParts int
}

// Job is what the workers need to rebuild a statement's plan: its public
// inputs (protect.StatementInputs, the public key values in this package's
// typed encoding) and what the driver charged, which every worker checks its
// plan against before it releases anything.
type Job struct {
	Inputs    []byte // StatementInputs as JSON
	KeyValues []byte // the public key values, typed
	Charged   []byte // JSON of [mechanism, details] as charged
}

// NewJob packs a planned statement for the workers.
func NewJob(s *protect.Statement) (Job, error) {
	in := s.Inputs()
	ij, err := json.Marshal(in)
	if err != nil {
		return Job{}, err
	}
	kv := binary.AppendUvarint(nil, uint64(len(in.KeyValues)))
	for _, vs := range in.KeyValues {
		if kv, err = appendValues(kv, vs); err != nil {
			return Job{}, fmt.Errorf("public keys: %w", err)
		}
	}
	ch, err := chargedJSON(s)
	if err != nil {
		return Job{}, err
	}
	return Job{Inputs: ij, KeyValues: kv, Charged: ch}, nil
}

func chargedJSON(s *protect.Statement) ([]byte, error) {
	// The record as the ledger row's fields (sorted keys), as jobs written
	// before the record was typed hold it.
	d, err := mechanism.Fields(s.Details())
	if err != nil {
		return nil, err
	}
	return json.Marshal([]any{s.Mechanism(), d})
}

// Statement rebuilds the statement and checks that it charges exactly what
// the driver charged.
func (j Job) Statement() (*protect.Statement, error) {
	var in protect.StatementInputs
	if err := json.Unmarshal(j.Inputs, &in); err != nil {
		return nil, fmt.Errorf("aggregate pipeline: decoding the statement: %w", err)
	}
	n, k := binary.Uvarint(j.KeyValues)
	if k <= 0 || n > uint64(len(j.KeyValues)) {
		return nil, errors.New("aggregate pipeline: malformed public keys")
	}
	b := j.KeyValues[k:]
	for range n {
		vs, rest, err := readValues(b)
		if err != nil {
			return nil, fmt.Errorf("aggregate pipeline: public keys: %w", err)
		}
		in.KeyValues, b = append(in.KeyValues, vs), rest
	}
	s, err := protect.NewStatement(in)
	if err != nil {
		return nil, fmt.Errorf("aggregate pipeline: %w", err)
	}
	ch, err := chargedJSON(s)
	if err != nil {
		return nil, err
	}
	if string(ch) != string(j.Charged) {
		return nil, fmt.Errorf("aggregate pipeline: the worker's plan charges %s, the driver charged %s", ch, j.Charged)
	}
	return s, nil
}

// Aggregate adds the release of a protected-mode DP statement to the
// pipeline; the driver must have charged s.Mechanism() before running it.
// The released rows (in no particular order; apply s.Order) land in
// opts.Staging; read them with [ReadAggregate].
func Aggregate(sc beam.Scope, s *protect.Statement, opts AggregateOptions) (err error) {
	defer func() { // the SDK reports construction errors by panicking
		if r := recover(); r != nil {
			err = fmt.Errorf("aggregate pipeline: %v", r)
		}
	}()
	if (opts.DB == "" && len(opts.Shards.Files) == 0) || opts.Staging == "" {
		return errors.New("aggregate pipeline: a database file or shards, and a staging directory, are required")
	}
	parts, sparts := opts.Parts, opts.StagingParts
	if parts == 0 {
		parts = 4
	}
	if sparts == 0 {
		sparts = 4
	}
	if parts < 1 || sparts < 1 {
		return fmt.Errorf("aggregate pipeline: parts must be >= 1, got %d and %d", parts, sparts)
	}
	job, err := NewJob(s)
	if err != nil {
		return err
	}
	// Groups released whatever the data: every combination of public keys,
	// or the one group of a statement without GROUP BY.
	var seeds [][]byte
	switch pk := s.PublicKeyGroups(); {
	case pk != nil:
		for _, keys := range pk {
			b, err := encodeGroup(groupAcc{Keys: keys, Public: true, HasKeys: true})
			if err != nil {
				return fmt.Errorf("aggregate pipeline: %w", err)
			}
			seeds = append(seeds, b)
		}
	case !s.HasGroupBy():
		b, _ := encodeGroup(groupAcc{HasKeys: true})
		seeds = append(seeds, b)
	}
	sc = sc.Scope("dpsql.aggregate")
	shards := make([]int, parts)
	for i := range shards {
		shards[i] = i
	}
	var read beam.PCollection
	if len(opts.Shards.Files) > 0 {
		read = beam.ParDo(sc.Scope("read"), &readShardFn{Job: job, Shards: opts.Shards}, beam.CreateList(sc.Scope("shards"), opts.Shards.Files))
	} else {
		read = beam.ParDo(sc.Scope("read"), &readRowsFn{Job: job, DB: opts.DB, Parts: parts}, beam.CreateList(sc.Scope("shards"), shards))
	}
	contrib := read
	if s.PrivacyUnit() != "" {
		contrib = beam.ParDo(sc.Scope("bound per person"), &boundFn{MaxRows: s.MaxRows(), MaxGroups: s.MaxGroups()}, beam.GroupByKey(sc, read))
	}
	seeded := beam.ParDo(sc.Scope("groups"), &seedFn{Groups: seeds}, beam.Impulse(sc))
	groups := beam.CombinePerKey(sc.Scope("sum"), &figuresFn{}, beam.Flatten(sc, contrib, seeded))
	rows := beam.ParDo(sc.Scope("noise and select"), &releaseGroupFn{Job: job, Parts: sparts}, groups)
	beam.ParDo0(sc.Scope("write"), &writeFn{Dir: opts.Staging}, beam.GroupByKey(sc, rows))
	return nil
}

// groupAcc is a group's figures on their way through the combine. Public
// marks the public-key combination the driver seeded: its keys are the ones
// released (the data's may be an equal REAL for an INTEGER key).
type groupAcc struct {
	Keys    []any
	HasKeys bool
	Public  bool
	F       protect.Figures // its Keys unused
}

func encodeGroup(g groupAcc) ([]byte, error) {
	var flags byte
	if g.HasKeys {
		flags |= 1
	}
	if g.Public {
		flags |= 2
	}
	b, err := appendValues([]byte{flags}, g.Keys)
	if err != nil {
		return nil, err
	}
	b = binary.AppendVarint(b, g.F.Persons)
	b = appendInts(b, g.F.Vals)
	b = appendInts(b, g.F.Counts)
	return appendInts(b, g.F.Sqs), nil
}

func decodeGroup(b []byte) (groupAcc, error) {
	var g groupAcc
	if len(b) == 0 || b[0] > 3 {
		return g, errValues
	}
	g.HasKeys, g.Public = b[0]&1 != 0, b[0]&2 != 0
	var err error
	if g.Keys, b, err = readValues(b[1:]); err != nil {
		return g, err
	}
	p, k := binary.Varint(b)
	if k <= 0 {
		return g, errValues
	}
	g.F.Persons, b = p, b[k:]
	for _, dst := range []*[]int64{&g.F.Vals, &g.F.Counts, &g.F.Sqs} {
		if *dst, b, err = readInts(b); err != nil {
			return g, err
		}
	}
	if len(b) != 0 {
		return g, errValues
	}
	return g, nil
}

// mustEncodeGroup is encodeGroup for the coder, whose values are SQL values
// by construction.
func mustEncodeGroup(g groupAcc) []byte {
	b, err := encodeGroup(g)
	if err != nil {
		panic(err)
	}
	return b
}

// readRowsFn reads one shard of the protected table with the statement's
// RowSQL (rows that pass WHERE, their values clamped and in fixed point by
// protect's own SQL) and emits each row keyed by its person (privacy unit),
// or, when each row is a person, straight as its group's contribution.
type readRowsFn struct {
	Job   Job
	DB    string
	Parts int

	s *protect.Statement
}

// Setup rebuilds the statement and checks it against the charge.
func (f *readRowsFn) Setup() (err error) {
	f.s, err = f.Job.Statement()
	return err
}

func (f *readRowsFn) ProcessElement(ctx context.Context, part int, emit func(string, []byte)) error {
	db, err := openReadOnly(f.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, f.s.RowSQL(f.Parts, part))
	if err != nil {
		return fmt.Errorf("aggregate pipeline: reading shard %d: %w", part, err)
	}
	defer rows.Close()
	return emitStatementRows(f.s, rows, emit)
}

// openReadOnly opens the database file for reading only.
func openReadOnly(path string) (*sql.DB, error) {
	return sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&_busy_timeout=30000&_query_only=1")
}

// boundFn bounds one person's contribution, exactly as protected mode's
// rewritten SQL does: in each of the person's groups at most MaxRows rows,
// chosen uniformly; of the person's groups at most MaxGroups, chosen
// uniformly; with MaxRows = MaxGroups = 1, one row chosen uniformly among all
// the person's rows. The choice depends only on this person's rows and on
// the DoFn's secure stream. It emits the person's contribution to each kept
// group (Persons = 1).
type boundFn struct {
	MaxRows, MaxGroups int

	r *mrand.Rand
}

// Setup seeds the DoFn instance's secure stream from crypto/rand.
func (f *boundFn) Setup() error {
	if f.MaxRows < 1 || f.MaxGroups < 1 {
		return fmt.Errorf("aggregate pipeline: contribution bounds %d and %d", f.MaxRows, f.MaxGroups)
	}
	f.r = release.NewNoise().Rand()
	return nil
}

// reservoir keeps a uniform sample of up to k of the rows it has seen.
type reservoir struct {
	seen int
	kept [][]byte
}

func (r *reservoir) add(rng *mrand.Rand, k int, row []byte) {
	r.seen++
	if len(r.kept) < k {
		r.kept = append(r.kept, row)
		return
	}
	if j := rng.IntN(r.seen); j < k {
		r.kept[j] = row
	}
}

func (f *boundFn) ProcessElement(_ string, rows func(*[]byte) bool, emit func(string, []byte)) error {
	var row []byte
	if f.MaxRows == 1 && f.MaxGroups == 1 {
		var one reservoir
		for rows(&row) {
			one.add(f.r, 1, row)
		}
		if len(one.kept) == 0 {
			return nil
		}
		return f.emit(one.kept, emit)
	}
	groups := map[string]*reservoir{}
	var order []string
	for rows(&row) {
		g, err := decodeGroup(row)
		if err != nil {
			return fmt.Errorf("aggregate pipeline: %w", err)
		}
		key := protect.CanonKey(g.Keys)
		res := groups[key]
		if res == nil {
			res = &reservoir{}
			groups[key] = res
			order = append(order, key)
		}
		res.add(f.r, f.MaxRows, row)
	}
	// A uniform choice of MaxGroups of the person's groups: the first
	// MaxGroups of a uniform shuffle.
	for i := 0; i < len(order) && i < f.MaxGroups; i++ {
		j := i + f.r.IntN(len(order)-i)
		order[i], order[j] = order[j], order[i]
		if err := f.emit(groups[order[i]].kept, emit); err != nil {
			return err
		}
	}
	return nil
}

// emit sums the kept rows of one (person, group) and emits them as one
// person's contribution.
func (f *boundFn) emit(kept [][]byte, emit func(string, []byte)) error {
	var sum groupAcc
	for i, b := range kept {
		g, err := decodeGroup(b)
		if err != nil {
			return fmt.Errorf("aggregate pipeline: %w", err)
		}
		if i == 0 {
			sum.Keys, sum.HasKeys = g.Keys, true
		}
		sum.F.Add(g.F)
	}
	sum.F.Persons = 1
	b, err := encodeGroup(sum)
	if err != nil {
		return err
	}
	emit(protect.CanonKey(sum.Keys), b)
	return nil
}

// seedFn emits the groups released whatever the data.
type seedFn struct {
	Groups [][]byte
}

func (f *seedFn) ProcessElement(_ []byte, emit func(string, []byte)) error {
	for _, b := range f.Groups {
		g, err := decodeGroup(b)
		if err != nil {
			return fmt.Errorf("aggregate pipeline: %w", err)
		}
		emit(protect.CanonKey(g.Keys), b)
	}
	return nil
}

// figuresFn sums the contributions to a group. The figures are integers
// (counts and fixed-point sums), so the sums are exact in any order.
type figuresFn struct{}

func (*figuresFn) CreateAccumulator() groupAcc { return groupAcc{} }

func (*figuresFn) AddInput(a groupAcc, b []byte) (groupAcc, error) {
	g, err := decodeGroup(b)
	if err != nil {
		return a, fmt.Errorf("aggregate pipeline: %w", err)
	}
	return mergeGroups(a, g), nil
}

func (*figuresFn) MergeAccumulators(a, b groupAcc) groupAcc { return mergeGroups(a, b) }

func (*figuresFn) ExtractOutput(a groupAcc) groupAcc { return a }

func mergeGroups(a, b groupAcc) groupAcc {
	if b.Public || !a.HasKeys {
		a.Keys, a.HasKeys, a.Public = b.Keys, b.HasKeys, b.Public || a.Public
	}
	a.F.Add(b.F)
	return a
}

// releaseGroupFn draws a group's noise with protect's own code (partition
// selection, then each aggregate) and keys each released row by a staging
// part.
type releaseGroupFn struct {
	Job   Job
	Parts int

	s     *protect.Statement
	noise *release.Noise
}

// Setup rebuilds the statement, checks it against the charge, and seeds the
// DoFn instance's secure noise from crypto/rand.
func (f *releaseGroupFn) Setup() (err error) {
	if f.s, err = f.Job.Statement(); err != nil {
		return err
	}
	f.noise = release.NewNoise()
	return nil
}

func (f *releaseGroupFn) ProcessElement(key string, g groupAcc, emit func(int, []byte)) error {
	fig := g.F
	fig.Keys = g.Keys
	row, ok := f.s.ReleaseGroup(f.noise, fig)
	if !ok {
		return nil
	}
	rec, err := appendValues(nil, row)
	if err != nil {
		return fmt.Errorf("aggregate pipeline: %w", err)
	}
	h := fnv.New32a()
	io.WriteString(h, key)
	emit(int(h.Sum32()%uint32(f.Parts)), rec)
	return nil
}

// ReadAggregate reads the staged rows of an aggregate release from dir.
func ReadAggregate(ctx context.Context, dir string, columns int) ([][]any, error) {
	fs, err := filesystem.New(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("staging %s: %w", dir, err)
	}
	defer fs.Close()
	files, err := fs.List(ctx, strings.TrimRight(dir, "/")+"/part-*")
	if err != nil {
		return nil, fmt.Errorf("staging %s: %w", dir, err)
	}
	var out [][]any
	for _, name := range files {
		rc, err := fs.OpenRead(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("staging %s: %w", name, err)
		}
		b, err := io.ReadAll(bufio.NewReader(rc))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("staging %s: %w", name, err)
		}
		for len(b) > 0 {
			row, rest, err := readValues(b)
			if err != nil || len(row) != columns {
				return nil, fmt.Errorf("staging %s: a malformed row", name)
			}
			out, b = append(out, row), rest
		}
	}
	return out, nil
}

func init() {
	beam.RegisterCoder(reflect.TypeOf(groupAcc{}), mustEncodeGroup, decodeGroup)
	register.DoFn3x1[context.Context, int, func(string, []byte), error](&readRowsFn{})
	register.DoFn3x1[string, func(*[]byte) bool, func(string, []byte), error](&boundFn{})
	register.DoFn2x1[[]byte, func(string, []byte), error](&seedFn{})
	register.Combiner3[groupAcc, []byte, groupAcc](&figuresFn{})
	register.DoFn3x1[string, groupAcc, func(int, []byte), error](&releaseGroupFn{})
	register.Emitter2[string, []byte]()
}
