package accountant

import (
	"testing"
	"time"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

func TestZZSubsampledHistory(t *testing.T) {
	b := Budget{Scope: "s", Mu: 50, Delta: 1e-5}
	sub := func(i int) mechanism.Mechanism {
		return mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01 + 0.0001*float64(i), Sigma: 1.0 + 0.01*float64(i), Steps: 600}
	}
	var s Spend
	for i := range 12 {
		freshProcessMemos()
		t0 := time.Now()
		c, err := Decide(b, s, sub(i), release.NoiseTVOf(1000))
		if err != nil {
			t.Fatal(err)
		}
		s = s.With(c)
		t.Logf("charge %d: %v eps %.4f", i, time.Since(t0), c.Epsilon)
	}
}
