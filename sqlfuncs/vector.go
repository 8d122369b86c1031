package sqlfuncs

import (
	"errors"
	"fmt"

	"github.com/dpsql/dpsql/vector"
)

// decodeVector decodes a vector argument (package vector): a BLOB of
// little-endian float32, or TEXT holding a JSON array of numbers.
func decodeVector(v any) ([]float32, error) {
	return appendVector(nil, v)
}

// appendVector is decodeVector appending to dst, so aggregates can keep every
// row in one contiguous slice.
func appendVector(dst []float32, v any) ([]float32, error) {
	switch b := v.(type) {
	case []byte:
		if b == nil {
			return dst, errors.New("vector is NULL")
		}
		return vector.AppendDecoded(dst, b)
	case string:
		return vector.AppendJSON(dst, b)
	case nil:
		return dst, errors.New("vector is NULL")
	default:
		return dst, fmt.Errorf("vector must be a float32 BLOB or a JSON array, got %s", typeName(v))
	}
}

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
