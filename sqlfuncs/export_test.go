package sqlfuncs

// ResetOptMemo forgets the optimised distributions this process verified, as
// a new process would.
func ResetOptMemo() { optVerified.Clear() }

// ResetCalibrationMemo forgets the calibrations this process made or
// verified, as a new process would.
func ResetCalibrationMemo() { calibrated.Clear() }

// RegisterTestFunc adds a scalar SQL function f of any number of arguments,
// through the same shim as dpsql's functions, to every registered connection
// of the file path.
func RegisterTestFunc(path, name string, f func(args ...any) (any, error)) (n int, err error) {
	conns.Range(func(_, v any) bool {
		c := v.(*Conn)
		if c.path == path {
			if err = register(c.handle, &sqlFunc{name: name, scalar: f, copyBlobs: true}, -1, 0); err != nil {
				return false
			}
			n++
		}
		return true
	})
	return n, err
}
