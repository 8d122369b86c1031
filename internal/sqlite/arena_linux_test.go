package sqlite

import "testing"

// TestArenaPrepare checks the chunk faulted in ahead: the next alloc of its
// size returns it, zeroed and whole, also while it is being populated and
// when only part of it was; an alloc of another size does not take it; free
// and dropSpare unmap it.
func TestArenaPrepare(t *testing.T) {
	const n = 1 << 21 // 8 MB of float32s, above HugeThreshold
	for _, fill := range []int{n, n / 3, 0} {
		a := NewArena()
		a.Prepare(n, fill)
		spare := a.spare
		if spare == nil {
			t.Fatal("prepare mapped nothing: Linux's anonymous mappings are arena_linux.go's")
		}
		a.Prepare(n, fill) // one spare at a time
		if a.spare != spare {
			t.Fatal("a second prepare replaced the spare")
		}
		other := a.Alloc(n / 2)
		if a.spare != spare || cap(other) != n/2 {
			t.Fatal("an alloc of another size took the spare")
		}
		x := a.Alloc(n)
		if a.spare != nil || cap(x) != n || &x[:1][0] != &spare.floats[0] {
			t.Fatalf("alloc(%d) did not return the prepared buffer", n)
		}
		x = x[:n]
		for i, v := range x {
			if v != 0 {
				t.Fatalf("fill %d: prepared buffer holds %v at %d", fill, v, i)
			}
			x[i] = float32(i)
		}
		for i, v := range x {
			if v != float32(i) {
				t.Fatalf("fill %d: the buffer changed under population at %d", fill, i)
			}
		}
		a.Prepare(n, fill)
		a.DropSpare()
		if a.spare != nil {
			t.Fatal("dropSpare kept the spare")
		}
		a.Prepare(n, fill)
		a.Free()
		if a.spare != nil || a.maps != nil {
			t.Fatal("free kept buffers")
		}
	}
}
