package release

import (
	"math"
	"testing"
)

// exactCounts returns, per index, how many of the 2^32 (column, coin) pairs
// of the table pick it.
func exactCounts(t aliasTable, n int) []uint64 {
	c := make([]uint64, n)
	capa := t.cmask + 1
	for col := range t.thr {
		own := t.thr[col]
		if int(col) < n {
			c[col] += own
		}
		if a := int(t.alias[col]); a < n {
			c[a] += capa - own
		}
	}
	return c
}

func TestAliasTableExact(t *testing.T) {
	for _, w := range [][]uint64{
		{1 << 62, 1 << 62},
		{1<<63 - 3, 1, 1, 1},
		{100, 1<<63 - 100 - 7, 7},
		{1 << 63},
		func() []uint64 { // 300 uneven weights
			w := make([]uint64, 300)
			var s uint64
			for i := range w {
				w[i] = uint64(1e16 * (1 + math.Sin(float64(i))))
				s += w[i]
			}
			w[17] += 1<<63 - s
			return w
		}(),
	} {
		a, err := newAliasTable(w)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range exactCounts(a, len(w)) {
			if c != uint64(w[i]) {
				t.Fatalf("index %d: table gives %d of 2^63, want %d", i, c, w[i])
			}
		}
	}
	if _, err := newAliasTable([]uint64{1, 2}); err == nil {
		t.Error("weights not summing to 2^63 accepted")
	}
}

func TestGridNoiseLaw(t *testing.T) {
	// Four intervals with weights 1/8, 3/8, 3/8, 1/8; sensitivity 3, D = 2.
	w := []uint64{1 << 60, 3 << 60, 3 << 60, 1 << 60}
	d, err := NewGridNoise(w, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !(d.Scale >= 3+d.Grid) || d.Scale > 3*(1+0x1p-18) || d.Width < 1<<19 {
		t.Fatalf("calibration %+v", d)
	}
	n := NewSeededNoise(5)
	const draws = 400000
	width := float64(d.Width) * d.Grid
	counts := make([]int, 4)
	var frac [10]int
	for range draws {
		y := n.AddGridNoise(0, d)
		if y <= -2*width || y >= 2*width {
			t.Fatalf("draw %v outside the support ±%v", y, 2*width)
		}
		j := int(math.Floor(y/width)) + 2
		counts[j]++
		frac[int((y/width-math.Floor(y/width))*10)]++
	}
	for j, c := range counts {
		p := float64(w[j]) / (1 << 63)
		if se := math.Sqrt(p * (1 - p) / draws); math.Abs(float64(c)/draws-p) > 5*se {
			t.Errorf("interval %d: frequency %v, want %v", j, float64(c)/draws, p)
		}
	}
	for i, c := range frac { // uniform within the interval
		if se := math.Sqrt(0.09 / draws); math.Abs(float64(c)/draws-0.1) > 5*se {
			t.Errorf("tenth %d of the intervals: frequency %v, want 0.1", i, float64(c)/draws)
		}
	}
	for _, bad := range []struct {
		w []uint64
		d int
		s float64
	}{{w, 0, 1}, {w, 2, 0}, {w, 2, math.NaN()}, {w[:3], 2, 1}, {[]uint64{1, 2}, 1, 1}} {
		if _, err := NewGridNoise(bad.w, bad.d, bad.s); err == nil {
			t.Errorf("NewGridNoise(%v, %d, %v) accepted", bad.w, bad.d, bad.s)
		}
	}
}

// BenchmarkGridNoise measures sampling from a cached distribution (300
// intervals): the issue asks for >= 10 million values/s per core.
func BenchmarkGridNoise(b *testing.B) {
	w := make([]uint64, 300)
	for i := range w {
		w[i] = 1 << 63 / 300
	}
	w[0] += 1<<63 - 300*(1<<63/300)
	d, err := NewGridNoise(w, 20, 1)
	if err != nil {
		b.Fatal(err)
	}
	n := NewSeededNoise(1)
	var s float64
	for b.Loop() {
		s += n.AddGridNoise(1.5, d)
	}
	_ = s
}
