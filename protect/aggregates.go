package protect

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Distinct counts and quantiles (issue 25).
//
// COUNT(DISTINCT unit), unit the policy's privacy unit, is the group's count
// of persons: a person is in at most max_groups groups and counts once in
// each, so its sensitivity is 1 per group (L1 max_groups, L2
// sqrt(max_groups)), whatever max_rows. Under a partition selection it is
// the selection's noisy count of persons itself (drawn once, paid once);
// otherwise a value of its own (or COUNT(*)'s when each person holds at most
// one row of a group).
//
// COUNT(DISTINCT col) of any other column counts the distinct non-NULL values
// among the group's rows after per-person bounding: each person keeps at most
// max_rows rows in each of at most max_groups groups, chosen at random from
// their own rows alone. Removing a person removes from a group's set of
// distinct values only the values no one else holds among the kept rows,
// at most their max_rows kept rows' values; adding one adds at most as many.
// Its sensitivity is therefore max_rows per group, like COUNT(*)'s. It is
// read by a query of its own (rewriteDistinct) with its own bounding, as
// MEDIAN's histogram is.
//
// PERCENTILE_CONT(col, p) and APPROX_QUANTILES(col, k) are read off the same
// noisy histogram as MEDIAN (MedianBuckets equal buckets between the bounds,
// each person adding at most max_rows values to at most max_groups groups'
// histograms): p is a literal in [0, 1], and the quantile is where the noisy
// cumulative count (negative counts as 0) reaches p of the total,
// interpolated within its bucket; APPROX_QUANTILES gives the k+1 quantiles at
// 0, 1/k, ..., 1 as a JSON array. MEDIAN, PERCENTILE_CONT and
// APPROX_QUANTILES of one column with the same bounds read one histogram,
// drawn and charged once: every quantile is a post-processing of it, so p =
// 0 or 1 (the noisy minimum or maximum) reveals nothing more than the
// histogram.

// MaxQuantiles is the largest k of APPROX_QUANTILES(col, k): the histogram
// has MedianBuckets buckets, so more quantiles than that would only
// interpolate within buckets, and the output (k+1 numbers per released group,
// whose number grows with the table) stays about the histogram's own size
// whatever an analyst asks for.
const MaxQuantiles = MedianBuckets

// histogramKind reports whether aggregate kind is read off a noisy
// histogram.
func histogramKind(kind string) bool {
	return kind == dpselect.Median || kind == dpselect.Percentile || kind == dpselect.Quantiles
}

// ownQuery reports whether the aggregate is read by a query of its own (a
// histogram, or a distinct count of a column other than the unit).
func (a aggPlan) ownQuery() bool {
	return histogramKind(a.kind) || a.distinct && !a.persons
}

// mainFigure reports whether the main statement's SQL computes a figure for
// the aggregate (a histogram, a distinct count or the count of persons are
// read elsewhere).
func (a aggPlan) mainFigure() bool { return !histogramKind(a.kind) && !a.distinct }

// boundsArgName is the named argument that gives aggregate kind its bounds.
func boundsArgName(kind string) string {
	if kind == dpselect.Percentile || kind == dpselect.Quantiles {
		return "contribution_bounds_per_row"
	}
	return "contribution_bounds_per_group"
}

// quantile returns the p of a histogram aggregate's i-th output quantile
// (MEDIAN 0.5, PERCENTILE_CONT its p, APPROX_QUANTILES i/k).
func (a aggPlan) quantile(i int) float64 {
	switch a.kind {
	case dpselect.Percentile:
		return a.param
	case dpselect.Quantiles:
		return float64(i) / a.param
	}
	return 0.5
}

// aggregateForm checks what COUNT(DISTINCT ...), PERCENTILE_CONT and
// APPROX_QUANTILES add to an aggregate: the distinct column, p, k.
func (c *checker) aggregateForm(it dpselect.Item, a *aggPlan) error {
	switch it.Agg {
	case dpselect.Count:
		if it.Distinct {
			a.distinct = true
			u := c.pl.policy.PrivacyUnit
			a.persons = u != "" && strings.EqualFold(a.column, u)
		}
	case dpselect.Percentile:
		if !(it.Param >= 0 && it.Param <= 1) {
			return refusef("PERCENTILE_CONT(%s, %s): the percentile p must lie in [0, 1] (0.5 is the median), "+
				"as in PERCENTILE_CONT(%s, 0.9)", a.column, it.ParamText, a.column)
		}
		a.param = it.Param
	case dpselect.Quantiles:
		if it.Param != math.Trunc(it.Param) || it.Param < 1 || it.Param > MaxQuantiles {
			return refusef("APPROX_QUANTILES(%s, %s): the number of quantiles k must be an integer in [1, %d] "+
				"(it returns k+1 values read off a histogram of %d buckets), as in APPROX_QUANTILES(%s, 4)",
				a.column, it.ParamText, MaxQuantiles, MedianBuckets, a.column)
		}
		a.param = it.Param
	}
	return nil
}

// readDistinct runs a COUNT(DISTINCT col)'s query (rewriteDistinct); it
// returns the counts by canonKey of the group keys.
func (e *Engine) readDistinct(ctx context.Context, conn *sql.Conn, pl *plan, a aggPlan) (map[string]int64, error) {
	out := map[string]int64{}
	err := authorized(conn, pl, func(denied *string) error {
		rows, err := conn.QueryContext(ctx, rewriteDistinct(pl, a))
		if err != nil {
			if *denied != "" {
				return fmt.Errorf("protect: internal error, the distinct count's query asked for a read the checker "+
					"did not approve (%s): %w", *denied, err)
			}
			return fmt.Errorf("protect: running the distinct count's query: %w", err)
		}
		defer rows.Close()
		nk := len(pl.keys)
		dest := make([]any, nk+1)
		ptrs := make([]any, len(dest))
		for i := range dest {
			ptrs[i] = &dest[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			out[canonKey(dest[:nk])] += asInt(dest[nk])
		}
		return rows.Err()
	})
	return out, err
}

// externalAggregates refuses, for an engine outside SQLite (Statement), the
// aggregates it cannot compute from RowSQL's per-row values: those read by a
// query of their own (MEDIAN, PERCENTILE_CONT, APPROX_QUANTILES, COUNT(DISTINCT
// col)). COUNT(DISTINCT unit) is the count of persons, which it has.
func (pl *plan) externalAggregates() error {
	for j, it := range pl.stmt.Items {
		if k := pl.items[j]; k >= 0 && pl.aggs[k].ownQuery() {
			agg := it.Agg + "(" + it.Column + ")"
			if it.Distinct {
				agg = it.Agg + "(DISTINCT " + it.Column + ")"
			}
			return refusef("%s (output %s) is not computed outside SQLite (dpsql-beam) yet: run the statement with "+
				"dpsql query --analyst, or leave it out", agg, it.Name())
		}
	}
	return nil
}
