package readhook

import (
	"context"
	"testing"
)

// Without a hook AfterRow returns at once; StopMidway's hook signals each
// read's first row and returns only when the read's context is done.
func TestStopMidway(t *testing.T) {
	AfterRow(context.Background()) // no hook: returns
	reached, remove := StopMidway()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		AfterRow(ctx)
		close(returned)
	}()
	<-reached
	select {
	case <-returned:
		t.Fatal("the hook returned before the read's context was done")
	default:
	}
	cancel()
	<-returned
	AfterRow(ctx) // a done context: returns at once, signalled
	AfterRow(ctx) // the signal not taken yet: dropped, not blocking
	if len(reached) != 1 {
		t.Errorf("%d signals waiting, want 1", len(reached))
	}
	remove()
	if hook.Load() != nil {
		t.Error("remove left the hook installed")
	}
}
