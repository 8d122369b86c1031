// Package ledger stores every spend of privacy budget in the protected
// database file itself, as a hash-chained, append-only table, and charges a
// spend only when package accountant decides that it fits its scope's
// budget, in a transaction committed before the release can be seen (see
// design.md, "Charge before release").
//
//   - schema.go: the tables (dp_ledger, and dp_budget and dp_scope_state
//     derived from it) and [Init]; migrate.go: the upgrade of a version-0 file;
//   - registry.go: one ledger connection per file and process ([OpenLedger]);
//   - charge.go: [Ledger.Charge], which checks a scope's budget, appends the
//     ledger row and writes the release in one IMMEDIATE transaction that
//     commits before the release can be seen; [Ledger.Decide] and
//     [Ledger.Commit] keep the decision off the write lock;
//   - state.go: what the chain says, computed by this process and kept in
//     memory keyed by the chain's head: a charge trusts nothing else;
//   - chain.go: the hash chain over dp_ledger ([Row], [Head]); events.go:
//     records, events that spend nothing ([Ledger.Append]); verify.go:
//     [Verify], which also recomputes what the file's tables say;
//   - status.go: dp_budget_status ([ReadStatus]); view.go: [Ledger.View].
package ledger
