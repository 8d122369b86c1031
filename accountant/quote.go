package accountant

import (
	"github.com/dpsql/dpsql/mechanism"
)

// Price is the rigorous accountant as a [mechanism.Pricer]: the epsilon at
// delta of m alone ([RigorousEpsilon]; exact GDP conversion for Gaussian
// and external entries). Its distributions are memoised, so the budget
// decision of a charge of m to an empty scope reads the same one.
func Price(m mechanism.Mechanism, delta float64) (float64, error) {
	return RigorousEpsilon([]mechanism.Mechanism{m}, delta)
}

var _ mechanism.Pricer = Price
