package sqlfuncs

import "runtime"

// floatArena hands out the large float32 buffers a release aggregate fills
// with its rows (4096 rows of d features at a time, 188 MB for
// Fashion-MNIST). On Linux they are anonymous mappings the kernel may back
// with 2 MB pages: filling freshly allocated memory page by page costs one
// page fault per 4 KB, about 1 s for 188 MB on the project's machine, and
// huge pages cut that to about 0.2 s. Elsewhere they come from the Go heap.
// free returns them at once; a finalizer frees what free was not called on.
type floatArena struct{ maps []mapping }

// newFloatArena returns an empty arena.
func newFloatArena() *floatArena {
	a := &floatArena{}
	runtime.SetFinalizer(a, (*floatArena).free)
	return a
}

// alloc returns a zeroed slice of length 0 and capacity n.
func (a *floatArena) alloc(n int) []float32 {
	if n >= hugeThreshold {
		if m, ok := mapFloats(n); ok {
			a.maps = append(a.maps, m)
			return m.floats[:0:n]
		}
	}
	return make([]float32, 0, n)
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
}

// hugeThreshold is the smallest buffer (in float32s, 4 MB) worth a mapping of its own.
const hugeThreshold = 1 << 20
