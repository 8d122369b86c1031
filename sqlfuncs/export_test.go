package sqlfuncs

import (
	"encoding/json"
	"time"

	"github.com/dpsql/dpsql/internal/sqlite"
)

// ResetOptMemo forgets the optimised distributions this process verified, as
// a new process would.
func ResetOptMemo() { optVerified.Clear() }

// ResetCalibrationMemo forgets the calibrations this process made or
// verified, as a new process would.
func ResetCalibrationMemo() { calibrated.Clear() }

// CalibrationCounts returns how many calibrations of problems of T steps
// this process ran from scratch and how many of its dp_avgmix head starts
// finished.
func CalibrationCounts(steps int) (solves, heads int64) {
	calibrationCounts.Range(func(k, v any) bool {
		var p calibrationProblem
		if json.Unmarshal([]byte(k.(string)), &p) == nil && p.Steps == steps {
			c := v.(*calibrationCount)
			solves += c.solves.Load()
			heads += c.heads.Load()
		}
		return true
	})
	return solves, heads
}

// DecisionsAhead returns how many dp_avgmix head starts of problems of T
// steps made their charge's budget decision ahead.
func DecisionsAhead(steps int) (n int64) {
	calibrationCounts.Range(func(k, v any) bool {
		var p calibrationProblem
		if json.Unmarshal([]byte(k.(string)), &p) == nil && p.Steps == steps {
			n += v.(*calibrationCount).decided.Load()
		}
		return true
	})
	return n
}

// RegisterTestFunc adds a scalar SQL function f of any number of arguments,
// through the same shim as dpsql's functions, to every registered connection
// of the file path.
func RegisterTestFunc(path, name string, f func(args ...any) (any, error)) (n int, err error) {
	conns.Range(func(_, v any) bool {
		c := v.(*Conn)
		if c.path == path {
			if err = register(c.db, &sqlFunc{name: name, scalar: f, copyBlobs: true}, -1, 0); err != nil {
				return false
			}
			n++
		}
		return true
	})
	return n, err
}

// CheckVersion is checkVersion.
var CheckVersion = sqlite.CheckVersion

// CanPollInterrupts is canPollInterrupts.
var CanPollInterrupts = sqlite.CanPollInterrupts

// RegisterInterruptWatch adds t_watch(ms) to the connections of the file
// path: it waits up to ms milliseconds for its statement to be interrupted,
// checking as dpsql's functions do, and sends on seen whether it was, and
// whether the connection's statement-run count stayed put meanwhile.
func RegisterInterruptWatch(path string, seen chan<- [2]bool) (int, error) {
	return RegisterTestFunc(path, "t_watch", func(args ...any) (any, error) {
		c := connOf(path)
		runs := c.runs.Value()
		deadline := time.Now().Add(time.Duration(args[0].(int64)) * time.Millisecond)
		saw := false
		for !saw && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			saw = c.db.Interrupted()
		}
		seen <- [2]bool{saw, c.runs.Value() == runs}
		return nil, nil
	})
}

// connOf returns a registered connection of the file path.
func connOf(path string) (c *Conn) {
	conns.Range(func(_, v any) bool {
		if v.(*Conn).path == path {
			c = v.(*Conn)
			return false
		}
		return true
	})
	return c
}

// WatchesAfterStop starts and stops n interrupt watches on the connection of
// the file path (as a charge does) and returns how many times a watch was
// still running when its stop had returned.
func WatchesAfterStop(path string, n int) (late int, ok bool) {
	conns.Range(func(_, v any) bool {
		c := v.(*Conn)
		if c.path != path {
			return true
		}
		ok = true
		for range n {
			_, stop := c.untilInterrupted()
			stop()
			if watches.Load() != 0 {
				late++
			}
		}
		return false
	})
	return late, ok
}

// ProbeOnly is probeOnly: interrupts are then found as before SQLite 3.41.
var ProbeOnly = sqlite.ProbeOnly
