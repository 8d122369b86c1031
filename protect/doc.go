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
//	cost.go     the per-row work bound: literal caps, max_length guards, refusal above MaxRowWork
//	keys.go     canonical group keys, fixed by the column's declared type and collation
//	rewrite.go  the plan as SQLite SQL: per-person bounding, clamped fixed-point values, per-group figures
//	engine.go   Engine.Query: runs the SQL under an authorizer on a connection of its own, charges once, adds the noise
//	charge.go   accept, charge, then read: the charge commits before the read, and a stopped statement keeps it
//	analyst.go  AnalystConn, the analyst's driver connection, and the authorizer that refuses everything else
//	analystscope.go  an analyst connection's TEMP copies of its own scope's ledger rows
//	sqlfunc.go  dp_protect and dp_unprotect for the owner's connections
//	external.go the plan, per-row SQL and noise exported for engines outside SQLite (dpsql-beam aggregate)
//
// The privacy argument, the accepted SQL, the refusal list and the threat
// model (timing included) are written once, in docs/protected-mode.md.
package protect
