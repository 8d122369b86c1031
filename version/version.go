// Package version holds dpsql's version, the one figure that dp_version(),
// `dpsql --version` and the shell's banner report.
package version

// Version is dpsql's version (semantic versioning).
const Version = "0.1.0"
