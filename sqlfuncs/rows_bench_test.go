package sqlfuncs

import (
	"testing"

	"github.com/dpsql/dpsql/vector"
)

// BenchmarkRowsAdd is the per-row work of a release aggregate on a
// Fashion-MNIST-shaped row (784 float32 features, an INTEGER label).
func BenchmarkRowsAdd(b *testing.B) {
	row := vector.Encode(make([]float32, 784))
	opts := `{"into":"rel","mu":1}`
	b.SetBytes(int64(len(row)))
	b.ReportAllocs()
	r := vectorRows{fn: "bench"}
	for i := 0; b.Loop(); i++ {
		if i%60000 == 0 {
			r.free() // as a release does when it returns
			r = vectorRows{fn: "bench"}
		}
		if err := r.add(row, int64(i%10), opts); err != nil {
			b.Fatal(err)
		}
	}
}
