package sqlfuncs

import "fmt"

// releaseSteps is one release aggregate (dp_avgmix, dp_select_topm) as the
// shared skeleton runs it, in this order:
//
//  1. read: every row is buffered in rows (vectorRows checks shapes, NULLs
//     and NaN/Inf as it goes). dp_avgmix's rows arrive through its aggregate
//     step before the skeleton runs; dp_select_topm reads its table itself.
//  2. check: a row error, an interrupted statement or no rows at all stop
//     here, before anything is priced, drawn or charged.
//  3. plan: the options, the budget and the calibration, from public inputs
//     and the rows' public shape; no noise yet. It returns the charge step.
//  4. charge and write: Ledger.Charge commits the charge and the release
//     table in one transaction, then the summary is built.
//
// The buffered rows are freed when the skeleton returns.
type releaseSteps struct {
	fn    string
	rows  *vectorRows
	read  func() error // nil when the rows came through an aggregate step
	empty string       // the error when there are no rows
	plan  func() (charge func() (string, error), err error)
}

// runRelease runs a release aggregate's steps (see releaseSteps).
func (c *Conn) runRelease(s releaseSteps) (out string, err error) {
	defer guard(s.fn, &err)
	defer s.rows.free()
	if s.read != nil {
		if err := s.read(); err != nil {
			return "", err
		}
	}
	if err := s.rows.finish(c); err != nil {
		return "", err
	}
	if s.rows.N == 0 {
		return "", fmt.Errorf("%s: %s", s.fn, s.empty)
	}
	charge, err := s.plan()
	if err != nil {
		return "", err
	}
	return charge()
}
