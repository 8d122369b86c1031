//go:build !linux

package sqlfuncs

import "time"

// writeback is Linux's early writeback of a growing file (writeback_linux.go);
// elsewhere the commit's fsync writes everything.
type writeback struct{}

func startWriteback(string) *writeback { return nil }

func (*writeback) start() {}

func (*writeback) every(time.Duration) {}

func (*writeback) stop() {}
