package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Joins with a public table through its index. The scan bound of
// boundJoinWork charges each protected row a comparison with every public
// row, which refuses public tables of more than a few hundred rows at the
// default max_length. When one ON equality compares a protected column with
// a public column of the same affinity and collation (so that SQLite
// converts neither side, and the public column's GROUP BY counts exactly the
// rows one protected value can match) and the public table has an index
// whose first column is that column, under that collation, the join is
// written with INDEXED BY that index: each protected row then costs a seek
// (about log2(rows) + 16 comparisons, each bounded by the two values'
// lengths) and a step through the public rows equal on the indexed column
// (their largest multiplicity, read from the public table, plus one), each
// checked against the whole ON condition and read by a rowid seek, then the
// statement's per-row work for each joined row. The public table's size,
// its multiplicities and its index are public; the plan is checked before
// the charge (EXPLAIN QUERY PLAN must show the seek on that index).

// onAlike reports, per ON equality of a join with a public table, whether
// its two columns have the same affinity and collation.
func (pl *plan) onAlike(ctx context.Context, conn *sql.Conn) ([]bool, error) {
	jp := pl.join
	alike := make([]bool, len(jp.on))
	for i, p := range jp.on {
		fp, _, err := unitForm(ctx, conn, pl.table, p[0])
		if err != nil {
			return nil, err
		}
		fq, _, err := unitForm(ctx, conn, jp.pub.name, p[1])
		if err != nil {
			return nil, err
		}
		alike[i] = fp == fq
	}
	return alike, nil
}

// indexedJoinWork returns the per-row work of the join through the
// cheapest usable index of the public table (+Inf when there is none, or
// SQLite would not seek it), and sets the plan's index when it fits
// MaxRowWork. lens are the public ON columns' longest values, perJoined the
// work of one joined row (its per-row work and the columns it carries).
func (pl *plan) indexedJoinWork(ctx context.Context, conn *sql.Conn, alike []bool, lens []any,
	passes, perJoined float64) (float64, error) {
	jp := pl.join
	best, bestIdx := math.Inf(1), ""
	seekCmp := math.Ceil(math.Log2(float64(jp.pub.rows)+1)) + 16
	t := dpselect.QuoteIdent(jp.pub.name)
	for i, p := range jp.on {
		if !alike[i] {
			continue
		}
		f, _, err := unitForm(ctx, conn, jp.pub.name, p[1])
		if err != nil {
			return 0, err
		}
		idx, err := unitIndex(ctx, conn, jp.pub.name, p[1], f.Collation)
		if err != nil || idx == "" {
			return math.Inf(1), err
		}
		var m sql.NullInt64
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT max(c) FROM (SELECT count(*) AS c FROM main.%s GROUP BY %s)",
			t, dpselect.QuoteIdent(p[1]))).Scan(&m); err != nil {
			return 0, fmt.Errorf("reading the multiplicity of %s.%s: %w", jp.pub.name, p[1], err)
		}
		cmp := float64(asInt(lens[i])) + float64(pl.policy.maxLength(p[0])) + numberBytes
		lookup := passes * (seekCmp*cmp + float64(max(m.Int64, 1)+1)*(jp.onWork+seekCmp*numberBytes))
		if w := lookup + float64(jp.mult)*perJoined; w < best {
			best, bestIdx = w, idx
		}
	}
	if best > MaxRowWork {
		return best, nil
	}
	jp.index = bestIdx
	if err := checkJoinPlan(ctx, conn, "SELECT 1 FROM "+pl.joinedRows(), seekPublic); err != nil {
		jp.index = ""
		return math.Inf(1), nil
	}
	return best, nil
}
