package vector_test

import (
	"fmt"

	"github.com/dpsql/dpsql/vector"
)

func Example() {
	blob := vector.Encode([]float32{1, -2.5, 0.125})
	fmt.Printf("% x\n", blob)
	v, err := vector.Decode(blob)
	fmt.Println(v, err)
	v, err = vector.ParseJSON("[1, -2.5, 0.125]")
	fmt.Println(v, err)
	_, err = vector.ParseJSON("[1e400]")
	fmt.Println(err)
	// Output:
	// 00 00 80 3f 00 00 20 c0 00 00 00 3e
	// [1 -2.5 0.125] <nil>
	// [1 -2.5 0.125] <nil>
	// vector element 0 (1e400) is out of range: it overflows float32, whose largest magnitude is about 3.4e38
}
