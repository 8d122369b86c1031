//go:build !unix

package ledger

import "time"

// processCPU is wall time where getrusage is missing.
func processCPU() time.Duration { return time.Duration(time.Now().UnixNano()) }
