package sqlfuncs

// ResetOptMemo forgets the optimised distributions this process verified, as
// a new process would.
func ResetOptMemo() { optVerified.Clear() }

// ResetCalibrationMemo forgets the calibrations this process made or
// verified, as a new process would.
func ResetCalibrationMemo() { calibrated.Clear() }
