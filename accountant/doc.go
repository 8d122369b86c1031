// Package accountant prices every spend of privacy budget that dpsql makes
// and decides whether it fits a scope's budget. It is pure computation: it
// reads no database (package ledger stores the budgets and the spends, and
// calls it to decide).
//
// Budgets and figures are stated in Gaussian differential privacy (Dong, Roth,
// Su, "Gaussian Differential Privacy", arXiv:1905.02383): a mechanism is
// mu-GDP when telling two neighbouring databases apart from its output is no
// easier than telling N(0, 1) from N(mu, 1). Gaussian entries compose exactly
// (mu = sqrt(sum mu_i^2)) and convert exactly to (epsilon, delta) with [Delta]
// and [Epsilon]. Entries that are not exactly GDP (Poisson-subsampled Gaussian,
// Laplace) are composed by the privacy loss distribution (PLD) accountant of
// package pld, whose every epsilon and delta is an upper bound ([Composition],
// [RigorousEpsilon]); once a scope holds such an entry every budget decision
// uses that figure.
//
//   - gdp.go: the GDP conversions; rigorous.go, composition.go: the PLD
//     accountant and [Composition], extended one entry at a time;
//   - decision.go: [Decide], whether one more entry fits a [Budget] given what
//     the scope's entries so far add up to ([Spend]), and the certified epsilon
//     that pays the samplers' total-variation bound from delta;
//   - neighbours.go: [InScope], an entry converted to its scope's neighbour
//     relation; noise_kinds.go: the noise families' PLDs;
//   - budget.go: [Budget] and the refusal [BudgetError]; codes.go: [Code], why a
//     charge was refused or the ledger failed, for programs.
package accountant
