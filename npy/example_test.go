package npy_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/dpsql/dpsql/npy"
)

// Example reads a 2 x 3 float32 array row by row, as dpsql import reads
// features.
func Example() {
	var data []byte
	for _, x := range []float32{1, 2, 3, 4, 5, 6} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
	}
	file := npy.Encode("<f4", []int{2, 3}, data)
	r, err := npy.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Rows(), "rows of", r.Dim())
	row := make([]float32, r.Dim())
	for {
		if err := r.ReadRow(row, 1); err == io.EOF {
			break
		} else if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(row)
	}
	// Output:
	// 2 rows of 3
	// [1 2 3]
	// [4 5 6]
}
