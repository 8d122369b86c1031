// Command googleacc measures Google's differential-privacy Go library (v3.0.0)
// on the shape of dpsql's accuracy table (go test ./protect -run
// AccuracyTable -v): one row per person, x in [0, 100], 10^6 rows in 100
// groups of 10^4, the same values (PCG(1, 2)); a statement releasing keys
// (PreAggSelectPartition), COUNT, SUM and AVG per group, epsilon split in
// four equal parts, all of delta to the selection (Laplace, the default) or
// delta/4 to each part (Gaussian); RMSE per value over reps repetitions.
// Also statements of one aggregate (COUNT, BoundedVariance,
// BoundedStandardDeviation, BoundedQuantiles at 0.5; epsilon in two parts),
// and the long tail (10^6 persons over 10,000 groups with Zipf weights
// i^-1.1): groups kept.
//
// It is a module of its own under protect/testdata (which the go tool
// ignores), so that Google's library is never a dependency of dpsql:
//
//	cd protect/testdata/googleacc && go run . -reps 200
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"

	"github.com/google/differential-privacy/go/v3/dpagg"
	"github.com/google/differential-privacy/go/v3/noise"
)

const (
	groups   = 100
	perGroup = 10000
	lo, hi   = 0.0, 100.0
)

// data returns the values of the uniform shape: the same generator and seed as
// dpsql's accuracy test (PCG(1, 2), x = 100 * Float64()).
func data() [][]float64 {
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([][]float64, groups)
	for g := range xs {
		xs[g] = make([]float64, perGroup)
		for i := range xs[g] {
			xs[g][i] = hi * r.Float64()
		}
	}
	return xs
}

// zipfCounts returns the person counts of the long tail: 10^6 persons over
// 10,000 groups with weights i^-1.1, by largest remainders (deterministic).
func zipfCounts() []int64 {
	const n, total = 10000, 1000000
	w := make([]float64, n)
	h := 0.0
	for i := range w {
		w[i] = math.Pow(float64(i+1), -1.1)
		h += w[i]
	}
	c := make([]int64, n)
	type rem struct {
		i int
		f float64
	}
	var sum int64
	rs := make([]rem, n)
	for i := range w {
		x := total * w[i] / h
		c[i] = int64(math.Floor(x))
		sum += c[i]
		rs[i] = rem{i, x - math.Floor(x)}
	}
	// largest remainders first; ties by index
	for k := int64(0); k < total-sum; k++ {
		best := -1
		for j := range rs {
			if rs[j].f >= 0 && (best < 0 || rs[j].f > rs[best].f) {
				best = j
			}
		}
		c[rs[best].i]++
		rs[best].f = -1
	}
	return c
}

type stats struct{ count, sum, avg, vr, sd, med []float64 }

func rmse(errs []float64) float64 {
	s := 0.0
	for _, e := range errs {
		s += e * e
	}
	return math.Sqrt(s / float64(len(errs)))
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return v
}

// run measures one (epsilon, delta) cell; gaussian selects Google's Gaussian
// mode (delta/4 to each part) instead of Laplace (all of delta to selection).
func run(xs [][]float64, eps, delta float64, gaussian bool, reps int) (c, s, a float64, kept int) {
	part := eps / 4
	var nz noise.Noise = noise.Laplace()
	aggDelta, selDelta := 0.0, delta
	if gaussian {
		nz, aggDelta, selDelta = noise.Gaussian(), delta/4, delta/4
	}
	var ce, se, ae []float64
	for range reps {
		for _, g := range xs {
			sel := must(dpagg.NewPreAggSelectPartition(&dpagg.PreAggSelectPartitionOptions{Epsilon: part, Delta: selDelta, MaxPartitionsContributed: 1}))
			cnt := must(dpagg.NewCount(&dpagg.CountOptions{Epsilon: part, Delta: aggDelta, MaxPartitionsContributed: 1, Noise: nz}))
			sum := must(dpagg.NewBoundedSumFloat64(&dpagg.BoundedSumFloat64Options{Epsilon: part, Delta: aggDelta, MaxPartitionsContributed: 1, Lower: lo, Upper: hi, Noise: nz}))
			mean := must(dpagg.NewBoundedMean(&dpagg.BoundedMeanOptions{Epsilon: part, Delta: aggDelta, MaxPartitionsContributed: 1, MaxContributionsPerPartition: 1, Lower: lo, Upper: hi, Noise: nz}))
			ts := 0.0
			for _, x := range g {
				sel.Increment()
				sum.Add(x)
				mean.Add(x)
				ts += x
			}
			cnt.IncrementBy(int64(len(g)))
			ok := must(sel.ShouldKeepPartition())
			if !ok {
				continue
			}
			kept++
			ce = append(ce, float64(must(cnt.Result())-int64(len(g))))
			se = append(se, must(sum.Result())-ts)
			ae = append(ae, must(mean.Result())-ts/float64(len(g)))
		}
	}
	return rmse(ce), rmse(se), rmse(ae), kept
}

