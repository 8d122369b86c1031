package sqlfuncs

// ResetOptMemo forgets the optimised distributions this process verified, as
// a new process would.
func ResetOptMemo() { optVerified.Clear() }
