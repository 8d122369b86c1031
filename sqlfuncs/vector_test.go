package sqlfuncs

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"
)

// A vector argument is a BLOB or a JSON array in TEXT; NULL and any other
// type are refused in SQL's words. What makes a BLOB or an array a valid
// vector is package vector's, tested there.
func TestDecodeVector(t *testing.T) {
	nanBlob := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))
	tests := []struct {
		name string
		in   any
		want []float32
		err  string
	}{
		{"blob", vector.Encode([]float32{1, -2.5, 3e-8}), []float32{1, -2.5, 3e-8}, ""},
		{"json", "[1, -2.5, 0.125]", []float32{1, -2.5, 0.125}, ""},
		{"null", []byte(nil), nil, "NULL"},
		{"nil", nil, nil, "NULL"},
		{"empty blob", []byte{}, nil, "empty"},
		{"a bad blob", nanBlob, nil, "element 0 is NaN"},
		{"a bad array", "[1,", nil, "not a JSON array"},
		{"integer", int64(3), nil, "got INTEGER"},
		{"real", 1.5, nil, "got REAL"},
	}
	for _, tt := range tests {
		got, err := decodeVector(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("%s: %v, %v", tt.name, got, err)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: element %d = %v, want %v", tt.name, i, got[i], tt.want[i])
			}
		}
	}
}
