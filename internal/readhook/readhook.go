// Package readhook lets tests stop a protected-mode read in the middle of
// it without a clock: protect calls AfterRow after each row its read of a
// statement scans, and a test's hook may wait there (until the statement's
// context is done, say), so that the statement is stopped mid-read whatever
// the machine's speed. No hook is installed outside tests; AfterRow then
// costs one atomic load per row read.
package readhook

import (
	"context"
	"sync/atomic"
)

// Func is a hook: ctx is the read's context.
type Func func(ctx context.Context)

var hook atomic.Pointer[Func]

// Set installs f as the hook (nil removes it). Tests only; a test that sets
// it must not run in parallel with other reads of protected tables.
func Set(f Func) {
	if f == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&f)
}

// AfterRow calls the hook, if one is installed.
func AfterRow(ctx context.Context) {
	if f := hook.Load(); f != nil {
		(*f)(ctx)
	}
}

// StopMidway installs a hook that, after a read's first row, signals the
// returned channel (which holds one signal; more are dropped) and waits
// until the read's context is done; the read then goes on and sees that it
// was stopped. Call the returned function to remove the hook (t.Cleanup).
func StopMidway() (reached <-chan struct{}, remove func()) {
	ch := make(chan struct{}, 1)
	Set(func(ctx context.Context) {
		select {
		case ch <- struct{}{}:
		default:
		}
		<-ctx.Done()
	})
	return ch, func() { Set(nil) }
}
