// Package accountant prices, checks and records every spend of privacy budget
// that dpsql makes.
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
// The ledger lives in the protected database file itself:
//   - schema.go: the tables (dp_ledger, and dp_budget and dp_scope_state
//     derived from it) and [Init]; migrate.go: the upgrade of a version-0 file;
//   - registry.go: one ledger connection per file and process ([OpenLedger]);
//   - charge.go: [Ledger.Charge], which checks a scope's budget, appends the
//     ledger row and writes the release in one IMMEDIATE transaction that
//     commits before the release can be seen;
//   - decision.go: the budget decision, a pure function of a scope's budget
//     and its entries;
//   - state.go: what the chain says, computed by this process and kept in
//     memory keyed by the chain's head: a charge trusts nothing else;
//   - chain.go: the hash chain over dp_ledger ([Row], [Head]); verify.go:
//     [Verify], which also recomputes what the file's tables say;
//   - status.go: dp_budget_status ([ReadStatus]).
package accountant
