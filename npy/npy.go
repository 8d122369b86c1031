// Package npy reads NumPy .npy arrays row by row, for dpsql import and
// dpsql-beam, and encodes them as numpy.save does, for dpsql export, tests
// and examples. It is a public package because dpsql-beam, a module of its
// own (beam/), reads its shards with it: its API is kept as any other
// exported API of the module.
//
// Why not github.com/sbinet/npyio (read for this decision: its npy/reader.go,
// 2026-11): it reads a whole array into one Go slice, one io.ReadFull per
// element, where dpsql import streams 60,000 rows of 784 values with one
// row in memory; it allocates the header length a file states (up to 4 GiB
// in format 2) before checking it; it locates the header's keys by their
// byte positions in the order numpy happens to write them, so a reordered or
// hostile header slices out of range (a panic, which dpsql must never have
// on user input) instead of failing with an error; it does not read format
// 3.0. This reader parses the header dict as a
// small Python literal with bounds (maxHeaderLen, maxRowLen), streams rows,
// and is fuzzed (FuzzReader).
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// NumPy .npy format, versions 1.0 to 3.0
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
// the magic "\x93NUMPY", major and minor version bytes, the header length
// (uint16 little-endian in version 1, uint32 in versions 2 and 3), and a
// Python dict literal such as
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
//
// padded with spaces and a newline; then the data in C order.

// Magic starts every .npy file.
const Magic = "\x93NUMPY"

// Limits that keep a hostile header from making the reader allocate without
// bound.
const (
	maxHeaderLen = 1 << 20
	maxRowLen    = 1 << 24 // elements in one row
)

// header is the decoded header dict.
type header struct {
	Descr   string
	Fortran bool
	Shape   []int
}

// Reader reads an array row by row: the first axis indexes rows, the
// others are flattened (C order) into one vector per row.
type Reader struct {
	r      io.Reader
	h      header
	kind   byte // 'f', 'u', 'i' or 'b'
	size   int  // bytes per element
	order  binary.ByteOrder
	rows   int
	rowLen int
	done   int
	buf    []byte
}

