package sqlfuncs

import (
	"bytes"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/internal/sqlite"
)

// vectorRows buffers the rows an aggregate sees: features in chunks of
// chunkRows rows (handed to dp_avgmix as they are, or joined by features()
// into one contiguous []float32, n x d, row-major), and labels as class ids or
// label vectors. Chunks avoid re-copying the table as it grows.
type vectorRows struct {
	fn      string
	X       []float32 // the chunk being filled
	chunks  [][]float32
	D       int
	N       int
	Classes []int     // class id per row, when labels are integers
	Y       []float32 // n x K label vectors, when labels are BLOBs
	K       int       // label vector length (BLOB labels) or max class id + 1
	opts    []byte
	// expect, if positive, is how many rows the caller said to expect (a
	// public figure, such as dp_avgmix's asserted n); it only sizes the
	// memory faulted in ahead, never what is read or released.
	expect int
	failed error         // the first row error: the statement is failing
	arena  *sqlite.Arena // holds X and chunks; free releases it
}

// alloc returns an empty feature buffer of capacity n from the rows' arena.
func (r *vectorRows) alloc(n int) []float32 {
	if r.arena == nil {
		r.arena = sqlite.NewArena()
	}
	return r.arena.Alloc(n)
}

// free releases the buffered features; they may not be used afterwards.
func (r *vectorRows) free() {
	r.arena.Free()
	r.X, r.chunks = nil, nil
}

// checkClasses checks INTEGER labels against the public number of classes k.
func (r *vectorRows) checkClasses(fn string, k int) error {
	if r.K <= k {
		return nil
	}
	for i, y := range r.Classes {
		if y >= k {
			return fmt.Errorf("%s: label of row %d is %d, outside the %d classes 0..%d", fn, i+1, y, k, k-1)
		}
	}
	return nil
}

// fail remembers the first error of a Step, a recovered panic included, so
// that finish refuses to release.
func (r *vectorRows) fail(err error) {
	if err != nil && r.failed == nil {
		r.failed = err
	}
}

// finish reports whether the buffered rows may be released. SQLite calls an
// aggregate's final function also while it cleans up a failing or
// interrupted statement; a release must not happen then.
func (r *vectorRows) finish(c *Conn) error {
	r.arena.DropSpare() // no more rows: a chunk prepared for them is not needed
	if r.failed != nil {
		return r.failed
	}
	if c.db.Interrupted() {
		return fmt.Errorf("%s: the statement was interrupted; nothing was released or charged", r.fn)
	}
	return nil
}

// add appends one row; row numbers in errors count from 1 in the order SQLite
// fed the rows.
func (r *vectorRows) add(features, label, opts any) error {
	if r.failed != nil {
		return r.failed
	}
	err := r.addRow(features, label, opts)
	r.fail(err)
	return err
}

// chunkRows is the number of rows per chunk; a power of two, as
// avgmix.Data.ChunkRows requires.
const chunkRows = 4096

// maxFirstChunk is the most float32s (256 MB) reserved for the first chunk
// before its rows have arrived.
const maxFirstChunk = 1 << 26

// featureChunks returns the features as chunks of exactly chunkRows rows (the
// last may hold fewer), without copying.
func (r *vectorRows) featureChunks() [][]float32 {
	cs := r.chunks
	if len(r.X) > 0 {
		cs = append(cs[:len(cs):len(cs)], r.X)
	}
	return cs
}

// features returns the n x d features as one contiguous slice and drops the
// chunks.
func (r *vectorRows) features() []float32 {
	if len(r.chunks) == 0 {
		return r.X
	}
	// Each chunk is released as soon as it is copied, so that the rows are
	// held about once, not twice.
	old := r.arena
	r.arena = nil
	x := r.alloc(r.N * r.D)
	for i, c := range r.chunks {
		x = append(x, c...)
		old.Release(c)
		r.chunks[i] = nil
	}
	x = append(x, r.X...)
	old.Free()
	r.chunks, r.X = nil, x
	return x
}

