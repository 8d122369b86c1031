package lru

import (
	"errors"
	"sync"
	"testing"
)

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](3, nil)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Put("c", 3)
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.Put("d", 4) // evicts b
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.Get(k); ok != want {
			t.Errorf("%s held: %v, want %v", k, ok, want)
		}
	}
	if c.Len() != 3 || c.Weight() != 3 {
		t.Errorf("len %d, weight %d; want 3, 3", c.Len(), c.Weight())
	}
}

func TestWeights(t *testing.T) {
	c := New[int, []float64](100, func(v []float64) int { return len(v) })
	for _, tc := range []struct {
		key, size  int
		kept       bool
		wantWeight int
	}{
		{1, 20, true, 20},
		{2, 25, true, 45},
		{3, 26, false, 45}, // heavier than a quarter of the limit: not kept
		{4, 25, true, 70},
		{5, 25, true, 95},
		{6, 10, true, 85}, // 105 > 100: the least recently used (1, of 20) goes
	} {
		v := make([]float64, tc.size)
		if got := c.Put(tc.key, v); len(got) != tc.size {
			t.Errorf("Put(%d) returned a value of %d, want its own", tc.key, len(got))
		}
		if _, ok := c.Get(tc.key); ok != tc.kept {
			t.Errorf("%d kept: %v, want %v", tc.key, ok, tc.kept)
		}
		if w := c.Weight(); w != tc.wantWeight {
			t.Errorf("after %d: weight %d, want %d", tc.key, w, tc.wantWeight)
		}
	}
	if _, ok := c.Get(1); ok {
		t.Error("1 not evicted")
	}
	c.Clear()
	if c.Len() != 0 || c.Weight() != 0 {
		t.Errorf("after Clear: len %d, weight %d", c.Len(), c.Weight())
	}
}

func TestPutKeepsTheFirstValue(t *testing.T) {
	c := New[string, *int](10, nil)
	one, two := new(int), new(int)
	if got := c.Put("k", one); got != one {
		t.Error("first Put did not return its value")
	}
	if got := c.Put("k", two); got != one {
		t.Error("second Put replaced the value held")
	}
}

func TestGetOr(t *testing.T) {
	c := New[int, int](10, nil)
	builds := 0
	build := func() (int, error) { builds++; return 42, nil }
	for range 3 {
		if v, err := c.GetOr(7, build); v != 42 || err != nil {
			t.Fatalf("GetOr: %v, %v", v, err)
		}
	}
	if builds != 1 {
		t.Errorf("%d builds, want 1", builds)
	}
	bad := errors.New("no")
	if _, err := c.GetOr(8, func() (int, error) { return 0, bad }); err != bad {
		t.Errorf("error %v, want %v", err, bad)
	}
	if _, ok := c.Get(8); ok {
		t.Error("a failed build was stored")
	}
}

// Concurrent callers share one value per key and the bound holds (run with
// -race).
func TestConcurrent(t *testing.T) {
	c := New[int, *int](16, nil)
	var wg sync.WaitGroup
	got := make([][]*int, 8)
	for g := range got {
		wg.Go(func() {
			for k := range 64 {
				v, _ := c.GetOr(k%4, func() (*int, error) { return new(int), nil })
				got[g] = append(got[g], v)
				c.Put(100+k, new(int))
			}
		})
	}
	wg.Wait()
	if c.Len() > 16 {
		t.Errorf("%d entries, limit 16", c.Len())
	}
	for g := range got {
		for i, v := range got[g] {
			if v == nil {
				t.Fatalf("goroutine %d, call %d: nil", g, i)
			}
		}
	}
}
