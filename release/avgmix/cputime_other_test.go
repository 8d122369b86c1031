//go:build !unix

package avgmix

// processCPU returns 0: CPU time is measured on Unix only.
func processCPU() float64 { return 0 }
