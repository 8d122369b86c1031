package csvrows_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/dpsql/dpsql/csvrows"
)

// Example reads features and an integer label column named in the header,
// as dpsql import reads a CSV file.
func Example() {
	in := "x1,x2,label\n0.5,1.5,0\n2,-1,1\n"
	r, err := csvrows.NewReader(strings.NewReader(in), "", ',')
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Dim(), "features, labels in", r.LabelName())
	row := make([]float32, r.Dim())
	for {
		label, err := r.ReadRow(row)
		if err == io.EOF {
			break
		} else if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(row, label)
	}
	// Output:
	// 2 features, labels in label
	// [0.5 1.5] 0
	// [2 -1] 1
}
