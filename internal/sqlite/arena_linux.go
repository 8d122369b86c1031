package sqlite

import (
	"syscall"
	"unsafe"
)

// mapping is one anonymous memory mapping holding float32s.
type mapping struct {
	b         []byte
	floats    []float32
	populated chan struct{} // closed when populate's goroutine is done; nil if none
}

const (
	madvHugepage      = 14 // MADV_HUGEPAGE
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE (Linux 5.14)
)

// mapFloats maps n zeroed float32s, asking for transparent huge pages (a hint
// the kernel may ignore); ok is false when the mapping fails.
func mapFloats(n int) (mapping, bool) {
	b, err := syscall.Mmap(-1, 0, 4*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return mapping{}, false
	}
	_ = syscall.Madvise(b, madvHugepage)
	return mapping{b: b, floats: unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)}, true
}

// populate has the kernel fault in the pages of the mapping's first floats
// float32s, writable, on a new goroutine. It writes nothing (MADV_POPULATE_WRITE faults the pages in
// without touching their contents), so the buffer may be filled meanwhile;
// an older kernel refuses the advice and the pages fault in on first write,
// as without it.
func (m *mapping) populate(floats int) {
	// madvise wants whole pages: round up to 4 KB, within the mapping.
	n := min(len(m.b), (4*floats+4095)&^4095)
	if n == 0 {
		return
	}
	m.populated = make(chan struct{})
	go func(b []byte, done chan struct{}) {
		defer close(done)
		_ = syscall.Madvise(b, madvPopulateWrite)
	}(m.b[:n], m.populated)
}

// unmap unmaps the mapping, once populate's goroutine is done with it.
func (m mapping) unmap() {
	if m.populated != nil {
		<-m.populated
	}
	_ = syscall.Munmap(m.b)
}
