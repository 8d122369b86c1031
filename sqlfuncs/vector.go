package sqlfuncs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// DecodeVector decodes a vector argument: a BLOB of little-endian float32 (the
// layout sqlite-vec uses) or TEXT holding a JSON array of numbers. It rejects
// empty vectors, lengths that are not a multiple of 4, and NaN or Inf.
func DecodeVector(v any) ([]float32, error) {
	return AppendVector(nil, v)
}

// AppendVector is DecodeVector appending to dst, so aggregates can keep every
// row in one contiguous slice.
func AppendVector(dst []float32, v any) ([]float32, error) {
	switch b := v.(type) {
	case []byte:
		if b == nil {
			return dst, fmt.Errorf("vector is NULL")
		}
		if len(b) == 0 {
			return dst, fmt.Errorf("vector blob is empty")
		}
		if len(b)%4 != 0 {
			return dst, fmt.Errorf("vector blob has %d bytes, not a multiple of 4 (float32)", len(b))
		}
		n := len(b) / 4
		start := len(dst)
		dst = slices.Grow(dst, n)[:start+n]
		out := dst[start:]
		if littleEndian {
			// The blob is the memory layout: one copy, then a check of
			// every exponent.
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
			if i := firstNonFinite(unsafe.Slice((*uint32)(unsafe.Pointer(&out[0])), n)); i >= 0 {
				return dst[:start], fmt.Errorf("vector element %d is %v; vectors must be finite", i, out[i])
			}
			return dst, nil
		}
		for i := range out {
			u := binary.LittleEndian.Uint32(b[4*i:])
			if u&0x7f800000 == 0x7f800000 { // exponent all ones: NaN or Inf
				return dst[:start], fmt.Errorf("vector element %d is %v; vectors must be finite", i, math.Float32frombits(u))
			}
			out[i] = math.Float32frombits(u)
		}
		return dst, nil
	case string:
		var xs []float64
		if err := json.Unmarshal([]byte(b), &xs); err != nil {
			return dst, fmt.Errorf("vector text is not a JSON array of numbers: %v", err)
		}
		if len(xs) == 0 {
			return dst, fmt.Errorf("vector is empty")
		}
		start := len(dst)
		for i, x := range xs {
			f := float32(x)
			if math.IsInf(float64(f), 0) {
				return dst[:start], fmt.Errorf("vector element %d (%g) overflows float32", i, x)
			}
			dst = append(dst, f)
		}
		return dst, nil
	case nil:
		return dst, fmt.Errorf("vector is NULL")
	default:
		return dst, fmt.Errorf("vector must be a float32 BLOB or a JSON array, got %s", typeName(v))
	}
}

// EncodeVector encodes v as a little-endian float32 BLOB.
func EncodeVector(v []float32) []byte {
	return AppendEncoded(make([]byte, 0, 4*len(v)), v)
}

// AppendEncoded appends the little-endian float32 encoding of v to dst.
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

// encodedView returns the little-endian float32 encoding of v: on a
// little-endian machine v's own memory, without a copy (valid while v is,
// and not to be modified), elsewhere AppendEncoded(buf[:0], v).
func encodedView(buf []byte, v []float32) []byte {
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

func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		if x == nil {
			return "NULL"
		}
		return "BLOB"
	case string:
		return "TEXT"
	case int64:
		return "INTEGER"
	case float64:
		return "REAL"
	default:
		return fmt.Sprintf("%T", v)
	}
}
