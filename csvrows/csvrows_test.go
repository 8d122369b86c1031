package csvrows

import (
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

func readAllCSV(t *testing.T, in, labelColumn string) ([][]float32, []int64, *Reader) {
	t.Helper()
	c, err := NewReader(strings.NewReader(in), labelColumn, ',')
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float32
	var labels []int64
	for {
		row := make([]float32, c.Dim())
		l, err := c.ReadRow(row)
		if err == io.EOF {
			return rows, labels, c
		}
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		if c.labelCol >= 0 {
			labels = append(labels, l)
		}
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, in, label string
		rows            [][]float32
		labels          []int64
		labelName       string
	}{
		{"header, label column found by name", "x1,x2,label\n1,2,0\n3.5,-4e2,1\n", "", [][]float32{{1, 2}, {3.5, -400}}, []int64{0, 1}, "label"},
		{"header, label column given", "Class, a, b\n 7, 1, 2\n8.0,3,4\n", "class", [][]float32{{1, 2}, {3, 4}}, []int64{7, 8}, "Class"},
		{"no header, no labels", "1,2,3\n4,5,6\n", "", [][]float32{{1, 2, 3}, {4, 5, 6}}, nil, ""},
		{"no header, label index", "1,2,3\n4,5,6\n", "2", [][]float32{{1, 2}, {4, 5}}, []int64{3, 6}, "column 2"},
		{"label column disabled", "a,label\n1,2\n", "none", [][]float32{{1, 2}}, nil, ""},
		{"CRLF and quotes", "\"a\",\"b\"\r\n\"1\",\"2\"\r\n", "", [][]float32{{1, 2}}, nil, ""},
		{"header only", "a,b\n", "", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, labels, c := readAllCSV(t, tc.in, tc.label)
			if !reflect.DeepEqual(rows, tc.rows) || !reflect.DeepEqual(labels, tc.labels) || c.LabelName() != tc.labelName {
				t.Fatalf("rows %v labels %v (%q); want %v %v (%q)", rows, labels, c.LabelName(), tc.rows, tc.labels, tc.labelName)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, label, err string
	}{
		{"empty", "", "", "the file is empty"},
		{"unknown label column", "a,b\n1,2\n", "c", `no column "c" for the labels; the columns are a, b`},
		{"label index without header", "1,2\n", "x", "must be a 0-based column number below 2"},
		{"label index out of range", "1,2\n", "2", "must be a 0-based column number below 2"},
		{"only a label", "label\n1\n", "", "no feature columns"},
		{"bad number", "a,b\n1,2\n3,x\n", "", `line 3, column "b": "x" is not a finite number`},
		{"nan", "1,2\nNaN,2\n", "", `line 2, column 0: "NaN" is not a finite number`},
		{"float32 overflow", "1,1e39\n", "", `"1e39" is not a finite number`},
		{"bad label", "a,label\n1,2.5\n", "", `label "2.5" is not an integer`},
		{"field count", "a,b\n1,2\n3\n", "", "wrong number of fields"},
		{"bare quote", "a,b\n1,\"2\n", "", "extraneous or missing \" in quoted-field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewReader(strings.NewReader(tc.in), tc.label, ',')
			for err == nil {
				_, err = c.ReadRow(make([]float32, c.Dim()))
			}
			if err == io.EOF || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzReader checks that no input makes the CSV reader panic and that every
// accepted row has the announced dimension of finite values.
func FuzzReader(f *testing.F) {
	f.Add("x1,x2,label\n1,2,0\n3,4,1\n", "")
	f.Add("1,2,3\n4,5,6\n", "2")
	f.Add("a,\"b\"\"\",c\n1,2,3\n", "c")
	f.Add("1e38,-1e-45,0x1p-2\n", "none")
	f.Fuzz(func(t *testing.T, in, label string) {
		c, err := NewReader(strings.NewReader(in), label, ',')
		if err != nil {
			return
		}
		if c.Dim() < 1 || c.Dim() > len(in)+1 {
			t.Fatalf("dimension %d from %d bytes", c.Dim(), len(in))
		}
		row := make([]float32, c.Dim())
		for {
			if _, err := c.ReadRow(row); err != nil {
				return
			}
			for _, x := range row {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("non-finite value %v accepted from %q", x, in)
				}
			}
		}
	})
}
