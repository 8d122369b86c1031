// Package serve is dpsql's analyst service: an HTTP front door to one
// database file in protected mode, for analysts who never hold the file.
//
// The data owner runs the service (`dpsql serve DB`) and creates accounts
// (`dpsql analyst add DB NAME --scope SCOPE`); each account holds one bearer
// token and is bound to exactly one budget scope, which the analyst cannot
// choose. Accounts are records in the ledger's hash chain (kind "account"),
// so the service trusts only what the chain shows: the table dp_account is a
// convenience copy that the service never reads for authentication.
//
// The pieces, one file each:
//
//	accounts.go   tokens, their salted hashes, AddAccount, RevokeAccount, ListAccounts
//	book.go       the chain-verified set of active accounts the service authenticates against
//	statement.go  what /v1/query accepts: one SELECT, no dpsql objects outside DP statements
//	server.go     Server and its Config: routes, limits, timeouts
//	api.go        the JSON API (POST /v1/query, GET /v1/budget, GET /v1/ledger) and its error codes
//	client.go     a Go client of the API (used by `dpsql query --remote` and `dpsql shell --remote`)
//	web.go        the analysts' web page at /, embedded from web/index.html
//
// The API, the threat model and the owner's setup are written once, in
// docs/service.md.
package serve
