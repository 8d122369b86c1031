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

// QuoteCharge returns the charge of exactly the quote q to scope: its
// mechanism, and its record (params record, noise_tv, quoted figures) as
// the row's details. [Ledger.Charge] decides the budget on the mechanism
// itself, composed with the scope's entries; the quoted epsilon is recorded,
// never trusted.
func QuoteCharge(scope string, q mechanism.Quote, query string) (Charge, error) {
	rec, err := q.Record()
	if err != nil {
		return Charge{}, err
	}
	return Charge{Scope: scope, Mechanism: q.Mechanism, Details: rec, Query: query}, nil
}
