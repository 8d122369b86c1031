package sqlfuncs

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
	_ "github.com/mattn/go-sqlite3"
)

// A release whose write fails part way (here the file reaches its page
// limit) reports the failure once, naming dp_avgmix once and the row it
// could not write: it used to say "dp_avgmix: dp_avgmix: writing row ...".
func TestWriteAvgmixFailureNamesTheFunctionOnce(t *testing.T) {
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "full.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// Room for the table and a few dozen 1 KB rows, not for 400.
	if _, err := db.Exec(`PRAGMA max_page_count = 12`); err != nil {
		t.Fatal(err)
	}
	const n, d, k = 400, 256, 2
	x := make([]float32, n*d)
	y := make([]float32, n*k)
	for i := range n {
		x[i*d+i%d] = 1
		y[i*k+i%k] = 1
	}
	plan, err := avgmix.NewPlan(release.NewNoise(), n, d, k, avgmix.Params{T: n, M: 10, Mu: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	err = writeAvgmix("dp_avgmix", tx, "rel", release.NewNoise(), avgmix.Data{X: x, D: d, Y: y, K: k, N: n}, plan, false, nil)
	if err == nil {
		t.Fatal("the release was written past the file's page limit")
	}
	msg := named("dp_avgmix", err).Error()
	if strings.Count(msg, "dp_avgmix") != 1 || !strings.Contains(msg, "dp_avgmix: writing row ") || !strings.Contains(msg, "full") {
		t.Errorf("error %q: want dp_avgmix named once, the row it could not write and why", msg)
	}
}
