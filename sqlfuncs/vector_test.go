package sqlfuncs

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"unsafe"
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
		{"blob", EncodeVector([]float32{1, -2.5, 3e-8}), []float32{1, -2.5, 3e-8}, ""},
		{"json", "[1, -2.5, 0.125]", []float32{1, -2.5, 0.125}, ""},
		{"null", []byte(nil), nil, "NULL"},
		{"nil", nil, nil, "NULL"},
		{"empty blob", []byte{}, nil, "empty"},
		{"odd length", []byte{1, 2, 3, 4, 5, 6, 7}, nil, "7 bytes, not a multiple of 4"},
		{"nan", nanBlob, nil, "element 0 is NaN"},
		{"inf", append(EncodeVector([]float32{1}), infBlob...), nil, "element 1 is -Inf"},
		{"integer", int64(3), nil, "got INTEGER"},
		{"bad json", "[1,", nil, "not a JSON array"},
		{"empty json", "[]", nil, "empty"},
		{"json overflow", "[1e300]", nil, "overflows float32"},
	}
	for _, tt := range tests {
		got, err := DecodeVector(tt.in)
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
	dst, err := AppendVector(dst, append(EncodeVector([]float32{1, 2}), 0, 0, 0xc0, 0x7f))
	if err == nil || len(dst) != 2 || dst[1] != 8 {
		t.Errorf("after a bad row dst = %v, err = %v; want the prefix [7 8] and an error", dst, err)
	}
}

// FuzzDecodeVector checks that any blob either decodes to finite values that
// re-encode to the same bytes, or is rejected with an error; never a panic.
func FuzzDecodeVector(f *testing.F) {
	f.Add(EncodeVector([]float32{1, 2, 3}))
	f.Add([]byte{0, 0, 0xc0, 0x7f})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeVector(b)
		if err != nil {
			return
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("decoded a non-finite value %v", x)
			}
		}
		if got := EncodeVector(v); string(got) != string(b) {
			t.Fatalf("round trip changed the bytes")
		}
	})
}

func FuzzDecodeVectorJSON(f *testing.F) {
	f.Add("[1,2,3]")
	f.Add("[1e39]")
	f.Add(`{"a":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeVector(s)
		if err == nil && len(v) == 0 {
			t.Fatal("accepted an empty vector")
		}
	})
}

// encodedView gives the bytes EncodeVector gives, and on a little-endian
// machine shares v's memory instead of copying it.
func TestEncodedView(t *testing.T) {
	for _, v := range [][]float32{
		{1, -2.5, 3e-8, float32(math.Inf(1)), 0},
		{float32(math.Copysign(0, -1))},
		make([]float32, 784),
		{},
	} {
		buf := []byte("stale")
		got := encodedView(buf, v)
		if want := EncodeVector(v); string(got) != string(want) {
			t.Errorf("encodedView(%v) = %x, want %x", v, got, want)
		}
		if littleEndian && len(v) > 0 && &got[0] != (*byte)(unsafe.Pointer(&v[0])) {
			t.Errorf("encodedView(%v) copied on a little-endian machine", v)
		}
	}
}
