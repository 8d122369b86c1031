package idx

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestReadIDX(t *testing.T) {
	data := Encode([]int{2, 2, 3}, []byte{0, 51, 255, 1, 2, 3, 10, 20, 30, 40, 50, 60})
	a, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Rows() != 2 || a.Dim() != 6 {
		t.Fatalf("rows %d dim %d", a.Rows(), a.Dim())
	}
	row := make([]float32, 6)
	if err := a.ReadRow(row, 1.0/255); err != nil || row[0] != 0 || row[1] != 0.2 || row[2] != 1 {
		t.Fatalf("row 0 = %v, %v", row, err)
	}
	if err := a.ReadRow(row, 1); err != nil || !reflect.DeepEqual(row, []float32{10, 20, 30, 40, 50, 60}) {
		t.Fatalf("row 1 = %v, %v", row, err)
	}
	if err := a.ReadRow(row, 1); err != io.EOF {
		t.Fatalf("after the last row: %v", err)
	}

	labels := Encode([]int{3}, []byte{5, 0, 9})
	l, err := NewReader(bytes.NewReader(labels), -1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l.ReadLabels(); err != nil || !reflect.DeepEqual(got, []int64{5, 0, 9}) {
		t.Fatalf("labels %v, %v", got, err)
	}
}

func TestReadIDXErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		err  string
	}{
		{"empty", nil, "unexpected EOF"},
		{"magic", []byte{1, 2, 8, 1, 0, 0, 0, 0}, "not an IDX file"},
		{"float", []byte{0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0}, "element type 0x0d is not supported"},
		{"no dims", []byte{0, 0, 8, 0}, "zero dimensions"},
		{"short dims", []byte{0, 0, 8, 3, 0, 0, 0, 1}, "reading dimension 1"},
		{"truncated", Encode([]int{3, 2}, []byte{1, 2, 3}), "the file holds 3"},
		{"empty items", Encode([]int{1 << 30, 0}, nil), "make empty items"},
		{"huge", Encode([]int{1, 1 << 16, 1 << 16}, nil), "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
	// With an unknown size (gzip) a short file fails at the missing item.
	a, err := NewReader(bytes.NewReader(Encode([]int{2, 2}, []byte{1, 2, 3})), -1)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 2)
	if err := a.ReadRow(row, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.ReadRow(row, 1); err == nil || !strings.Contains(err.Error(), "item 1") {
		t.Fatalf("short item: %v", err)
	}
	l, _ := NewReader(bytes.NewReader(Encode([]int{2, 2}, []byte{1, 2, 3, 4})), -1)
	if _, err := l.ReadLabels(); err == nil || !strings.Contains(err.Error(), "one dimension") {
		t.Fatalf("labels of two dimensions: %v", err)
	}
}

// FuzzReadIDX checks that no input makes the reader panic or claim more data
// than the input holds.
func FuzzReadIDX(f *testing.F) {
	f.Add(Encode([]int{2, 2, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8}))
	f.Add(Encode([]int{3}, []byte{1, 2, 3}))
	f.Add(Encode([]int{1, 0}, nil))
	f.Add([]byte{0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if a.Rows() > 0 && int64(a.Rows())*int64(a.Dim()) > int64(len(data)) {
			t.Fatalf("accepted dimensions %v beyond the %d-byte input", a.dims, len(data))
		}
		if len(a.dims) == 1 {
			labels, err := a.ReadLabels()
			if err == nil && len(labels) != a.Rows() {
				t.Fatalf("%d labels for %d rows", len(labels), a.Rows())
			}
			return
		}
		if a.Rows() == 0 {
			return
		}
		row := make([]float32, a.Dim())
		for i := 0; ; i++ {
			err := a.ReadRow(row, 1.0/255)
			if err == io.EOF {
				if i != a.Rows() {
					t.Fatalf("read %d items of %d", i, a.Rows())
				}
				return
			}
			if err != nil {
				t.Fatalf("item %d: %v (the size check passed)", i, err)
			}
			for _, x := range row {
				if x < 0 || x > 1 {
					t.Fatalf("scaled byte %v outside [0, 1]", x)
				}
			}
		}
	})
}
