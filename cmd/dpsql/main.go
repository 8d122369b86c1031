// Command dpsql manages differential privacy inside SQLite database files:
// budgets (init, budget), noisy queries (query, shell), the audit ledger
// (audit, audit verify), data import (import), releases out to NumPy, CSV and
// JSON (export), protected mode (protect, unprotect), the analyst service and
// its accounts (serve, analyst) and a guided tour (demo).
//
// Run "dpsql help" for the commands; root.go documents the configuration.
package main

import (
	"context"
	"os"
)

func main() {
	m := NewMain()
	m.HandleSignals = true
	os.Exit(m.Exec(context.Background(), os.Args[1:]))
}
