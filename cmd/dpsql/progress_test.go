package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSpinnerQuietForShortTasks(t *testing.T) {
	var buf lockedBuffer
	s := newSpinner(&buf, "SELECT 1;", time.Hour, time.Millisecond)
	s.Stop()
	s.Stop() // idempotent
	if buf.String() != "" {
		t.Fatalf("a task shorter than the delay drew %q", buf.String())
	}
}

func TestSpinnerDrawsAndErases(t *testing.T) {
	var buf lockedBuffer
	s := newSpinner(&buf, "SELECT slow();", 0, time.Millisecond)
	s.Set("phase 2 of 3")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "phase 2 of 3") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.Stop()
	out := buf.String()
	if !strings.Contains(out, "running") || !strings.Contains(out, "phase 2 of 3") {
		t.Fatalf("spinner output %q lacks its status", out)
	}
	if !strings.HasSuffix(out, "\r\x1b[K") {
		t.Fatalf("spinner did not erase its line: %q", out)
	}
}

func TestStartTaskNoTerminal(t *testing.T) {
	m := &Main{Stderr: &bytes.Buffer{}}
	if _, ok := m.startTask("x").(noTask); !ok {
		t.Fatal("a non-terminal stderr should get no spinner")
	}
}
