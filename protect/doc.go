// Package protect is dpsql's protected mode: the data owner records a policy
// per table (privacy unit, contribution limits, public bounds, public key
// tables), and an analyst connection reaches protected tables only through
// SELECT WITH DIFFERENTIAL_PRIVACY statements in BigQuery's syntax.
//
// The pieces, one file each:
//
//	policy.go   the Policy, Protect and Unprotect
//	records.go  policy changes as ledger records (kind 'policy'), replayed by LoadPolicies and VerifyPolicies; dp_policy derived; old files' dp_policy_log carried over
//	check.go    the checker: a parsed statement (package dpselect) against a policy, giving a plan (parts, sigmas, threshold)
//	rewrite.go  the plan as SQLite SQL: per-person bounding, clamped fixed-point values, per-group figures
//	engine.go   Engine.Query: runs the SQL under an authorizer on a connection of its own, charges once, adds the noise
//	analyst.go  AnalystConn, the analyst's driver connection, and the authorizer that refuses everything else
//	sqlfunc.go  dp_protect and dp_unprotect for the owner's connections
//	external.go the plan, per-row SQL and noise exported for engines outside SQLite (dpsql-beam aggregate)
//
// The privacy argument, the accepted SQL and the refusal list are written
// once, in docs/protected-mode.md.
package protect
