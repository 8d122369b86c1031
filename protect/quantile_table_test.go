package protect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/dpsql/dpsql/release"
)

// The error of PERCENTILE_CONT read off the noisy histogram (what protected
// mode releases: the signed cumulative count), by p and group size, against
// two other reads of the same histogram (post-processings too, so free):
// negative counts as 0 (MEDIAN's read before issue 25), and every bucket
// whose noisy count is below 2 sigma as 0; mean absolute error in bucket widths ((hi - lo)/128) over
// 2,000 releases, one person per value, mu = 1 for the histogram (sigma 1
// per bucket). The data: a normal of mean 40 and standard deviation 15,
// clamped to the bounds [0, 100]. The figures are analytic-free Monte Carlo
// with a fixed seed: the same on any machine.
//
//	go test ./protect -run TestQuantileErrorTable -v
func TestQuantileErrorTable(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 2024)
	noise := release.NewNoise()
	rng := rand.New(rand.NewPCG(1, 2))
	const lo, hi, reps = 0.0, 100.0, 2000
	w := (hi - lo) / MedianBuckets
	ps := []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1}
	var b strings.Builder
	fmt.Fprintf(&b, "| n | read |")
	for _, p := range ps {
		fmt.Fprintf(&b, " p = %g |", p)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(ps)) + "\n")
	for _, n := range []int{100, 1000, 10000} {
		vals := make([]float64, n)
		hist := make([]float64, MedianBuckets)
		for i := range vals {
			v := math.Max(lo, math.Min(hi, 40+15*rng.NormFloat64()))
			vals[i] = v
			hist[min(MedianBuckets-1, int((v-lo)/w))]++
		}
		sort.Float64s(vals)
		truth := func(p float64) float64 {
			r := p * float64(n-1)
			f := math.Floor(r)
			return vals[int(f)] + (r-f)*(vals[int(math.Ceil(r))]-vals[int(f)])
		}
		errs := [3][]float64{make([]float64, len(ps)), make([]float64, len(ps)), make([]float64, len(ps))}
		noisy := make([]float64, MedianBuckets)
		cut := make([]float64, MedianBuckets)
		for range reps {
			copy(noisy, hist)
			noise.AddGaussian(noisy, 1)
			for i, c := range noisy {
				cut[i] = c
				if c < 2 {
					cut[i] = 0
				}
			}
			for j, p := range ps {
				errs[0][j] += math.Abs(quantileOf(noisy, lo, hi, p)-truth(p)) / w / reps
				errs[1][j] += math.Abs(clippedQuantile(noisy, lo, hi, p)-truth(p)) / w / reps
				errs[2][j] += math.Abs(clippedQuantile(cut, lo, hi, p)-truth(p)) / w / reps
			}
		}
		for k, name := range []string{"released: signed cumulative", "negative counts as 0", "buckets below 2 sigma as 0"} {
			fmt.Fprintf(&b, "| %d | %s |", n, name)
			for j := range ps {
				fmt.Fprintf(&b, " %.2f |", errs[k][j])
			}
			b.WriteString("\n")
		}
		if n == 10000 && errs[0][4] > 1 {
			t.Errorf("n = 10^4: the median is off by %.2f buckets on average, want under 1", errs[0][4])
		}
		// The released read is better than the clipped one at the upper
		// quantiles of a distribution away from hi (the noise of the empty
		// buckets above it).
		if n <= 1000 && errs[0][6] > errs[1][6]/1.5 {
			t.Errorf("n = %d, p = 0.9: released error %.2f, clipped %.2f", n, errs[0][6], errs[1][6])
		}
	}
	t.Logf("mean |error| in buckets of width %g:\n%s", w, b.String())
}

// clippedQuantile is the read MEDIAN made before issue 25: negative counts
// as 0.
func clippedQuantile(h []float64, lo, hi, p float64) float64 {
	total := 0.0
	for _, c := range h {
		total += math.Max(c, 0)
	}
	if !(total > 0) {
		return (lo + hi) / 2
	}
	w := (hi - lo) / float64(len(h))
	cum := 0.0
	for b, c := range h {
		c = math.Max(c, 0)
		if c > 0 && cum+c >= p*total {
			return math.Min(hi, math.Max(lo, lo+w*(float64(b)+(p*total-cum)/c)))
		}
		cum += c
	}
	return hi
}
