// Package idx reads IDX files of unsigned bytes, the format of the MNIST and
// Fashion-MNIST data sets (http://yann.lecun.com/exdb/mnist/).
//
// An IDX file is a magic number 0x0000TTNN (TT the element type, NN the
// number of dimensions), NN big-endian uint32 dimensions, then the data in C
// order. Only unsigned bytes (TT = 0x08) are read: images 0x00000803 (n,
// rows, cols), or any 0x0000080N with N >= 2, flattened per item (see
// [Reader.ReadRow]); labels 0x00000801 (see [Reader.ReadLabels]). The first
// dimension counts the items. Decompressing (MNIST files are usually
// gzipped) is the caller's business.
//
// The reader is meant for files from anywhere, so a hostile header cannot
// make it allocate without bound: an item holds at most [MaxItemLen] bytes,
// items may not be empty, and when the stream's size is known every item the
// header announces must fit in it. When the size is unknown (a gzip stream)
// reading fails at the first missing item, and what is allocated grows with
// the data actually read.
package idx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ubyte is the element type of unsigned bytes.
const ubyte = 0x08

// MaxItemLen is the largest item, in bytes (elements), a Reader accepts.
const MaxItemLen = 1 << 24

// Reader reads an IDX file item by item.
type Reader struct {
	r      io.Reader
	dims   []int
	rows   int
	rowLen int
	done   int
	buf    []byte
}

// NewReader reads the header of an IDX stream of unsigned bytes. total is the
// stream's size in bytes when known (-1 otherwise), checked against the
// dimensions up front.
func NewReader(r io.Reader, total int64) (*Reader, error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, fmt.Errorf("idx: reading the magic number: %w", noEOF(err))
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("idx: bad magic number 0x%x: not an IDX file", magic)
	}
	if magic[2] != ubyte {
		return nil, fmt.Errorf("idx: element type 0x%02x is not supported: only unsigned bytes (0x08, as in MNIST)", magic[2])
	}
	nd := int(magic[3])
	if nd == 0 {
		return nil, errors.New("idx: zero dimensions")
	}
	a := &Reader{r: r, dims: make([]int, nd), rowLen: 1}
	var b [4]byte
	for i := range a.dims {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("idx: reading dimension %d: %w", i, noEOF(err))
		}
		d := binary.BigEndian.Uint32(b[:])
		if d > 1<<31-1 {
			return nil, fmt.Errorf("idx: dimension %d is %d, too large", i, d)
		}
		a.dims[i] = int(d)
		if i == 0 {
			continue
		}
		if d != 0 && a.rowLen > MaxItemLen/int(d) {
			return nil, fmt.Errorf("idx: items of shape %v are too large", a.dims[1:i+1])
		}
		a.rowLen *= int(d)
	}
	a.rows = a.dims[0]
	if a.rowLen == 0 {
		return nil, fmt.Errorf("idx: dimensions %v make empty items", a.dims)
	}
	if total >= 0 {
		data := total - 4 - 4*int64(nd)
		if int64(a.rows) > data/int64(a.rowLen) {
			return nil, fmt.Errorf("idx: dimensions %v need %d bytes of data, but the file holds %d", a.dims, int64(a.rows)*int64(a.rowLen), data)
		}
	}
	return a, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Dims returns the dimensions of the header, the number of items first.
func (a *Reader) Dims() []int { return slices.Clone(a.dims) }

// Rows is the number of items; Dim the number of bytes in each (1 for a
// labels file).
func (a *Reader) Rows() int { return a.rows }
func (a *Reader) Dim() int  { return a.rowLen }

// ReadRow reads the next item into dst (len Dim), each byte times scale. It
// returns io.EOF after the last item.
func (a *Reader) ReadRow(dst []float32, scale float64) error {
	if a.done >= a.rows {
		return io.EOF
	}
	if cap(a.buf) < a.rowLen {
		a.buf = make([]byte, a.rowLen)
	}
	b := a.buf[:a.rowLen]
	if _, err := io.ReadFull(a.r, b); err != nil {
		return fmt.Errorf("idx: item %d: %w", a.done, noEOF(err))
	}
	a.done++
	for i, x := range b {
		dst[i] = float32(float64(x) * scale)
	}
	return nil
}

// ReadLabels reads a whole labels file (magic 0x00000801): one byte per item.
func (a *Reader) ReadLabels() ([]int64, error) {
	if len(a.dims) != 1 {
		return nil, fmt.Errorf("idx: a labels file has one dimension (magic 0x00000801), this one has %d", len(a.dims))
	}
	out := make([]int64, 0, min(a.rows, 1<<20))
	buf := make([]byte, 1<<16)
	for len(out) < a.rows {
		n := min(len(buf), a.rows-len(out))
		if _, err := io.ReadFull(a.r, buf[:n]); err != nil {
			return nil, fmt.Errorf("idx: label %d: %w", len(out), noEOF(err))
		}
		for _, x := range buf[:n] {
			out = append(out, int64(x))
		}
	}
	return out, nil
}

// Encode returns the IDX file of unsigned bytes with the given dimensions
// and data (C order); tests build their inputs with it.
func Encode(dims []int, data []byte) []byte {
	b := []byte{0, 0, ubyte, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, data...)
}
