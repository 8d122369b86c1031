package normal

import (
	"math"
	"testing"
)

// LogPhi agrees with log(Erfc) where Erfc is accurate, continues smoothly
// into the far tail, and matches the known value log Phi(-40).
func TestLogPhi(t *testing.T) {
	for _, x := range []float64{-29.9, -20, -5, -1, 0, 1, 4.9, 6, 10} {
		want := math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
		if got := LogPhi(x); math.Abs(got-want) > 1e-13*math.Max(1, math.Abs(want)) {
			t.Errorf("LogPhi(%v) = %v, want %v", x, got, want)
		}
	}
	// Both sides of the switch to Mills' ratio at -30 agree.
	if a, b := LogPhi(-30+1e-9), LogPhi(-30-1e-9); math.Abs(a-b) > 1e-6 {
		t.Errorf("LogPhi jumps at -30: %v vs %v", a, b)
	}
	// log Phi(-40) = -804.6084420137538 (mpmath: log(ncdf(-40)), 50 digits).
	if got := LogPhi(-40); math.Abs(got-(-804.6084420137538)) > 1e-9 {
		t.Errorf("LogPhi(-40) = %v", got)
	}
	if !math.IsInf(LogPhi(math.Inf(-1)), -1) || !math.IsNaN(LogPhi(math.NaN())) || LogPhi(math.Inf(1)) != 0 {
		t.Error("LogPhi at the infinities or NaN")
	}
}
