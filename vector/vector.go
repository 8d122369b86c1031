// Package vector is dpsql's vector format: a float32 vector is stored as a
// BLOB of little-endian float32s, one after another (the layout sqlite-vec
// uses, so its functions and dpsql's read each other's columns), and may be
// written as TEXT holding a JSON array of numbers ('[1, 2.5]').
//
// Decoding checks what design.md's "Vectors" asks of every vector dpsql
// reads: not empty, a length that is a multiple of 4 bytes, every element
// finite (no NaN, no infinity), and, for JSON, every number within float32's
// range. Checking that rows agree in dimension is the caller's, which knows
// what a row is. The package is pure Go: the SQL functions (package
// sqlfuncs), the release tables, dpsql import and export, and the Beam
// pipelines all use it.
package vector

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Decode decodes a vector BLOB: little-endian float32s, at least one, all
// finite.
func Decode(b []byte) ([]float32, error) { return AppendDecoded(nil, b) }

// AppendDecoded is Decode appending to dst, so that a caller can keep many
// rows in one contiguous slice. On error dst is returned as it was.
func AppendDecoded(dst []float32, b []byte) ([]float32, error) {
	n, err := Dim(b)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out := dst[start:]
	if littleEndian {
		// The blob is the memory layout: one copy, then a check of every
		// exponent.
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		if i := firstNonFinite(unsafe.Slice((*uint32)(unsafe.Pointer(&out[0])), n)); i >= 0 {
			return dst[:start], nonFinite(i, out[i])
		}
		return dst, nil
	}
	for i := range out {
		u := binary.LittleEndian.Uint32(b[4*i:])
		if u&0x7f800000 == 0x7f800000 { // exponent all ones: NaN or Inf
			return dst[:start], nonFinite(i, math.Float32frombits(u))
		}
		out[i] = math.Float32frombits(u)
	}
	return dst, nil
}

func nonFinite(i int, x float32) error {
	return fmt.Errorf("vector element %d is %v; vectors must be finite", i, x)
}

// Dim returns the number of float32 elements of a vector BLOB, refusing an
// empty one and a length that is not a multiple of 4. It does not look at
// the elements.
func Dim(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, errors.New("vector blob is empty")
	}
	if len(b)%4 != 0 {
		return 0, fmt.Errorf("vector blob has %d bytes, not a multiple of 4 (float32)", len(b))
	}
	return len(b) / 4, nil
}

// FirstNonFinite returns the index of the first NaN or infinite element of
// a vector BLOB, or -1 when every element is finite (or b holds none).
func FirstNonFinite(b []byte) int {
	for i := 0; 4*i+4 <= len(b); i++ {
		if binary.LittleEndian.Uint32(b[4*i:])&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// AppendElements appends the float32 elements of a vector BLOB to dst as
// they are, NaN and infinities included, without any check (a trailing
// partial element is ignored): for writing a column out that Dim has
// accepted.
func AppendElements(dst []float32, b []byte) []float32 {
	for j := 0; j+4 <= len(b); j += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
	}
	return dst
}

// ParseJSON decodes a vector written as a JSON array of numbers.
func ParseJSON(s string) ([]float32, error) { return AppendJSON(nil, s) }

// AppendJSON is ParseJSON appending to dst. Every element must be a number
// whose magnitude a float32 can hold (at most about 3.4e38; smaller ones
// round to the nearest float32, tiny ones to zero). On error dst is
// returned as it was.
func AppendJSON(dst []float32, s string) ([]float32, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var xs []any
	if err := dec.Decode(&xs); err != nil {
		return dst, fmt.Errorf("vector text is not a JSON array of numbers: %v", jsonProblem(err))
	}
	if rest := strings.TrimSpace(s[dec.InputOffset():]); rest != "" {
		return dst, errors.New("vector text is not a JSON array of numbers: text follows the array")
	}
	if len(xs) == 0 {
		return dst, errors.New("vector is empty")
	}
	start := len(dst)
	dst = slices.Grow(dst, len(xs))
	for i, e := range xs {
		num, ok := e.(json.Number)
		if !ok {
			return dst[:start], fmt.Errorf("vector element %d is %s, not a number", i, jsonKind(e))
		}
		x, err := strconv.ParseFloat(string(num), 64)
		f := float32(x)
		if err != nil || math.IsInf(float64(f), 0) {
			return dst[:start], fmt.Errorf("vector element %d (%s) is out of range: it overflows float32, whose largest magnitude is about 3.4e38", i, num)
		}
		dst = append(dst, f)
	}
	return dst, nil
}

// jsonProblem rewords encoding/json's errors about a value of the wrong type
// ("json: cannot unmarshal string into Go value of type []interface {}").
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "got a JSON " + te.Value + ", not an array"
	}
	return err.Error()
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Encode encodes v as a vector BLOB.
func Encode(v []float32) []byte {
	return AppendEncoded(make([]byte, 0, 4*len(v)), v)
}

// AppendEncoded appends the vector BLOB encoding of v to dst.
func AppendEncoded(dst []byte, v []float32) []byte {
	if littleEndian && len(v) > 0 {
		// The encoding is the memory layout: one copy.
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
	}
	for _, f := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	}
	return dst
}

// View returns the vector BLOB encoding of v: on a little-endian machine v's
// own memory, without a copy (valid while v is, and not to be modified),
// elsewhere AppendEncoded(buf[:0], v). For writers that hand the bytes to
// something that copies them (SQLite copies a bound BLOB).
func View(buf []byte, v []float32) []byte {
	if littleEndian && len(v) > 0 {
		return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	}
	return AppendEncoded(buf[:0], v)
}

// firstNonFinite returns the index of the first NaN or Inf among float32
// bits, or -1.
func firstNonFinite(bits []uint32) int {
	for i, u := range bits {
		if u&0x7f800000 == 0x7f800000 { // exponent all ones: NaN or Inf
			return i
		}
	}
	return -1
}

// littleEndian reports whether float32s lie in memory as they are encoded.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
