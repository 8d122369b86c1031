//go:build purego

package release

// pureGo is set by the purego build tag, under which crypto/aes uses its
// software (table-based, not constant-time) implementation.
const pureGo = true
