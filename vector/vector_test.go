package vector

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"unsafe"
)

func TestDecode(t *testing.T) {
	nan := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))
	inf := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.Inf(-1))))
	tests := []struct {
		name string
		in   []byte
		want []float32
		err  string
	}{
		{"blob", Encode([]float32{1, -2.5, 3e-8}), []float32{1, -2.5, 3e-8}, ""},
		{"negative zero and subnormal", Encode([]float32{float32(math.Copysign(0, -1)), 1e-45}), []float32{0, 1e-45}, ""},
		{"nil", nil, nil, "empty"},
		{"empty", []byte{}, nil, "empty"},
		{"odd length", []byte{1, 2, 3, 4, 5, 6, 7}, nil, "7 bytes, not a multiple of 4"},
		{"nan", nan, nil, "element 0 is NaN"},
		{"inf", append(Encode([]float32{1}), inf...), nil, "element 1 is -Inf"},
	}
	for _, tt := range tests {
		got, err := Decode(tt.in)
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

func TestParseJSON(t *testing.T) {
	tests := []struct {
		in   string
		want []float32
		err  string
	}{
		{"[1, -2.5, 0.125]", []float32{1, -2.5, 0.125}, ""},
		{" [3e38, -1e-50] ", []float32{3e38, 0}, ""},
		{"[1,", nil, "not a JSON array"},
		{`"[1]"`, nil, "got a JSON string, not an array"},
		{`{"a":1}`, nil, "not an array"},
		{"[1] [2]", nil, "text follows the array"},
		{"[]", nil, "empty"},
		{"null", nil, "empty"},
		{"[null]", nil, "element 0 is null, not a number"},
		{`[1, "2"]`, nil, "element 1 is a string, not a number"},
		{"[1e300]", nil, "overflows float32"},
		// encoding/json cannot hold it in a float64 and used to say so in
		// its own words ("cannot unmarshal number 1e400 into Go value of
		// type float64"): the element is out of range.
		{"[1e400]", nil, "vector element 0 (1e400) is out of range"},
		{"[0, -1e400]", nil, "vector element 1 (-1e400) is out of range"},
	}
	for _, tt := range tests {
		got, err := ParseJSON(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseJSON(%q): err = %v, want %q", tt.in, err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "Go value") {
				t.Errorf("ParseJSON(%q): %v speaks of Go types", tt.in, err)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("ParseJSON(%q) = %v, %v", tt.in, got, err)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParseJSON(%q)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func TestAppendKeepsPrefixOnError(t *testing.T) {
	dst := []float32{7, 8}
	dst, err := AppendDecoded(dst, append(Encode([]float32{1, 2}), 0, 0, 0xc0, 0x7f))
	if err == nil || len(dst) != 2 || dst[1] != 8 {
		t.Errorf("after a bad row dst = %v, err = %v; want the prefix [7 8] and an error", dst, err)
	}
	dst, err = AppendJSON(dst, "[1, 2, 1e39]")
	if err == nil || len(dst) != 2 || dst[1] != 8 {
		t.Errorf("after a bad JSON row dst = %v, err = %v; want the prefix [7 8] and an error", dst, err)
	}
}

func TestDimAndElements(t *testing.T) {
	b := Encode([]float32{1, float32(math.NaN()), 3})
	if d, err := Dim(b); d != 3 || err != nil {
		t.Errorf("Dim = %d, %v; want 3", d, err)
	}
	if i := FirstNonFinite(b); i != 1 {
		t.Errorf("FirstNonFinite = %d, want 1", i)
	}
	if i := FirstNonFinite(Encode([]float32{1, 2})); i != -1 {
		t.Errorf("FirstNonFinite of finite = %d, want -1", i)
	}
	got := AppendElements([]float32{9}, b)
	if len(got) != 4 || got[0] != 9 || got[1] != 1 || !math.IsNaN(float64(got[2])) || got[3] != 3 {
		t.Errorf("AppendElements = %v", got)
	}
}

// View gives the bytes Encode gives, and on a little-endian machine shares
// v's memory instead of copying it.
func TestView(t *testing.T) {
	for _, v := range [][]float32{
		{1, -2.5, 3e-8, float32(math.Inf(1)), 0},
		{float32(math.Copysign(0, -1))},
		make([]float32, 784),
		{},
	} {
		buf := []byte("stale")
		got := View(buf, v)
		if want := Encode(v); string(got) != string(want) {
			t.Errorf("View(%v) = %x, want %x", v, got, want)
		}
		if littleEndian && len(v) > 0 && &got[0] != (*byte)(unsafe.Pointer(&v[0])) {
			t.Errorf("View(%v) copied on a little-endian machine", v)
		}
	}
}

// FuzzDecode checks that any blob either decodes to finite values that
// re-encode to the same bytes, or is rejected with an error; never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(Encode([]float32{1, 2, 3}))
	f.Add([]byte{0, 0, 0xc0, 0x7f})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b)
		if err != nil {
			return
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("decoded a non-finite value %v", x)
			}
		}
		if got := Encode(v); string(got) != string(b) {
			t.Fatalf("round trip changed the bytes")
		}
	})
}

// FuzzParseJSON: any text either decodes to a non-empty vector of finite
// values or is refused, in words that name no Go type.
func FuzzParseJSON(f *testing.F) {
	f.Add("[1,2,3]")
	f.Add("[1e39]")
	f.Add("[1e400]")
	f.Add(`{"a":1}`)
	f.Add(`[null, true]`)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseJSON(s)
		if err != nil {
			if strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "interface {}") {
				t.Fatalf("ParseJSON(%q): %v speaks of Go types", s, err)
			}
			return
		}
		if len(v) == 0 {
			t.Fatal("accepted an empty vector")
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("decoded a non-finite value %v from %q", x, s)
			}
		}
	})
}
