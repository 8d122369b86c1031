// Package tally counts costly steps that tests of other packages check were
// skipped or taken (a memo hit, a recomputation), without making the counts
// part of any package's API.
package tally

import "sync/atomic"

// CertifiedSearches counts the certified-epsilon root searches the
// accountant ran (package accountant's certifiedEpsilon).
var CertifiedSearches atomic.Int64
