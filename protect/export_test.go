package protect

import (
	"context"
	"database/sql"
	"testing"
)

// HeldReads is an engine whose read connections a test holds: an accepted
// statement's read then waits, deterministically, until Release.
type HeldReads struct {
	e     *Engine
	conns []*sql.Conn
}

// HoldReads takes every read connection of the engine an analyst connection
// of the file at path already uses (open one and run a statement first).
// Planning, the budget decision and the charge use other connections, so
// only reads of protected tables wait.
func HoldReads(t testing.TB, path string) *HeldReads {
	t.Helper()
	enginesMu.Lock()
	e, ok := engines[path]
	if ok {
		e.refs++
	}
	enginesMu.Unlock()
	if !ok {
		t.Fatalf("no engine is open for %s: open an analyst connection and run a statement first", path)
	}
	h := &HeldReads{e: e}
	for range e.db.Stats().MaxOpenConnections {
		c, err := e.db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h.conns = append(h.conns, c)
	}
	t.Cleanup(h.Release)
	return h
}

// Waiting returns how many times a read has had to wait for a connection
// since the engine was opened (database/sql's WaitCount).
func (h *HeldReads) Waiting() int64 { return h.e.db.Stats().WaitCount }

// Release gives the connections back; the waiting reads go on.
func (h *HeldReads) Release() {
	if h.conns == nil {
		return
	}
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
	h.e.Release()
}
