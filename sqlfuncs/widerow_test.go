package sqlfuncs_test

import (
	"strings"
	"testing"
)

// A single wide row must not make dp_avgmix reserve room for 4096 such rows
// up front: a row of 8 MB asked for 32 GB, more than the machine, and Go
// aborts the whole process on that (fatal "out of memory", no recover). The
// call must instead reach its ordinary refusal (here: over budget).
func TestAvgmixWideFirstRowNoCrash(t *testing.T) {
	db := openDB(t, `SELECT dp_init(1)`)
	var s string
	err := db.QueryRow(`SELECT dp_avgmix(zeroblob(8388608), 0, json_object('n', 300, 'classes', 3, 'into', 'out', 'mu', 5.0))`).Scan(&s)
	if err == nil || !strings.Contains(err.Error(), "privacy budget exceeded") {
		t.Fatalf("got %q, %v; want the over-budget refusal", s, err)
	}
}
