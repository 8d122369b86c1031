package sqlfuncs_test

import (
	"database/sql"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release/optnoise"
	"github.com/dpsql/dpsql/sqlfuncs"
)

func openPath(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// optWeightsOf reads the weights the last optnoise ledger row used.
func optWeightsOf(t *testing.T, db *sql.DB) (mechanism.Mechanism, []uint64) {
	t.Helper()
	var params string
	if err := db.QueryRow(`SELECT params FROM dp_ledger WHERE mechanism = 'optnoise' ORDER BY id DESC LIMIT 1`).Scan(&params); err != nil {
		t.Fatal(err)
	}
	m, err := mechanism.Parse([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.GridWeights()
	if err != nil {
		t.Fatal(err)
	}
	return m, w
}

func TestOptNoiseSQL(t *testing.T) {
	db := openDB(t, `SELECT dp_init_epsilon(100, 0.5)`)
	const eps, delta = 2.0, 0.1
	var y float64
	if err := db.QueryRow(`SELECT dp_optnoise(10, 3, ?, ?)`, eps, delta).Scan(&y); err != nil {
		t.Fatal(err)
	}
	m, w := optWeightsOf(t, db)
	if _, err := optnoise.Verify(w, m.Shifts, eps, delta); err != nil {
		t.Errorf("ledger weights do not verify: %v", err)
	}
	if !(m.Sensitivity >= 3) || m.Sensitivity > 3*(1+1e-5) {
		t.Errorf("scale %v for sensitivity 3", m.Sensitivity)
	}
	// The file now caches the distribution under the same SHA-256.
	var sha string
	var n int
	if err := db.QueryRow(`SELECT sha256, count(*) FROM dp_optnoise_cache`).Scan(&sha, &n); err != nil || n != 1 || sha != m.WeightsSHA256 {
		t.Errorf("cache: %d rows, sha %s vs ledger %s, %v", n, sha, m.WeightsSHA256, err)
	}
	// Three more draws stay inside the scaled support and differ (the
	// sampler's law is tested in release; each charge composes a PLD).
	p, _ := optnoise.Default(eps, delta, optnoise.L1)
	seen := map[float64]bool{}
	for range 3 { // more would exceed delta 0.5 at delta 0.1 each
		if err := db.QueryRow(`SELECT dp_optnoise(10, 3, ?, ?, 'l1')`, eps, delta).Scan(&y); err != nil {
			t.Fatal(err)
		}
		if lim := m.Sensitivity * float64(p.Half) / float64(p.PerUnit); math.Abs(y-10) > lim {
			t.Errorf("noise %v outside the support ±%v", y-10, lim)
		}
		seen[y] = true
	}
	if len(seen) < 3 {
		t.Errorf("only %d distinct values in 3 draws", len(seen))
	}
	// The rigorous epsilon of one release at delta is about epsilon.
	db2 := openDB(t, `SELECT dp_init_epsilon(2.2, 0.1)`)
	if err := db2.QueryRow(`SELECT dp_optnoise(0, 1, ?, ?)`, eps, delta).Scan(&y); err != nil {
		t.Fatal(err)
	}
	var e float64
	if err := db2.QueryRow(`SELECT dp_epsilon(0.1)`).Scan(&e); err != nil || e > eps*1.01 || e < eps*0.5 {
		t.Errorf("dp_epsilon(0.1) after one (2, 0.1) optnoise = %v, %v", e, err)
	}
}

// TestOptNoiseForgedCache is the attack of an adversary who owns a copy of
// the file and rewrites the cached distribution to a weaker one (a point
// mass, no privacy): dp_optnoise must not use it.
func TestOptNoiseForgedCache(t *testing.T) {
	const eps, delta = 1.5, 0.2
	path := t.TempDir() + "/f.db"
	forge := func() {
		db := openPath(t, path)
		defer db.Close()
		var y float64
		if _, err := db.Exec(`SELECT dp_init_epsilon(100, 0.5)`); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT dp_optnoise(0, 1, ?, ?)`, eps, delta).Scan(&y); err != nil {
			t.Fatal(err)
		}
		// Point mass (no privacy at all): 2^63 - 1 in the middle interval, 1 beside it.
		var n int
		db.QueryRow(`SELECT half FROM dp_optnoise_cache`).Scan(&n)
		w := make([]byte, 16*n)
		binary.LittleEndian.PutUint64(w[8*n:], 1<<63-1)
		binary.LittleEndian.PutUint64(w[8*n+8:], 1)
		if _, err := db.Exec(`UPDATE dp_optnoise_cache SET weights = ?`, w); err != nil {
			t.Fatal(err)
		}
	}
	forge()
	// A fresh process state: forget what this process verified.
	sqlfuncs.ResetOptMemo()
	db := openPath(t, path)
	defer db.Close()
	var y float64
	if err := db.QueryRow(`SELECT dp_optnoise(0, 1, ?, ?)`, eps, delta).Scan(&y); err != nil {
		t.Fatal(err)
	}
	m, w := optWeightsOf(t, db)
	if _, err := optnoise.Verify(w, m.Shifts, eps, delta); err != nil {
		t.Errorf("the forged distribution was used: %v", err)
	}
	var blob []byte
	db.QueryRow(`SELECT weights FROM dp_optnoise_cache`).Scan(&blob)
	if binary.LittleEndian.Uint64(blob[8*(len(w)/2):]) == 1<<63-1 {
		t.Errorf("the forged cache row was kept")
	}
}

func TestOptNoiseBadInput(t *testing.T) {
	db := openDB(t, `SELECT dp_init_epsilon(100, 1e-5)`)
	for _, c := range []struct{ q, want string }{
		{`SELECT dp_optnoise(1, 1, 1)`, "dp_optnoise: takes (x, sensitivity, epsilon, delta [, loss])"},
		{`SELECT dp_optnoise(1, 0, 1, 0.1)`, "dp_optnoise: sensitivity must be > 0"},
		{`SELECT dp_optnoise(1, 1, 0, 0.1)`, "dp_optnoise: epsilon must be > 0"},
		{`SELECT dp_optnoise(1, 1, 9, 0.1)`, "epsilon must lie in (0, 8]"},
		{`SELECT dp_optnoise(1, 1, 1, 0)`, "dp_optnoise: delta must lie strictly between 0 and 1"},
		{`SELECT dp_optnoise(1, 1, 1, 1)`, "dp_optnoise: delta must lie strictly between 0 and 1"},
		{`SELECT dp_optnoise(1, 1, 1, 0.1, 'l3')`, "unknown loss \"l3\""},
		{`SELECT dp_optnoise(1, 1, 0.01, 1e-10)`, "limit 1000"},
		{`SELECT dp_optnoise(1e309, 1, 1, 0.1)`, "dp_optnoise: x must be finite"},
		{`SELECT dp_optnoise(1, 1, 1, 0.1, 3)`, "dp_optnoise: loss must be TEXT"},
	} {
		var v any
		err := db.QueryRow(c.q).Scan(&v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.q, err, c.want)
		}
	}
	if got := ledgerRows(t, db); got != 0 {
		t.Errorf("bad input charged %d rows", got)
	}
}
