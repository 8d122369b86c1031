package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// IDX files (the MNIST format, http://yann.lecun.com/exdb/mnist/): a magic
// number 0x0000TTNN (TT the element type, NN the number of dimensions), NN
// big-endian uint32 dimensions, then the data in C order. dpsql reads unsigned
// bytes (TT = 0x08): images 0x00000803 (n, rows, cols), or any 0x0000080N
// with N >= 2, flattened per item; labels 0x00000801.

const idxUbyte = 0x08

// idxReader reads an IDX file item by item.
type idxReader struct {
	r      io.Reader
	dims   []int
	rows   int
	rowLen int
	done   int
	buf    []byte
}

// readIDX reads the header of an IDX stream of unsigned bytes. total is the
// stream's size when known (-1 otherwise).
func readIDX(r io.Reader, total int64) (*idxReader, error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, fmt.Errorf("idx: reading the magic number: %w", noEOF(err))
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("idx: bad magic number 0x%x: not an IDX file", magic)
	}
	if magic[2] != idxUbyte {
		return nil, fmt.Errorf("idx: element type 0x%02x is not supported: only unsigned bytes (0x08, as in MNIST)", magic[2])
	}
	nd := int(magic[3])
	if nd == 0 {
		return nil, errors.New("idx: zero dimensions")
	}
	a := &idxReader{r: r, dims: make([]int, nd), rowLen: 1}
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
		if d != 0 && a.rowLen > maxRowLen/int(d) {
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

func (a *idxReader) Rows() int { return a.rows }
func (a *idxReader) Dim() int  { return a.rowLen }

// ReadRow reads the next item into dst (len Dim), each byte times scale.
func (a *idxReader) ReadRow(dst []float32, scale float64) error {
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

// ReadLabels reads a labels file (magic 0x00000801).
func (a *idxReader) ReadLabels() ([]int64, error) {
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
