package protect

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// ExplainColumns are the columns of [Engine.Explain]'s result.
var ExplainColumns = []string{"part", "name", "noise", "scale", "epsilon", "mu", "sensitivity", "std", "half_width", "confidence",
	"threshold", "detail"}

// Explain plans a DP statement exactly as [Engine.Query] would, and returns,
// instead of its rows, how it would be released: one row for the statement
// (its budget, the noise law and why), one for the partition selection (its
// threshold), one per noisy value it draws (the budget split: each value's
// noise law, scale, share and sensitivity) and one per released aggregate
// (the value or values it reads, its expected error and the half-width of
// its interval, at OPTIONS confidence or else 95%). It reads no protected
// row and charges nothing; a statement it accepts is one Query accepts.
// The statement may start with EXPLAIN, and Query given EXPLAIN SELECT WITH
// DIFFERENTIAL_PRIVACY ... answers as Explain does.
func (e *Engine) Explain(ctx context.Context, scope, query string) (*Result, error) {
	conn, err := e.meta.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	pl, err := e.plan(ctx, conn, scope, query)
	if err != nil {
		return nil, err
	}
	return &Result{Columns: ExplainColumns, Rows: pl.explain()}, nil
}

// explain returns the rows of Explain (ExplainColumns).
func (pl *plan) explain() [][]any {
	conf := pl.conf
	if conf == 0 {
		conf = 0.95
	}
	row := func(part, name string) []any {
		r := make([]any, len(ExplainColumns))
		r[0], r[1], r[9] = part, name, conf
		return r
	}
	var rows [][]any
	// The statement.
	st := row("statement", "")
	st[2] = string(pl.cal.Law)
	var d strings.Builder
	if pl.mu > 0 {
		st[5] = pl.mu
		fmt.Fprintf(&d, "mu = %g", pl.mu)
	} else {
		st[4] = pl.eps
		fmt.Fprintf(&d, "epsilon = %g, delta = %g", pl.eps, pl.delta)
		if pl.cal.Law == calibrate.Gaussian {
			st[5] = pl.cal.Mu
			fmt.Fprintf(&d, " (a Gaussian of mu = %.4g)", pl.cal.Mu)
		}
	}
	fmt.Fprintf(&d, "; charged as %s", pl.mech.Kind)
	if len(pl.mech.Parts) > 0 {
		fmt.Fprintf(&d, " of %d parts", len(pl.mech.Parts))
	}
	switch {
	case pl.noise == calibrate.Auto && !math.IsInf(pl.cal.Other, 1) && pl.cal.Other > 0:
		fmt.Fprintf(&d, "; noise = 'auto' chose %s, whose weighted variance %.4g is below the other law's %.4g", pl.cal.Law, pl.cal.Objective, pl.cal.Other)
	case pl.noise == calibrate.Auto && pl.mu > 0:
		d.WriteString("; a mu budget takes Gaussian noise")
	case pl.noise == calibrate.Auto:
		fmt.Fprintf(&d, "; noise = 'auto' chose %s, the only law that fits", pl.cal.Law)
	}
	if jp := pl.join; jp != nil && jp.prot != nil { // pjoin.go
		fmt.Fprintf(&d, "; persons of %s and %s bounded after the join: at most %d row(s) in each of %d group(s), "+
			"each row of %s joining at most %d row(s) of its person in %s", pl.table, jp.pub.name, pl.maxRows,
			pl.maxGroups, pl.table, jp.prot.k, jp.pub.name)
	}
	st[11] = d.String()
	rows = append(rows, st)
	// The selection and the values.
	for i := range pl.values {
		v := &pl.values[i]
		part := "value"
		if v.Selection {
			part = "selection"
		}
		r := row(part, v.Name)
		r[2], r[3], r[6] = string(v.Law), v.Scale(), v.Sensitivity
		if v.Law == calibrate.Laplace {
			r[4] = v.Epsilon
		} else {
			r[5] = v.Mu
		}
		one := calibrate.Term{N: v.Noisy, Coef: 1}
		r[7], r[8] = calibrate.SD(one), calibrate.HalfWidth(conf, one)
		var dd strings.Builder
		if v.Selection {
			r[10] = pl.tau
			fmt.Fprintf(&dd, "a group is released when its noisy count of persons reaches %.4g; the groups of one person appear with probability at most delta_s = %.3g; ", pl.tau, pl.deltaS)
		}
		if v.Dim > 1 {
			fmt.Fprintf(&dd, "%d buckets, each with this noise; ", v.Dim)
		}
		if v.Fixed {
			fmt.Fprintf(&dd, "values rounded to %g; ", v.Quantum)
		}
		if len(v.reads) > 0 {
			fmt.Fprintf(&dd, "read by %s", strings.Join(v.reads, ", "))
		} else {
			dd.WriteString("decides which groups are released")
		}
		r[11] = strings.TrimSuffix(dd.String(), "; ")
		rows = append(rows, r)
	}
	// The aggregates.
	names := pl.itemNames()
	term := func(i int, c float64) calibrate.Term { return calibrate.Term{N: pl.values[i].Noisy, Coef: c} }
	alpha := 1 - conf
	for ai, a := range pl.aggs {
		r := row("aggregate", names[ai])
		r[2] = string(pl.cal.Law)
		c := (a.hi - a.lo) / 2
		switch a.kind {
		case dpselect.Count:
			t := term(a.val, 1)
			r[3], r[7], r[8] = pl.values[a.val].Scale(), calibrate.SD(t), calibrate.HalfWidth(conf, t)
			r[11] = "the noisy " + pl.values[a.val].Name + ", rounded to an integer"
			if pl.values[a.val].Selection {
				r[11] = r[11].(string) + " (the selection's: read for released groups, so above the true count on average near the threshold)"
			}
		case dpselect.Sum:
			ts := []calibrate.Term{term(a.val, 1)}
			r[11] = "the noisy " + pl.values[a.val].Name
			if a.centred {
				ts = append(ts, term(a.cnt, a.mid))
				r[11] = fmt.Sprintf("the noisy %s plus %g times the noisy %s", pl.values[a.val].Name, a.mid, pl.values[a.cnt].Name)
			}
			r[7], r[8] = calibrate.SD(ts...), calibrate.HalfWidth(conf, ts...)
		case dpselect.Avg:
			s := calibrate.SD(term(a.val, 1))
			hs := calibrate.HalfWidth(1-alpha/2, term(a.val, 1))
			hn := calibrate.HalfWidth(1-alpha/2, term(a.cnt, 1))
			r[11] = fmt.Sprintf("%g + noisy %s / noisy %s, clamped to [%g, %g]: std about %.4g/n and half-width at most (%.4g + %.4g)/n for a group of n values (n >> %.3g)",
				a.mid, pl.values[a.val].Name, pl.values[a.cnt].Name, a.lo, a.hi, s, hs, c*hn, hn)
		case dpselect.Var, dpselect.Std:
			sq := calibrate.SD(term(a.sq, 1))
			hq := calibrate.HalfWidth(1-alpha/3, term(a.sq, 1))
			what := "variance"
			if a.kind == dpselect.Std {
				what = "variance (its square root released)"
			}
			r[11] = fmt.Sprintf("the %s of the noisy sum of squares, sum and count, clamped to [0, %g]: std about %.4g/n and half-width about %.4g/n for a group of n values centred in the bounds",
				what, 2*a.sqMid, sq, hq)
		case dpselect.Median, dpselect.Percentile, dpselect.Quantiles:
			v := pl.values[a.val]
			hb := calibrate.HalfWidth(1-alpha/MedianBuckets, term(a.val, 1))
			r[3], r[7] = v.Scale(), calibrate.SD(term(a.val, 1))
			what := "median"
			switch a.kind {
			case dpselect.Percentile:
				what = fmt.Sprintf("%g-quantile", a.param)
			case dpselect.Quantiles:
				what = fmt.Sprintf("quantile at 0, 1/%g, ..., 1 (a JSON array)", a.param)
			}
			r[11] = fmt.Sprintf("each %s read off the noisy histogram of %d buckets of width %g: within a bucket plus the values the noise moves the cumulative count by (at most about %.3g persons); the interval holds every value the buckets allow within %.3g each",
				what, MedianBuckets, (a.hi-a.lo)/MedianBuckets, math.Sqrt(MedianBuckets/2)*calibrate.SD(term(a.val, 1)), hb)
		}
		rows = append(rows, r)
	}
	return rows
}
