package accountant

import "errors"

// Code names why the ledger refused or failed, for programs: it is the same
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
	// CodeUnknownScope: no such budget scope (ErrUnknownScope).
	CodeUnknownScope Code = "unknown_scope"
	// CodeNoLedger: the file has no ledger (ErrNoLedger).
	CodeNoLedger Code = "no_ledger"
	// CodeChainBroken: the ledger's hash chain does not verify (ErrChainBroken).
	CodeChainBroken Code = "chain_broken"
	// CodeWriteConflict: the ledger could not be locked (ErrWriteConflict).
	CodeWriteConflict Code = "write_conflict"
)

// Error returns the code itself, so that a Code can be the target of
// errors.Is.
func (c Code) Error() string { return string(c) }

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
	case errors.Is(err, ErrUnknownScope):
		return CodeUnknownScope
	case errors.Is(err, ErrNoLedger):
		return CodeNoLedger
	case errors.Is(err, ErrChainBroken):
		return CodeChainBroken
	case errors.Is(err, ErrWriteConflict):
		return CodeWriteConflict
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
