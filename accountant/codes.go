package accountant

import "errors"

// Code names why a charge was refused or the ledger failed, for programs: it is the same
// in every process and never parsed from a message. Read it with [CodeOf],
// or test for one with errors.Is(err, CodeBudgetExceeded). Errors that
// crossed SQLite (which keeps only their message) get their code back
// through the connection that ran the statement (ext.Typed).
type Code string

// The codes.
const (
	// CodeBudgetExceeded: the charge does not fit its scope's budget
	// (a *BudgetError); nothing was charged or released.
	CodeBudgetExceeded Code = "budget_exceeded"
	// CodeFileCapExceeded: the charge fits its scope but not the owner's
	// cap on the whole file's total (a *BudgetError of scope FileScope).
	CodeFileCapExceeded Code = "file_cap_exceeded"
	// CodeNeighbours: the entry's neighbour relation cannot be accounted in
	// the scope (ErrNeighbours).
	CodeNeighbours Code = "wrong_neighbours"
	// CodeUnknownScope: no such budget scope (ledger.ErrUnknownScope).
	CodeUnknownScope Code = "unknown_scope"
	// CodeNoLedger: the file has no ledger (ledger.ErrNoLedger).
	CodeNoLedger Code = "no_ledger"
	// CodeChainBroken: the ledger's hash chain does not verify (ledger.ErrChainBroken).
	CodeChainBroken Code = "chain_broken"
	// CodeWriteConflict: the ledger could not be locked (ledger.ErrWriteConflict).
	CodeWriteConflict Code = "write_conflict"
)

// Error returns the code itself, so that a Code can be the target of
// errors.Is.
func (c Code) Error() string { return string(c) }

// Err returns a sentinel error with message msg that errors.Is also matches
// against c, so that [CodeOf] reports c for it and for every error wrapping
// it. The ledger's sentinels (ledger.ErrNoLedger and the others) are made so.
func (c Code) Err(msg string) error { return &codedError{code: c, msg: msg} }

// codedError is a sentinel error of a code (Code.Err).
type codedError struct {
	code Code
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// Is lets errors.Is(err, e.code) match.
func (e *codedError) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.code
}

// CodeOf returns the code of err ("" when err carries none).
func CodeOf(err error) Code {
	var be *BudgetError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &be):
		return be.Code()
	case errors.Is(err, ErrBudget):
		return CodeBudgetExceeded
	case errors.Is(err, ErrNeighbours):
		return CodeNeighbours
	}
	// The ledger's sentinels (Code.Err), in this order of precedence.
	for _, c := range []Code{CodeUnknownScope, CodeNoLedger, CodeChainBroken, CodeWriteConflict} {
		if errors.Is(err, c) {
			return c
		}
	}
	return ""
}

// Code returns CodeFileCapExceeded for a refusal by the file's cap,
// CodeBudgetExceeded otherwise.
func (e *BudgetError) Code() Code {
	if e.Scope == FileScope {
		return CodeFileCapExceeded
	}
	return CodeBudgetExceeded
}

// Is lets errors.Is(err, CodeBudgetExceeded) (or CodeFileCapExceeded) match.
func (e *BudgetError) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code()
}
