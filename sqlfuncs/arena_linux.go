package sqlfuncs

import (
	"syscall"
	"unsafe"
)

// mapping is one anonymous memory mapping holding float32s.
type mapping struct {
	b      []byte
	floats []float32
}

const madvHugepage = 14 // MADV_HUGEPAGE

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

func (m mapping) unmap() { _ = syscall.Munmap(m.b) }