// runOne measures one-aggregate statements (selection and the aggregate, epsilon
// in two equal parts, Laplace): VAR_POP (BoundedVariance), STDDEV_POP
// (BoundedStandardDeviation), MEDIAN (BoundedQuantiles at rank 0.5), COUNT.
func runOne(xs [][]float64, eps, delta float64, reps int) (cnt, vr, sd, med float64) {
	part := eps / 2
	var ce, ve, de, me []float64
	for range reps {
		for _, g := range xs {
			c := must(dpagg.NewCount(&dpagg.CountOptions{Epsilon: part, MaxPartitionsContributed: 1}))
			v := must(dpagg.NewBoundedVariance(&dpagg.BoundedVarianceOptions{Epsilon: part, MaxPartitionsContributed: 1, MaxContributionsPerPartition: 1, Lower: lo, Upper: hi}))
			d := must(dpagg.NewBoundedStandardDeviation(&dpagg.BoundedStandardDeviationOptions{Epsilon: part, MaxPartitionsContributed: 1, MaxContributionsPerPartition: 1, Lower: lo, Upper: hi}))
			q := must(dpagg.NewBoundedQuantiles(&dpagg.BoundedQuantilesOptions{Epsilon: part, MaxPartitionsContributed: 1, MaxContributionsPerPartition: 1, Lower: lo, Upper: hi}))
			s, ss := 0.0, 0.0
			for _, x := range g {
				v.Add(x)
				d.Add(x)
				q.Add(x)
				s += x
				ss += x * x
			}
			c.IncrementBy(int64(len(g)))
			n := float64(len(g))
			tv := ss/n - (s/n)*(s/n)
			sorted := append([]float64(nil), g...)
			sort.Float64s(sorted)
			tm := (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
			ce = append(ce, float64(must(c.Result())-int64(len(g))))
			ve = append(ve, must(v.Result())-tv)
			de = append(de, must(d.Result())-math.Sqrt(tv))
			me = append(me, must(q.Result(0.5))-tm)
		}
	}
	return rmse(ce), rmse(ve), rmse(de), rmse(me)
}

// longTail returns the mean number of groups Google keeps over reps runs, with
// epsilon/parts to selection and all of delta.
func longTail(eps, delta float64, parts, reps int) float64 {
	counts := zipfCounts()
	total := 0
	for range reps {
		for _, n := range counts {
			sel := must(dpagg.NewPreAggSelectPartition(&dpagg.PreAggSelectPartitionOptions{Epsilon: eps / float64(parts), Delta: delta, MaxPartitionsContributed: 1}))
			sel.IncrementBy(n)
			if must(sel.ShouldKeepPartition()) {
				total++
			}
		}
	}
	return float64(total) / float64(reps)
}

func main() {
	reps := flag.Int("reps", 200, "repetitions per cell")
	cells := flag.String("cells", "all", "all, or 'issue' for (1, 1e-5) only")
	flag.Parse()
	xs := data()
	epss := []float64{0.1, 0.5, 1, 2, 5}
	deltas := []float64{1e-5, 1e-8}
	if *cells == "issue" {
		epss, deltas = []float64{1}, []float64{1e-5}
	}
	fmt.Printf("Google differential-privacy Go v3.0.0; 100 groups x 10^4 rows, x ~ U[0,100] (PCG(1,2)), bounds [0,100], %d reps; RMSE per value\n\n", *reps)
	fmt.Println("| epsilon | delta | mode | COUNT | SUM | AVG | groups kept (of 100 x reps) | closed form COUNT | closed form SUM |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, d := range deltas {
		for _, e := range epss {
			for _, g := range []bool{false, true} {
				c, s, a, k := run(xs, e, d, g, *reps)
				mode := "laplace"
				if g {
					mode = "gaussian"
				}
				fmt.Printf("| %g | %g | %s | %.4g | %.4g | %.4g | %d | %.4g | %.4g |\n", e, d, mode, c, s, a, k, math.Sqrt2*4/e, math.Sqrt2*400/e)
			}
		}
	}
	fmt.Println()
	fmt.Println("One aggregate per statement (selection + aggregate, epsilon/2 each, Laplace):")
	fmt.Println("| epsilon | delta | COUNT | VAR_POP | STDDEV_POP | MEDIAN | closed form COUNT |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, d := range deltas {
		for _, e := range epss {
			c, v, s, m := runOne(xs, e, d, max(*reps/10, 5))
			fmt.Printf("| %g | %g | %.4g | %.4g | %.4g | %.4g | %.4g |\n", e, d, c, v, s, m, math.Sqrt2*2/e)
		}
	}
	fmt.Println()
	fmt.Println("Long tail (Zipf s=1.1, 10,000 groups, 10^6 persons): mean groups kept")
	fmt.Println("| epsilon | delta | 4 parts (eps/4 to selection) | 2 parts (eps/2) |")
	fmt.Println("|---|---|---|---|")
	for _, d := range deltas {
		for _, e := range epss {
			fmt.Printf("| %g | %g | %.1f | %.1f |\n", e, d, longTail(e, d, 4, 20), longTail(e, d, 2, 20))
		}
	}
}
