package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The typed encoding of SQL values (NULL, INTEGER, REAL, TEXT, BLOB) that
// the aggregate pipeline ships between stages and stages to files: keys and
// released rows must keep their SQLite types (an INTEGER 1 and a REAL 1.5
// are different keys, TEXT and BLOB print differently).
const (
	tagNull  = 0
	tagInt   = 1
	tagReal  = 2
	tagText  = 3
	tagBlob  = 4
	maxValue = 1 << 30 // longest TEXT or BLOB accepted by the decoder
)

// appendValues appends vs (each nil, int64, float64, string or []byte) to b:
// their count, then each value's tag and content.
func appendValues(b []byte, vs []any) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		switch v := v.(type) {
		case nil:
			b = append(b, tagNull)
		case int64:
			b = binary.AppendVarint(append(b, tagInt), v)
		case float64:
			b = binary.LittleEndian.AppendUint64(append(b, tagReal), math.Float64bits(v))
		case string:
			b = append(binary.AppendUvarint(append(b, tagText), uint64(len(v))), v...)
		case []byte:
			b = append(binary.AppendUvarint(append(b, tagBlob), uint64(len(v))), v...)
		default:
			return nil, fmt.Errorf("a value of type %T is not a SQL value", v)
		}
	}
	return b, nil
}

var errValues = errors.New("values: malformed encoding")

// readValues decodes one list of values from the start of b and returns the
// rest of b.
func readValues(b []byte) ([]any, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, errValues
	}
	b = b[k:]
	vs := make([]any, n)
	for i := range vs {
		if len(b) == 0 {
			return nil, nil, errValues
		}
		tag := b[0]
		b = b[1:]
		switch tag {
		case tagNull:
		case tagInt:
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, nil, errValues
			}
			vs[i], b = v, b[k:]
		case tagReal:
			if len(b) < 8 {
				return nil, nil, errValues
			}
			vs[i], b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		case tagText, tagBlob:
			l, k := binary.Uvarint(b)
			if k <= 0 || l > maxValue || l > uint64(len(b)-k) {
				return nil, nil, errValues
			}
			s := b[k : k+int(l)]
			if tag == tagText {
				vs[i] = string(s)
			} else {
				vs[i] = append([]byte{}, s...)
			}
			b = b[k+int(l):]
		default:
			return nil, nil, errValues
		}
	}
	return vs, b, nil
}

// appendInts appends a count and zig-zag varints.
func appendInts(b []byte, vs []int64) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func readInts(b []byte) ([]int64, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, errValues
	}
	b = b[k:]
	vs := make([]int64, n)
	for i := range vs {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, errValues
		}
		vs[i], b = v, b[k:]
	}
	return vs, b, nil
}
