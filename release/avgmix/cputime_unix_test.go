//go:build unix

package avgmix

import "syscall"

// processCPU returns the CPU time (user and system) the process has used, in
// seconds: on a shared machine a steadier measure of work than wall time.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
