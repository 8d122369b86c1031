package dfs

import (
	mrand "math/rand/v2"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/release"
)

// An MNIST-sized table: n = 60000 rows, d = 784 float32 features, 10 classes.
const benchN, benchD, benchK, benchM = 60000, 784, 10, 50

var benchData = sync.OnceValue(func() Data {
	r := mrand.New(mrand.NewPCG(1, 2))
	x := make([]float32, benchN*benchD)
	for i := range x {
		x[i] = float32(r.Float64())
	}
	labels := make([]int, benchN)
	for i := range labels {
		labels[i] = r.IntN(benchK)
	}
	return Data{X: x, D: benchD, Labels: labels, N: benchN}
})

func benchParams(score string) Params {
	return Params{M: benchM, Score: score, MuSelect: 1, MuRelease: 1, C: 20, CRelease: 5, Classes: benchK, Labels: LabelsPublic}
}

func benchSelect(b *testing.B, score string) {
	data, p := benchData(), benchParams(score)
	noise := release.NewNoise()
	b.SetBytes(int64(len(data.X) * 4))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Select(noise, data, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSelectDistance(b *testing.B) { benchSelect(b, ScoreDistance) }
func BenchmarkSelectT(b *testing.B)        { benchSelect(b, ScoreT) }

func benchRelease(b *testing.B, labels string) {
	data, p := benchData(), benchParams(ScoreDistance)
	p.Labels, p.EpsLabels = labels, 2
	sel := Selection{Indices: make([]int, benchM)}
	for i := range sel.Indices {
		sel.Indices[i] = 7 + 15*i
	}
	noise := release.NewNoise()
	var sink float32
	b.ResetTimer()
	for b.Loop() {
		err := ReleaseRows(noise, data, sel, p, func(_ int, x []float32, _ int) error { sink += x[0]; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	_ = sink
}

func BenchmarkReleasePublicLabels(b *testing.B)  { benchRelease(b, LabelsPublic) }
func BenchmarkReleasePrivateLabels(b *testing.B) { benchRelease(b, LabelsPrivate) }

// BenchmarkSelectAndRelease is the whole pipeline: selection of m = 50 of 784
// features by the distance score, then the per-row release of the kept ones.
func BenchmarkSelectAndRelease(b *testing.B) {
	data, p := benchData(), benchParams(ScoreDistance)
	noise := release.NewNoise()
	b.ResetTimer()
	for b.Loop() {
		sel, err := Select(noise, data, p)
		if err != nil {
			b.Fatal(err)
		}
		if err := ReleaseRows(noise, data, sel, p, func(int, []float32, int) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
