package protect

import (
	"math"
	"testing"
)

// The fallback octet_length agrees with the built-in of SQLite 3.54.1
// (values read through dpsql query).
func TestOctetLengthFallback(t *testing.T) {
	tests := []struct {
		in   any
		want any
	}{
		{nil, nil},
		{"", int64(0)},
		{"abc", int64(3)},
		{"é", int64(2)},
		{[]byte{0, 1, 2, 3}, int64(4)},
		{int64(-120), int64(4)},
		{1.0, int64(3)},  // 1.0
		{0.1, int64(3)},  // 0.1
		{-2.5, int64(4)}, // -2.5
		{1e20, int64(7)}, // 1.0e+20
		{math.Inf(1), int64(3)},
	}
	for _, tt := range tests {
		if got := octetLength(tt.in); got != tt.want {
			t.Errorf("octet_length(%#v) = %v; want %v", tt.in, got, tt.want)
		}
	}
}
