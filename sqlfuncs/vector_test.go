package sqlfuncs

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"
)

func TestDecodeVector(t *testing.T) {
	nanBlob := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))
	infBlob := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.Inf(-1))))
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
		{"odd length", []byte{1, 2, 3, 4, 5, 6, 7}, nil, "7 bytes, not a multiple of 4"},
		{"nan", nanBlob, nil, "element 0 is NaN"},
		{"inf", append(vector.Encode([]float32{1}), infBlob...), nil, "element 1 is -Inf"},
		{"integer", int64(3), nil, "got INTEGER"},
		{"bad json", "[1,", nil, "not a JSON array"},
		{"empty json", "[]", nil, "empty"},
		{"json overflow", "[1e300]", nil, "overflows float32"},
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

func TestAppendVectorKeepsPrefixOnError(t *testing.T) {
	dst := []float32{7, 8}
	dst, err := appendVector(dst, append(vector.Encode([]float32{1, 2}), 0, 0, 0xc0, 0x7f))
	if err == nil || len(dst) != 2 || dst[1] != 8 {
		t.Errorf("after a bad row dst = %v, err = %v; want the prefix [7 8] and an error", dst, err)
	}
}
