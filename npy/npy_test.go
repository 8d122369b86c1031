package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

var npyBytes = Encode

func f32Bytes(order binary.AppendByteOrder, xs ...float32) []byte {
	var b []byte
	for _, x := range xs {
		b = order.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64Bytes(order binary.AppendByteOrder, xs ...float64) []byte {
	var b []byte
	for _, x := range xs {
		b = order.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func i64Bytes(xs ...int64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func readAllNPY(t *testing.T, data []byte) [][]float32 {
	t.Helper()
	a, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for {
		row := make([]float32, a.Dim())
		err := a.ReadRow(row, 1)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
}

func TestReader(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	for _, tc := range []struct {
		name string
		data []byte
		want [][]float32
	}{
		{"f4 2-D", npyBytes("<f4", []int{2, 3}, f32Bytes(le, 1, 2, 3, 4, 5, 6)), [][]float32{{1, 2, 3}, {4, 5, 6}}},
		{"f8 3-D flattened", npyBytes("<f8", []int{2, 2, 2}, f64Bytes(le, 1, 2, 3, 4, 5, 6, 7, 8.5)), [][]float32{{1, 2, 3, 4}, {5, 6, 7, 8.5}}},
		{"big-endian f8", npyBytes(">f8", []int{1, 2}, f64Bytes(be, -1.5, 2)), [][]float32{{-1.5, 2}}},
		{"u1", npyBytes("|u1", []int{2, 2}, []byte{0, 255, 7, 8}), [][]float32{{0, 255}, {7, 8}}},
		{"i8 1-D", npyBytes("<i8", []int{3}, i64Bytes(-1, 0, 5)), [][]float32{{-1}, {0}, {5}}},
		{"empty", npyBytes("<f4", []int{0, 3}, nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readAllNPY(t, tc.data); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want header
		err  string
	}{
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }", header{"<f4", false, []int{60000, 784}}, ""},
		{`{"shape":(3,),"fortran_order":True,"descr":"|u1"}` + "   \n", header{"|u1", true, []int{3}}, ""},
		{"{'descr': '<f8', 'fortran_order': False, 'shape': (60000L, 784L), }", header{"<f8", false, []int{60000, 784}}, ""}, // Python 2
		{"{'descr':'<f4','fortran_order':False,'shape':(),'extra':None}", header{"<f4", false, []int{}}, ""},
		{"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", header{}, "structured dtypes"},
		{"{'descr': '<f4', 'fortran_order': False}", header{}, "'shape'"},
		{"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", header{}, "'fortran_order'"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2)}", header{}, "negative dimension"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 2)}", header{}, "bad integer"},
		{"{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", header{}, "given twice"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", header{}, "trailing text"},
		{"{'descr': '<f4'", header{}, "expected ',' or '}'"},
		{"", header{}, "unexpected end"},
		{strings.Repeat("(", 100), header{}, "bad integer"},
		{strings.Repeat("{'a':", 100), header{}, "nested too deeply"},
	} {
		h, err := parseHeader(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseHeader(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(h, tc.want) {
			t.Errorf("parseHeader(%q) = %+v, %v; want %+v", tc.in, h, err, tc.want)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	le := binary.LittleEndian
	fortran := npyBytes("<f4", []int{1, 2}, f32Bytes(le, 1, 2))
	fortran = bytes.Replace(fortran, []byte("False"), []byte("True "), 1)
	v3 := npyBytes("<f4", []int{1, 1}, f32Bytes(le, 1))
	v3[6] = 9
	for _, tc := range []struct {
		name string
		data []byte
		err  string
	}{
		{"not npy", []byte("PK\x03\x04 zip file"), "bad magic"},
		{"short", []byte("\x93NUM"), "unexpected EOF"},
		{"version", v3, "unsupported format version 9"},
		{"fortran", fortran, "fortran_order"},
		{"truncated", npyBytes("<f4", []int{3, 2}, f32Bytes(le, 1, 2, 3)), "the file holds 12 bytes of data"},
		{"dtype", npyBytes("<c16", []int{1}, make([]byte, 16)), "unsupported dtype"},
		{"object", npyBytes("|O", []int{1}, make([]byte, 8)), "unsupported dtype"},
		{"scalar", npyBytes("<f4", nil, f32Bytes(le, 1)), "0-d array"},
		{"empty rows", npyBytes("<f4", []int{1 << 30, 0}, nil), "makes empty rows"},
		{"huge rows", npyBytes("<f4", []int{1, 1 << 20, 1 << 20}, nil), "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
	// Non-finite values are refused row by row.
	data := npyBytes("<f8", []int{1, 2}, f64Bytes(le, 1, math.NaN()))
	a, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ReadRow(make([]float32, 2), 1); err == nil || !strings.Contains(err.Error(), "must be finite") {
		t.Fatalf("NaN: %v", err)
	}
	data = npyBytes("<f8", []int{1, 1}, f64Bytes(le, 1e300))
	a, _ = NewReader(bytes.NewReader(data), int64(len(data)))
	if err := a.ReadRow(make([]float32, 1), 1); err == nil || !strings.Contains(err.Error(), "must be finite") {
		t.Fatalf("float32 overflow: %v", err)
	}
}

func TestReadLabels(t *testing.T) {
	for _, data := range [][]byte{
		npyBytes("<i8", []int{3}, i64Bytes(7, 0, 9)),
		npyBytes("|u1", []int{3, 1}, []byte{7, 0, 9}),
		npyBytes("<f8", []int{3}, f64Bytes(binary.LittleEndian, 7, 0, 9)),
	} {
		a, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.ReadLabels()
		if err != nil || !reflect.DeepEqual(got, []int64{7, 0, 9}) {
			t.Fatalf("labels %v, %v", got, err)
		}
	}
	data := npyBytes("<f8", []int{1}, f64Bytes(binary.LittleEndian, 0.5))
	a, _ := NewReader(bytes.NewReader(data), int64(len(data)))
	if _, err := a.ReadLabels(); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("fractional label: %v", err)
	}
	data = npyBytes("<i8", []int{1, 2}, i64Bytes(1, 2))
	a, _ = NewReader(bytes.NewReader(data), int64(len(data)))
	if _, err := a.ReadLabels(); err == nil || !strings.Contains(err.Error(), "shape (n,)") {
		t.Fatalf("2-D labels: %v", err)
	}
}

// FuzzReader checks that no input makes the reader panic or allocate beyond
// the input's size, and that an accepted header survives re-encoding.
func FuzzReader(f *testing.F) {
	le := binary.LittleEndian
	f.Add(npyBytes("<f4", []int{2, 3}, f32Bytes(le, 1, 2, 3, 4, 5, 6)))
	f.Add(npyBytes("<f8", []int{1, 2, 2}, f64Bytes(le, 1, 2, 3, 4)))
	f.Add(npyBytes("|u1", []int{2}, []byte{1, 2}))
	f.Add(npyBytes(">i4", []int{1, 1}, []byte{0, 0, 0, 1}))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape':(1,)}  "))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if a.Rows() > 0 && int64(a.Rows())*int64(a.Dim())*int64(a.size) > int64(len(data)) {
			t.Fatalf("accepted shape %v beyond the %d-byte input", a.h.Shape, len(data))
		}
		// The header re-encoded as numpy would parses to the same header.
		h2, err := parseHeader(fmt.Sprintf("{'descr': %q, 'fortran_order': %s, 'shape': %s, }", a.h.Descr, pyBool(a.h.Fortran), pyTuple(a.h.Shape)))
		if err != nil || !reflect.DeepEqual(h2, a.h) {
			t.Fatalf("header %+v re-parses as %+v, %v", a.h, h2, err)
		}
		if a.Rows() == 0 {
			return
		}
		row := make([]float32, a.Dim())
		for i := 0; ; i++ {
			err := a.ReadRow(row, 1)
			if err == io.EOF {
				if i != a.Rows() {
					t.Fatalf("read %d rows of %d", i, a.Rows())
				}
				return
			}
			if err != nil {
				return
			}
			for _, x := range row {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("non-finite value %v accepted", x)
				}
			}
		}
	})
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func pyTuple(s []int) string {
	var b strings.Builder
	b.WriteByte('(')
	for _, d := range s {
		fmt.Fprintf(&b, "%d,", d)
	}
	b.WriteByte(')')
	return b.String()
}