// NewReader reads the header of an .npy stream. total is the stream's size in
// bytes when known (-1 otherwise), checked against the shape up front.
func NewReader(r io.Reader, total int64) (*Reader, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: reading the magic: %w", noEOF(err))
	}
	if string(pre[:6]) != Magic {
		return nil, errors.New("npy: not a NumPy .npy file (bad magic)")
	}
	var hlen, pos int64
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading the header length: %w", noEOF(err))
		}
		hlen, pos = int64(binary.LittleEndian.Uint16(b[:])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading the header length: %w", noEOF(err))
		}
		hlen, pos = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d", pre[6], pre[7])
	}
	if hlen > maxHeaderLen {
		return nil, fmt.Errorf("npy: header of %d bytes is implausibly long", hlen)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, fmt.Errorf("npy: reading the %d-byte header: %w", hlen, noEOF(err))
	}
	h, err := parseHeader(string(hb))
	if err != nil {
		return nil, err
	}
	a := &Reader{r: r, h: h}
	if err := a.setDescr(h.Descr); err != nil {
		return nil, err
	}
	if h.Fortran {
		return nil, errors.New("npy: fortran_order arrays are not supported; save with np.save(f, np.ascontiguousarray(a))")
	}
	if len(h.Shape) == 0 {
		return nil, errors.New("npy: a 0-d array (a single number) has no rows")
	}
	a.rows, a.rowLen = h.Shape[0], 1
	for _, d := range h.Shape[1:] {
		if d != 0 && a.rowLen > maxRowLen/d {
			return nil, fmt.Errorf("npy: rows of shape %v are too large", h.Shape[1:])
		}
		a.rowLen *= d
	}
	if a.rowLen == 0 {
		return nil, fmt.Errorf("npy: shape %v makes empty rows", h.Shape)
	}
	if total >= 0 {
		want := pos + hlen
		if int64(a.rows) > (total-want)/int64(a.rowLen*a.size) {
			return nil, fmt.Errorf("npy: shape %v needs %d rows of %d bytes, but the file holds %d bytes of data", h.Shape, a.rows, a.rowLen*a.size, total-want)
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

func (a *Reader) setDescr(d string) error {
	if len(d) < 3 {
		return fmt.Errorf("npy: unsupported dtype %q", d)
	}
	switch d[0] {
	case '<', '|', '=':
		a.order = binary.LittleEndian
	case '>':
		a.order = binary.BigEndian
	default:
		return fmt.Errorf("npy: unsupported dtype %q (byte order %q)", d, d[0])
	}
	a.kind = d[1]
	n, err := strconv.Atoi(d[2:])
	if err != nil {
		return fmt.Errorf("npy: unsupported dtype %q", d)
	}
	a.size = n
	switch {
	case a.kind == 'f' && (n == 4 || n == 8):
	case (a.kind == 'u' || a.kind == 'i') && (n == 1 || n == 2 || n == 4 || n == 8):
	case a.kind == 'b' && n == 1:
	default:
		return fmt.Errorf("npy: unsupported dtype %q: use float32, float64, uint8 or an integer type", d)
	}
	return nil
}

// Rows is the length of the first axis; Dim the length of each flattened row.
func (a *Reader) Rows() int { return a.rows }
func (a *Reader) Dim() int  { return a.rowLen }

// Bytes reports whether the elements are unsigned bytes (dtype uint8), such
// as image pixels in 0..255.
func (a *Reader) Bytes() bool { return a.kind == 'u' && a.size == 1 }

// ReadRow reads the next row into dst (len Dim), converting to float64 via f.
func (a *Reader) readRow(f func(i int, x float64)) error {
	if a.done >= a.rows {
		return io.EOF
	}
	n := a.rowLen * a.size
	if cap(a.buf) < n {
		a.buf = make([]byte, n)
	}
	b := a.buf[:n]
	if _, err := io.ReadFull(a.r, b); err != nil {
		return fmt.Errorf("npy: row %d: %w", a.done, noEOF(err))
	}
	a.done++
	o := a.order
	for i := 0; i < a.rowLen; i++ {
		p := b[i*a.size:]
		var x float64
		switch a.kind {
		case 'f':
			if a.size == 4 {
				x = float64(math.Float32frombits(o.Uint32(p)))
			} else {
				x = math.Float64frombits(o.Uint64(p))
			}
		case 'u', 'b':
			switch a.size {
			case 1:
				x = float64(p[0])
			case 2:
				x = float64(o.Uint16(p))
			case 4:
				x = float64(o.Uint32(p))
			default:
				x = float64(o.Uint64(p))
			}
		case 'i':
			switch a.size {
			case 1:
				x = float64(int8(p[0]))
			case 2:
				x = float64(int16(o.Uint16(p)))
			case 4:
				x = float64(int32(o.Uint32(p)))
			default:
				x = float64(int64(o.Uint64(p)))
			}
		}
		f(i, x)
	}
	return nil
}

// ReadRow reads the next row as float32, multiplied by scale; it rejects
// values that are not finite as float32. It returns io.EOF after the last row.
func (a *Reader) ReadRow(dst []float32, scale float64) error {
	var bad error
	err := a.readRow(func(i int, x float64) {
		v := float32(x * scale)
		if bad == nil && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
			bad = fmt.Errorf("npy: row %d, element %d is %v as float32; vectors must be finite", a.done-1, i, x*scale)
		}
		dst[i] = v
	})
	if err != nil {
		return err
	}
	return bad
}

// ReadLabels reads a whole array of integer labels: shape (n,) or (n, 1).
func (a *Reader) ReadLabels() ([]int64, error) {
	if a.rowLen != 1 {
		return nil, fmt.Errorf("npy: labels must have shape (n,) or (n, 1), got %v", a.h.Shape)
	}
	out := make([]int64, 0, min(a.rows, 1<<20))
	for {
		var v float64
		err := a.readRow(func(_ int, x float64) { v = x })
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return nil, fmt.Errorf("npy: label %d is %v, not an integer", len(out), v)
		}
		out = append(out, int64(v))
	}
}

// parseHeader parses the header dict: a Python literal with string keys
// and string, bool, None, integer or tuple-of-integer values. 'descr',
// 'fortran_order' and 'shape' are required; other keys are ignored.
func parseHeader(s string) (header, error) {
	var h header
	p := &pyParser{s: strings.TrimRight(s, " \t\r\n\x00")}
	v, err := p.value()
	if err != nil {
		return h, fmt.Errorf("npy: bad header %q: %w", abbrev(s, 80), err)
	}
	p.space()
	if p.i != len(p.s) {
		return h, fmt.Errorf("npy: bad header %q: trailing text at offset %d", abbrev(s, 80), p.i)
	}
	d, ok := v.(map[string]any)
	if !ok {
		return h, fmt.Errorf("npy: header is not a dict: %q", abbrev(s, 80))
	}
	descr, ok := d["descr"].(string)
	if !ok {
		return h, fmt.Errorf("npy: header lacks a string 'descr' (structured dtypes are not supported): %q", abbrev(s, 80))
	}
	fo, ok := d["fortran_order"].(bool)
	if !ok {
		return h, fmt.Errorf("npy: header lacks a boolean 'fortran_order': %q", abbrev(s, 80))
	}
	shape, ok := d["shape"].([]int)
	if !ok {
		return h, fmt.Errorf("npy: header lacks a 'shape' tuple of integers: %q", abbrev(s, 80))
	}
	h.Descr, h.Fortran, h.Shape = descr, fo, shape
	return h, nil
}

