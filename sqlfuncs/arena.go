package sqlfuncs

import "runtime"

// floatArena hands out the large float32 buffers a release aggregate fills
// with its rows (4096 rows of d features at a time, 188 MB for
// Fashion-MNIST). On Linux they are anonymous mappings the kernel may back
// with 2 MB pages: filling freshly allocated memory page by page costs one
// page fault per 4 KB, about 1 s for 188 MB on the project's machine, and
// huge pages cut that to about 0.2 s. Elsewhere they come from the Go heap.
// free returns them at once; a finalizer frees what free was not called on.
//
// prepare maps the next chunk ahead of time and has the kernel fault its
// pages in on another goroutine (zeroing 188 MB takes about 0.3 CPU-seconds
// there), so that the page faults run on the other core while SQLite
// delivers the rows of the chunk before it.
type floatArena struct {
	maps  []mapping
	spare *mapping // mapped by prepare for the next alloc of its size
}

// newFloatArena returns an empty arena.
func newFloatArena() *floatArena {
	a := &floatArena{}
	runtime.SetFinalizer(a, (*floatArena).free)
	return a
}

// alloc returns a zeroed slice of length 0 and capacity n.
func (a *floatArena) alloc(n int) []float32 {
	if a.spare != nil && len(a.spare.floats) == n {
		m := *a.spare
		a.spare = nil
		a.maps = append(a.maps, m)
		return m.floats[:0:n]
	}
	if n >= hugeThreshold {
		if m, ok := mapFloats(n); ok {
			a.maps = append(a.maps, m)
			return m.floats[:0:n]
		}
	}
	return make([]float32, 0, n)
}

// prepare maps a buffer of n float32s for the next alloc(n) and starts
// populating its first fill float32s in the background (see floatArena):
// the rest faults in as it is written, so memory that is never filled is
// never committed. It does nothing if a buffer is already prepared, for a
// buffer too small to be mapped, or off Linux.
func (a *floatArena) prepare(n, fill int) {
	if a == nil || a.spare != nil || n < hugeThreshold {
		return
	}
	if m, ok := mapFloats(n); ok {
		m.populate(min(max(fill, 0), n))
		a.spare = &m
	}
}

// dropSpare unmaps the buffer prepare mapped, if it was not used.
func (a *floatArena) dropSpare() {
	if a != nil && a.spare != nil {
		a.spare.unmap()
		a.spare = nil
	}
}

// release unmaps the buffer s came from (s must start it), if the arena
// mapped it; s may not be used afterwards.
func (a *floatArena) release(s []float32) {
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

// free unmaps every buffer; none may be used afterwards.
func (a *floatArena) free() {
	if a == nil {
		return
	}
	for _, m := range a.maps {
		m.unmap()
	}
	a.maps = nil
	a.dropSpare()
}

// hugeThreshold is the smallest buffer (in float32s, 4 MB) worth a mapping of its own.
const hugeThreshold = 1 << 20
