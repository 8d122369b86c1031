package sqlfuncs

import (
	"testing"

	"github.com/dpsql/dpsql/vector"
)

// TestRowsPrepareExpected checks that the rows fault in ahead only the chunk
// the expected rows reach: none past the last one.
func TestRowsPrepareExpected(t *testing.T) {
	const d = 784
	for _, tc := range []struct {
		expect, rows int
		spare        bool // a spare is prepared after rows rows
	}{
		{0, chunkRows/2 + 1, true},             // nothing expected: prepare
		{2 * chunkRows, chunkRows/2 + 1, true}, // a second chunk is expected
		{chunkRows, chunkRows/2 + 1, false},    // one chunk is all
		{chunkRows - 5, chunkRows/2 + 1, false},
	} {
		r := vectorRows{fn: "test", expect: tc.expect}
		x := make([]float32, d)
		for range tc.rows {
			if err := r.add(vector.Encode(x), int64(0), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		if got := r.arena.Prepared(); got != tc.spare {
			t.Errorf("expect %d, %d rows: spare prepared %v, want %v", tc.expect, tc.rows, got, tc.spare)
		}
		r.free()
	}
}
