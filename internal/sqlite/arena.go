package sqlite

import "runtime"

// Arena hands out the large float32 buffers a release aggregate fills
// with its rows (4096 rows of d features at a time, 188 MB for
// Fashion-MNIST). On Linux they are anonymous mappings the kernel may back
// with 2 MB pages: filling freshly allocated memory page by page costs one
// page fault per 4 KB, about 1 s for 188 MB on the project's machine, and
// huge pages cut that to about 0.2 s. Elsewhere they come from the Go heap.
// Free returns them at once; a finalizer frees what Free was not called on.
//
// Prepare maps the next chunk ahead of time and has the kernel fault its
// pages in on another goroutine (zeroing 188 MB takes about 0.3 CPU-seconds
// there), so that the page faults run on the other core while SQLite
// delivers the rows of the chunk before it.
type Arena struct {
	maps  []mapping
	spare *mapping // mapped by Prepare for the next Alloc of its size
}

// NewArena returns an empty arena.
func NewArena() *Arena {
	a := &Arena{}
	runtime.SetFinalizer(a, (*Arena).Free)
	return a
}

// Alloc returns a zeroed slice of length 0 and capacity n.
func (a *Arena) Alloc(n int) []float32 {
	if a.spare != nil && len(a.spare.floats) == n {
		m := *a.spare
		a.spare = nil
		a.maps = append(a.maps, m)
		return m.floats[:0:n]
	}
	if n >= HugeThreshold {
		if m, ok := mapFloats(n); ok {
			a.maps = append(a.maps, m)
			return m.floats[:0:n]
		}
	}
	return make([]float32, 0, n)
}

// Prepare maps a buffer of n float32s for the next Alloc(n) and starts
// populating its first fill float32s in the background (see Arena):
// the rest faults in as it is written, so memory that is never filled is
// never committed. It does nothing if a buffer is already prepared, for a
// buffer too small to be mapped, or off Linux.
func (a *Arena) Prepare(n, fill int) {
	if a == nil || a.spare != nil || n < HugeThreshold {
		return
	}
	if m, ok := mapFloats(n); ok {
		m.populate(min(max(fill, 0), n))
		a.spare = &m
	}
}

// DropSpare unmaps the buffer Prepare mapped, if it was not used.
func (a *Arena) DropSpare() {
	if a != nil && a.spare != nil {
		a.spare.unmap()
		a.spare = nil
	}
}

// Release unmaps the buffer s came from (s must start it), if the arena
// mapped it; s may not be used afterwards.
func (a *Arena) Release(s []float32) {
	if a == nil || cap(s) == 0 {
		return
	}
	for i, m := range a.maps {
		if len(m.floats) > 0 && &m.floats[0] == &s[:1][0] {
			m.unmap()
			a.maps = append(a.maps[:i], a.maps[i+1:]...)
			return
		}
	}
}

// Free unmaps every buffer; none may be used afterwards.
func (a *Arena) Free() {
	if a == nil {
		return
	}
	for _, m := range a.maps {
		m.unmap()
	}
	a.maps = nil
	a.DropSpare()
}

// Prepared reports whether a buffer mapped by Prepare awaits its Alloc.
func (a *Arena) Prepared() bool { return a != nil && a.spare != nil }

// HugeThreshold is the smallest buffer (in float32s, 4 MB) worth a mapping of its own.
const HugeThreshold = 1 << 20
