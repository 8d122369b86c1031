// Package mechanism describes what a release spends: the mechanism (a typed
// value recorded, as JSON, in every ledger row and re-accounted from it by
// every later process), the typed records of each release's parameters
// beside it, and the quote that a release plans and the accountant charges.
//
// It is a leaf: it imports nothing of dpsql, so that the mechanisms (package
// release) describe their releases without importing the accountant, and
// the accountant prices exactly what they describe. The meaning of every
// field, per kind, is in docs/ledger.md ("Params
// records"); why a release states add/remove or replace-one neighbours is in
// docs/privacy-model.md, paragraph "One neighbour relation per scope".
package mechanism
