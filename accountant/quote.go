package accountant

import (
	"github.com/dpsql/dpsql/mechanism"
)

// Price is the rigorous accountant as a [mechanism.Pricer]: the epsilon at
// delta of m alone ([RigorousEpsilon]; exact GDP conversion for Gaussian
// and external entries). Its distributions are memoised, so the budget
// decision of a charge of m to an empty scope reads the same one.
func Price(m Mechanism, delta float64) (float64, error) {
	return RigorousEpsilon([]Mechanism{m}, delta)
}

var _ mechanism.Pricer = Price

// QuoteCharge returns the charge of exactly the quote q to scope.
// [Ledger.Charge] refuses a quote priced at another delta than the scope's,
// records the quote's mechanism and record (params record, noise_tv, quoted
// figures) and decides the budget on the mechanism itself, composed with the
// scope's entries: the quoted epsilon is recorded, never trusted.
func QuoteCharge(scope string, q mechanism.Quote, query string) Charge {
	return Charge{Scope: scope, Quote: &q, Query: query}
}
