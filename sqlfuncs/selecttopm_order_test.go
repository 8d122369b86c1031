package sqlfuncs_test

import (
	"database/sql"
	"math/rand/v2"
	"testing"

	"github.com/dpsql/dpsql/vector"
)

// orderAttack is an adversary who sees only a release's output order, its
// source rowids and its randomized-response labels. It assumes the rows came
// out sorted by true label, as a walk of an index on (label, rowid) yields
// them, and guesses every row's true label from its side of the cut between
// class 0 and class 1: where the source rowids fall back (the second class
// starts again from small rowids), or, without such a drop, where the cut
// best agrees with the noisy labels. It returns the share of rows whose true
// label it recovered. released[i] is the label of the i-th output row, srcs[i]
// its source rowid, truth[i] its source row's true label.
func orderAttack(released []int, srcs []int64, truth []int) float64 {
	n := len(released)
	for i := 1; i < n; i++ {
		if srcs[i] < srcs[i-1] {
			return guessByCut(i, truth)
		}
	}
	// The cut that agrees best with the noisy labels.
	ones := 0
	for _, l := range released {
		ones += l
	}
	best, cut := -1, 0
	zerosBefore, onesBefore := 0, 0
	for c := 0; c <= n; c++ {
		if a := zerosBefore + (ones - onesBefore); a > best {
			best, cut = a, c
		}
		if c < n {
			if released[c] == 0 {
				zerosBefore++
			} else {
				onesBefore++
			}
		}
	}
	return guessByCut(cut, truth)
}

// guessByCut is the share of truth equal to 0 before cut and 1 from cut.
func guessByCut(cut int, truth []int) float64 {
	right := 0
	for i, y := range truth {
		guess := 0
		if i >= cut {
			guess = 1
		}
		if guess == y {
			right++
		}
	}
	return float64(right) / float64(len(truth))
}

// An index on the label must leave no trace in the output order. Before, an
// aggregate over "FROM t WHERE y >= 0" walked the label index, the release's
// ids followed the true labels, and orderAttack recovered 400 of 400 labels
// that had gone through randomized response at eps_labels = 0.1. Now
// dp_select_topm reads the whole table in rowid order: the attack is at
// chance, no better than reading the noisy labels themselves.
func TestSelectTopmOrderRevealsNoLabels(t *testing.T) {
	const n, d = 400, 8
	db := openDB(t, `SELECT dp_init(50, 1e-5, 'default', 'replace_one')`)
	if _, err := db.Exec(`CREATE TABLE t(f BLOB, y INTEGER)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	truthByRowid := map[int64]int{}
	for i := 0; i < n; i++ {
		y := rng.IntN(2) // labels independent of the rowid
		x := make([]float32, d)
		for j := range x {
			x[j] = float32(rng.NormFloat64() * 0.1)
		}
		res, err := db.Exec(`INSERT INTO t(f, y) VALUES (?, ?)`, vector.Encode(x), y)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		truthByRowid[id] = y
	}
	// The adversary's preparation: an index on the label, and a temporary
	// table of the same name sorted by label that would shadow t.
	for _, q := range []string{
		`CREATE INDEX t_y ON t(y)`,
		`CREATE INDEX t_yf ON t(y, f)`,
		`ANALYZE`,
		`CREATE TEMP TABLE t AS SELECT * FROM main.t ORDER BY y`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var out string
	if err := db.QueryRow(`SELECT dp_select_topm('t', json_object('features', 'f', 'label', 'y', 'into', 'rel', 'm', 2, 'mu_select', 0.5, 'mu_release', 1, 'c', 1, 'classes', 2, 'eps_labels', 0.1))`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	released, truth, srcs := readRelease(t, db, truthByRowid)
	if len(released) != n {
		t.Fatalf("released %d rows, want %d", len(released), n)
	}
	for i := 1; i < len(srcs); i++ {
		if srcs[i] <= srcs[i-1] {
			t.Fatalf("output not in source_rowid order at id %d: %d after %d", i+1, srcs[i], srcs[i-1])
		}
	}
	// Chance: 1/2; the max over cuts of a random sequence adds a few percent
	// (about 0.03 at n = 400). The noisy labels alone give 0.525.
	acc := orderAttack(released, srcs, truth)
	t.Logf("order attack on the release: %.3f of the true labels", acc)
	if acc > 0.62 {
		t.Errorf("the order attack recovered %.3f of the true labels; want chance (about 0.5)", acc)
	}
	// The attack has power: on the same release put in true-label order (the
	// order the old aggregate wrote when SQLite walked the label index), it
	// recovers every label.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sortByTruth(order, truth)
	var rel2, tr2 []int
	var src2 []int64
	for _, i := range order {
		rel2, tr2, src2 = append(rel2, released[i]), append(tr2, truth[i]), append(src2, srcs[i])
	}
	if acc := orderAttack(rel2, src2, tr2); acc < 0.95 {
		t.Errorf("control: the attack recovered only %.3f of the labels from a label-ordered output", acc)
	}
}

// readRelease returns the released labels in id order, the true labels of
// their source rows, and the source rowids.
func readRelease(t *testing.T, db *sql.DB, truthByRowid map[int64]int) (released, truth []int, srcs []int64) {
	t.Helper()
	rows, err := db.Query(`SELECT source_rowid, label FROM rel ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var src int64
		var lab int
		if err := rows.Scan(&src, &lab); err != nil {
			t.Fatal(err)
		}
		y, ok := truthByRowid[src]
		if !ok {
			t.Fatalf("source_rowid %d is not a row of t", src)
		}
		released, truth, srcs = append(released, lab), append(truth, y), append(srcs, src)
	}
	return released, truth, srcs
}

// sortByTruth orders idx by truth[idx], stably.
func sortByTruth(idx, truth []int) {
	var zeros, ones []int
	for _, i := range idx {
		if truth[i] == 0 {
			zeros = append(zeros, i)
		} else {
			ones = append(ones, i)
		}
	}
	copy(idx, append(zeros, ones...))
}
