//go:build !linux

package sqlite

import "time"

// Writeback is Linux's early writeback of a growing file (writeback_linux.go);
// elsewhere the commit's fsync writes everything.
type Writeback struct{}

// StartWriteback returns nil, a Writeback that does nothing.
func StartWriteback(string) *Writeback { return nil }

// Start does nothing.
func (*Writeback) Start() {}

// Every does nothing.
func (*Writeback) Every(time.Duration) {}

// Stop does nothing.
func (*Writeback) Stop() {}
