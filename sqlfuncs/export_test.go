package sqlfuncs

import "encoding/json"

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