// pyParser parses the small subset of Python literals that .npy headers use.
type pyParser struct {
	s     string
	i     int
	depth int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) expect(c byte) error {
	if p.peek() != c {
		return fmt.Errorf("expected %q at offset %d", c, p.i)
	}
	p.i++
	return nil
}

func (p *pyParser) value() (any, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 16 {
		return nil, errors.New("nested too deeply")
	}
	switch c := p.peek(); {
	case c == '{':
		return p.dict()
	case c == '(':
		return p.tuple()
	case c == '\'' || c == '"':
		return p.str()
	case c == '[':
		return nil, fmt.Errorf("lists (structured dtypes) are not supported, at offset %d", p.i)
	case c == '-' || c >= '0' && c <= '9':
		return p.int()
	case c >= 'A' && c <= 'Z':
		j := p.i
		for j < len(p.s) && (p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= 'a' && p.s[j] <= 'z') {
			j++
		}
		w := p.s[p.i:j]
		p.i = j
		switch w {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return nil, nil
		}
		return nil, fmt.Errorf("unknown name %q", w)
	case c == 0:
		return nil, errors.New("unexpected end of header")
	default:
		return nil, fmt.Errorf("unexpected %q at offset %d", c, p.i)
	}
}

func (p *pyParser) dict() (any, error) {
	p.i++ // {
	d := map[string]any{}
	for {
		if p.peek() == '}' {
			p.i++
			return d, nil
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if _, dup := d[k]; dup {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		d[k] = v
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		default:
			return nil, fmt.Errorf("expected ',' or '}' at offset %d", p.i)
		}
	}
}

// tuple parses a tuple of non-negative integers, as shapes are.
func (p *pyParser) tuple() (any, error) {
	p.i++ // (
	out := []int{}
	for {
		if p.peek() == ')' {
			p.i++
			return out, nil
		}
		v, err := p.int()
		if err != nil {
			return nil, err
		}
		if v < 0 {
			return nil, fmt.Errorf("negative dimension %d", v)
		}
		out = append(out, v)
		switch p.peek() {
		case ',':
			p.i++
		case ')':
		default:
			return nil, fmt.Errorf("expected ',' or ')' at offset %d", p.i)
		}
	}
}

func (p *pyParser) int() (int, error) {
	p.space()
	j := p.i
	if j < len(p.s) && p.s[j] == '-' {
		j++
	}
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(p.s[p.i:j], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad integer %q at offset %d", p.s[p.i:j], p.i)
	}
	p.i = j
	if p.i < len(p.s) && (p.s[p.i] == 'L' || p.s[p.i] == 'l') { // Python 2 long
		p.i++
	}
	return int(n), nil
}

func (p *pyParser) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", fmt.Errorf("expected a string at offset %d", p.i)
	}
	p.i++
	var b bytes.Buffer
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\' && p.i < len(p.s):
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated string")
}

// abbrev shortens s to one line of at most n characters.
func abbrev(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Encode encodes an array exactly as numpy.save does: version 1.0, the
// header dict padded with spaces to a multiple of 64 bytes and ended by a
// newline, then data (C order, in the byte order descr names).
func Encode(descr string, shape []int, data []byte) []byte {
	return append(Header(descr, shape), data...)
}

// Header returns the bytes numpy.save writes before an array's data: the
// magic, version 1.0 and the header dict padded with spaces to a multiple of
// 64 bytes and ended by a newline. A writer that streams the data (C order,
// in the byte order descr names) writes it after these.
func Header(descr string, shape []int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		tuple = "(" + dims[0] + ",)"
	}
	dict := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + tuple + ", }"
	const pre = 10
	hl := len(dict) + 1
	hl += (64 - (pre+hl)%64) % 64
	b := make([]byte, 0, pre+hl)
	b = append(b, Magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(hl))
	b = append(b, dict...)
	b = append(b, strings.Repeat(" ", hl-len(dict)-1)...)
	return append(b, '\n')
}
