//go:build dpsql_testseed

package sqlfuncs_test

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Built only with -tags dpsql_testseed (CI runs it): the seed option makes a
// release reproducible.
func TestSelectTopmSeed(t *testing.T) {
	db := openDB(t, `SELECT dp_init(50, 1e-5, 'default', 'replace_one')`)
	topmTable(t, db, 300, 50, 2)
	q := `SELECT dp_select_topm('t', json_object('features', 'f', 'label', 'y', 'into', ?, 'm', 5, 'mu_select', 0.3, 'mu_release', 1, 'c', 1, 'classes', 2, 'labels', 'public', 'seed', 7))`
	var a, b string
	if err := db.QueryRow(q, "a").Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(q, "b").Scan(&b); err != nil {
		t.Fatal(err)
	}
	var sa, sb topmSummary
	json.Unmarshal([]byte(a), &sa)
	json.Unmarshal([]byte(b), &sb)
	if fmt.Sprint(sa.Indices) != fmt.Sprint(sb.Indices) {
		t.Errorf("same seed, different selections %v %v", sa.Indices, sb.Indices)
	}
	var diff int
	if err := db.QueryRow(`SELECT count(*) FROM a JOIN b USING (id) WHERE a.x IS NOT b.x`).Scan(&diff); err != nil || diff != 0 {
		t.Errorf("same seed, %d released rows differ (%v)", diff, err)
	}
}

// seedIfEnabled is how "seed" ends a list of known options in a test build,
// where it works.
const seedIfEnabled = ", seed"