func (r *vectorRows) addRow(features, label, opts any) error {
	row := r.N + 1
	if r.N > 0 && len(r.X) == chunkRows*r.D {
		r.chunks = append(r.chunks, r.X[:len(r.X):len(r.X)])
		r.X = r.alloc(chunkRows * r.D)
	} else if r.N > 0 && len(r.X) == chunkRows/2*r.D && cap(r.X) == chunkRows*r.D {
		// Half way through a chunk: have the next chunk's pages faulted in
		// meanwhile, on the other core, as far as the rows expected fill
		// it (all of it when no figure is expected).
		next := r.N + chunkRows/2 // the next chunk's first row
		fill := chunkRows
		if r.expect > 0 {
			fill = min(fill, r.expect-next)
		}
		if fill > 0 {
			r.arena.Prepare(chunkRows*r.D, fill*r.D)
		}
	}
	if r.N == 0 {
		b, err := optionBytes(r.fn, opts)
		if err != nil {
			return err
		}
		r.opts = bytes.Clone(b) // opts may point into SQLite's memory
	} else if !sameOptions(r.opts, opts) {
		return fmt.Errorf("%s: options differ at row %d: pass the same options on every row (a constant json_object)", r.fn, row)
	}
	before := len(r.X)
	x, err := appendVector(r.X, features)
	if err != nil {
		return fmt.Errorf("%s: features of row %d: %w", r.fn, row, err)
	}
	d := len(x) - before
	if r.N == 0 {
		r.D = d
		// The first chunk, from the arena; AppendVector grew a small one.
		// Its room for chunkRows rows is reserved only while that stays
		// modest: one row must not make the process reserve thousands of
		// times its size (a row of 8 MB asked for 32 GB, which Go cannot
		// refuse with an error, only abort on). Wider rows grow the chunk
		// by append, as the rows arrive.
		room := chunkRows * d
		if room > maxFirstChunk {
			room = d
		}
		x = append(r.alloc(room), x...)
	} else if d != r.D {
		return fmt.Errorf("%s: features of row %d have %d dimensions, earlier rows have %d", r.fn, row, d, r.D)
	}
	switch l := label.(type) {
	case int64:
		if r.Y != nil {
			return fmt.Errorf("%s: label of row %d is an INTEGER but earlier labels are vectors", r.fn, row)
		}
		if l < 0 || l > math.MaxInt32 {
			return fmt.Errorf("%s: label of row %d is %d; class ids must be integers from 0", r.fn, row, l)
		}
		r.Classes = append(r.Classes, int(l))
		if int(l)+1 > r.K {
			r.K = int(l) + 1
		}
	case float64:
		if l != math.Trunc(l) || l < 0 || l > math.MaxInt32 {
			return fmt.Errorf("%s: label of row %d is %v; class ids must be integers from 0", r.fn, row, l)
		}
		return r.addRow(features, int64(l), opts)
	case []byte:
		if l == nil {
			return fmt.Errorf("%s: label of row %d is NULL", r.fn, row)
		}
		if r.Classes != nil {
			return fmt.Errorf("%s: label of row %d is a vector but earlier labels are class ids", r.fn, row)
		}
		lb := len(r.Y)
		y, err := appendVector(r.Y, l)
		if err != nil {
			return fmt.Errorf("%s: label vector of row %d: %w", r.fn, row, err)
		}
		k := len(y) - lb
		if r.N == 0 {
			r.K = k
		} else if k != r.K {
			return fmt.Errorf("%s: label vector of row %d has %d entries, earlier rows have %d", r.fn, row, k, r.K)
		}
		r.Y = y
	case nil:
		return fmt.Errorf("%s: label of row %d is NULL", r.fn, row)
	default:
		return fmt.Errorf("%s: label of row %d must be an INTEGER class id or a float32 vector BLOB, got %s", r.fn, row, typeName(label))
	}
	r.X = x
	r.N++
	return nil
}
