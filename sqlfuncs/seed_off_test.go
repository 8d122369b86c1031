//go:build !dpsql_testseed

package sqlfuncs_test

import (
	"strings"
	"testing"
)

// In a normal build the seed option is refused and charges nothing.
func TestSeedRefused(t *testing.T) {
	db := openDB(t, `SELECT dp_init(50)`)
	topmTable(t, db, 300, 50, 2)
	for _, q := range []string{
		`SELECT dp_select_topm('t', json_object('features', 'f', 'label', 'y', 'into', 'a', 'm', 5, 'mu_select', 0.3, 'mu_release', 1, 'c', 1, 'classes', 2, 'labels', 'public', 'seed', 7))`,
		`SELECT dp_avgmix(f, y, json_object('n', 300, 'classes', 2, 'into', 'b', 'mu', 1, 'seed', 7)) FROM t`,
	} {
		var s string
		err := db.QueryRow(q).Scan(&s)
		if err == nil || !strings.Contains(err.Error(), "test hook") {
			t.Errorf("%s: err = %v, want the test-hook refusal", q, err)
		}
	}
	if n := ledgerRows(t, db); n != 0 {
		t.Errorf("a refused seed charged %d rows", n)
	}
}

// seedIfEnabled is how "seed" ends a list of known options: not at all in a
// normal build.
const seedIfEnabled = ""
