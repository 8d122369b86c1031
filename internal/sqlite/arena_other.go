//go:build !linux

package sqlite

// mapping is unused off Linux: buffers come from the Go heap.
type mapping struct{ floats []float32 }

func mapFloats(int) (mapping, bool) { return mapping{}, false }

func (mapping) unmap() {}

func (*mapping) populate(int) {}
