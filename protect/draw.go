package protect

import (
	"math"
	"strconv"

	"github.com/dpsql/dpsql/protect/calibrate"
	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// releaseRows draws the noise: partition selection, then each value of the
// released groups (values.go), then the aggregates as post-processings of
// the values (with their intervals under OPTIONS confidence), then ORDER BY
// and LIMIT on the noisy rows.
func releaseRows(pl *plan, groups []group, noise *release.Noise) *Result {
	res := &Result{Columns: pl.columns()}
	if len(pl.keys) == 0 && len(groups) == 0 {
		groups = []group{newGroup(nil, len(pl.aggs))}
	}
	kept := groups
	drawn := make([][]float64, len(pl.values))
	done := make([]bool, len(pl.values))
	switch {
	case pl.keySources != nil:
		kept = publicGroups(pl, groups)
	case pl.selection():
		// The selection's noisy count of persons decides which groups are
		// released; it is also the value COUNT(*) (and a count of numbers)
		// may read (values.go).
		si := pl.selectionValue()
		v := &pl.values[si]
		sel := make([]float64, len(groups))
		for i := range groups {
			sel[i] = v.exact(&groups[i], 0)
		}
		addNoise(noise, v, sel)
		kept = kept[:0:0]
		var keptSel []float64
		for i, g := range groups {
			if sel[i] >= pl.tau {
				kept = append(kept, g)
				keptSel = append(keptSel, sel[i])
			}
		}
		drawn[si], done[si] = keptSel, true
	}
	for vi := range pl.values {
		if done[vi] {
			continue
		}
		v := &pl.values[vi]
		d := max(v.Dim, 1)
		xs := make([]float64, len(kept)*d)
		for i := range kept {
			for b := range d {
				xs[i*d+b] = v.exact(&kept[i], b)
			}
		}
		addNoise(noise, v, xs)
		drawn[vi] = xs
	}
	ncol := len(res.Columns)
	hw := pl.halfWidths()
	out := make([][]any, len(kept))
	for i, g := range kept {
		row := make([]any, ncol)
		for j, it := range pl.items {
			c := pl.itemColumn(j)
			if it < 0 {
				row[c] = g.keys[-1-it]
				continue
			}
			a := &pl.aggs[it]
			var lo, hi any
			row[c], lo, hi = pl.aggregate(a, hw[it], drawn, i)
			if pl.conf > 0 {
				row[c+1], row[c+2] = lo, hi
			}
		}
		out[i] = row
	}
	out = pl.having.filterRows(out)
	orderRows(pl, res.Columns, out)
	if l := pl.stmt.Limit; l >= 0 && int64(len(out)) > l {
		out = out[:l]
	}
	res.Rows = out
	return res
}

// addNoise adds one draw of v's law to each of xs (rounded to its grid).
func addNoise(noise *release.Noise, v *noisyValue, xs []float64) {
	if v.Law == calibrate.Laplace {
		for i := range xs {
			xs[i] = noise.AddLaplace(xs[i], v.Lap)
		}
		return
	}
	noise.AddGaussian(xs, v.Sigma)
}

// selectionValue returns the index of the selection's value.
func (pl *plan) selectionValue() int {
	for i := range pl.values {
		if pl.values[i].Selection {
			return i
		}
	}
	panic("protect: internal error, a selection without its value")
}

// columns returns the released columns' names: the SELECT list, each
// aggregate followed by alias_lo and alias_hi under OPTIONS confidence.
func (pl *plan) columns() []string {
	var cols []string
	for j, it := range pl.stmt.Items {
		cols = append(cols, it.Name())
		if pl.conf > 0 && pl.items[j] >= 0 {
			cols = append(cols, it.Name()+"_lo", it.Name()+"_hi")
		}
	}
	return cols
}

// itemColumn returns the released column of SELECT-list item j.
func (pl *plan) itemColumn(j int) int {
	if pl.conf == 0 {
		return j
	}
	c := 0
	for k := range j {
		c++
		if pl.items[k] >= 0 {
			c += 2
		}
	}
	return c
}

// aggHalfWidths are an aggregate's interval half-widths, which depend on the
// plan alone: h for COUNT and SUM; per value read (val, cnt, sq) for the
// conservative intervals of AVG, VAR_POP and STDDEV_POP; per bucket for
// MEDIAN.
type aggHalfWidths struct {
	h, val, cnt, sq float64
}

// halfWidths computes every aggregate's half-widths at the statement's
// confidence (nil without OPTIONS confidence).
func (pl *plan) halfWidths() []aggHalfWidths {
	if pl.conf == 0 {
		return make([]aggHalfWidths, len(pl.aggs))
	}
	term := func(i int, coef float64) calibrate.Term { return calibrate.Term{N: pl.values[i].Noisy, Coef: coef} }
	out := make([]aggHalfWidths, len(pl.aggs))
	alpha := 1 - pl.conf
	for ai, a := range pl.aggs {
		h := &out[ai]
		switch a.kind {
		case dpselect.Count:
			h.h = calibrate.HalfWidth(pl.conf, term(a.val, 1))
		case dpselect.Sum:
			if a.centred {
				h.h = calibrate.HalfWidth(pl.conf, term(a.val, 1), term(a.cnt, a.mid))
			} else {
				h.h = calibrate.HalfWidth(pl.conf, term(a.val, 1))
			}
		case dpselect.Avg:
			h.val = calibrate.HalfWidth(1-alpha/2, term(a.val, 1))
			h.cnt = calibrate.HalfWidth(1-alpha/2, term(a.cnt, 1))
		case dpselect.Var, dpselect.Std:
			h.val = calibrate.HalfWidth(1-alpha/3, term(a.val, 1))
			h.cnt = calibrate.HalfWidth(1-alpha/3, term(a.cnt, 1))
			h.sq = calibrate.HalfWidth(1-alpha/3, term(a.sq, 1))
		case dpselect.Median, dpselect.Percentile, dpselect.Quantiles:
			h.val = calibrate.HalfWidth(1-alpha/MedianBuckets, term(a.val, 1))
		}
	}
	return out
}

// aggregate returns aggregate a of released group i, and its interval's
// bounds (meaningful under OPTIONS confidence), from the drawn values.
//
// Intervals: COUNT and SUM are the released value plus or minus the exact
// half-width of their noise (a count's, or a centred sum's plus the midpoint
// times a count's), so they cover the group's clamped figure with the
// confidence asked for (up to the noise grid, about 2^-15 of a scale; a
// COUNT read off the selection's count covers it conditionally on the group
// being released). AVG, VAR_POP, STDDEV_POP and MEDIAN are conservative:
// each value they read is within its half-width at confidence 1 - alpha/k
// (k values, or MedianBuckets buckets) with probability at least 1 - alpha
// together, and the interval holds every statistic those ranges allow.
func (pl *plan) aggregate(a *aggPlan, hw aggHalfWidths, drawn [][]float64, i int) (v, lo, hi any) {
	switch a.kind {
	case dpselect.Count:
		y := drawn[a.val][i]
		n := int64(math.Max(0, math.Round(y)))
		l := int64(math.Max(0, math.Ceil(y-hw.h)))
		return n, l, max(l, int64(math.Max(0, math.Floor(y+hw.h))))
	case dpselect.Sum:
		y := drawn[a.val][i]
		if a.centred {
			y += a.mid * drawn[a.cnt][i]
		}
		return y, y - hw.h, y + hw.h
	case dpselect.Avg:
		s, n := drawn[a.val][i], drawn[a.cnt][i]
		v := math.Min(a.hi, math.Max(a.lo, a.mid+s/math.Max(n, 1)))
		l, h := a.lo, a.hi
		if n-hw.cnt >= 1 {
			m := math.Inf(1)
			M := math.Inf(-1)
			for _, sv := range []float64{s - hw.val, s + hw.val} {
				for _, nv := range []float64{n - hw.cnt, n + hw.cnt} {
					m, M = math.Min(m, sv/nv), math.Max(M, sv/nv)
				}
			}
			l, h = math.Max(a.lo, a.mid+m), math.Min(a.hi, a.mid+M)
		}
		return v, l, h
	case dpselect.Var, dpselect.Std:
		s, n, q := drawn[a.val][i], drawn[a.cnt][i], drawn[a.sq][i]
		// Post-processing: E[y^2] - E[y]^2 of the centred values,
		// clamped to [0, c^2].
		nn := math.Max(n, 1)
		mean := s / nn
		v := (q+a.sqMid*math.Max(n, 0))/nn - mean*mean
		v = math.Min(2*a.sqMid, math.Max(0, v))
		l, h := 0.0, 2*a.sqMid
		if n-hw.cnt >= 1 {
			l, h = varRange(s, n, q, a.sqMid, hw)
		}
		if a.kind == dpselect.Std {
			return math.Sqrt(v), math.Sqrt(l), math.Sqrt(h)
		}
		return v, l, h
	case dpselect.Median, dpselect.Percentile:
		hist := drawn[a.val][i*MedianBuckets : (i+1)*MedianBuckets]
		p := a.quantile(0)
		l, h := quantileRange(hist, hw.val, a.lo, a.hi, p)
		return quantileOf(hist, a.lo, a.hi, p), l, h
	case dpselect.Quantiles:
		hist := drawn[a.val][i*MedianBuckets : (i+1)*MedianBuckets]
		k := int(a.param)
		vs, ls, hs := make([]float64, k+1), make([]float64, k+1), make([]float64, k+1)
		for j := range vs {
			p := a.quantile(j)
			vs[j] = quantileOf(hist, a.lo, a.hi, p)
			ls[j], hs[j] = quantileRange(hist, hw.val, a.lo, a.hi, p)
		}
		return jsonNumbers(vs), jsonNumbers(ls), jsonNumbers(hs)
	}
	return nil, nil, nil
}

// varRange returns the least and the largest population variance
// Q/n + sqMid - S^2/n^2 over the box |S - s| <= hw.val, |n - nn| <= hw.cnt,
// |Q - q| <= hw.sq (n >= 1 on it), clamped to [0, 2 sqMid]: the largest has
// Q at its top and S^2 at its least, the least Q at its bottom and S^2 at
// its largest, and in n the extremes of Q/n - S^2/n^2 lie at the ends or at
// its critical point n = 2 S^2/Q.
func varRange(s, nn, q, sqMid float64, hw aggHalfWidths) (float64, float64) {
	sLo, sHi := s-hw.val, s+hw.val
	s2min := math.Min(sLo*sLo, sHi*sHi)
	if sLo <= 0 && sHi >= 0 {
		s2min = 0
	}
	s2max := math.Max(sLo*sLo, sHi*sHi)
	nLo, nHi := nn-hw.cnt, nn+hw.cnt
	ext := func(qv, s2 float64, pick func(a, b float64) float64) float64 {
		f := func(n float64) float64 { return qv/n - s2/(n*n) }
		r := pick(f(nLo), f(nHi))
		if qv > 0 {
			if c := 2 * s2 / qv; c > nLo && c < nHi {
				r = pick(r, f(c))
			}
		}
		return r
	}
	lo := sqMid + ext(q-hw.sq, s2max, math.Min)
	hi := sqMid + ext(q+hw.sq, s2min, math.Max)
	return math.Min(2*sqMid, math.Max(0, lo)), math.Min(2*sqMid, math.Max(0, hi))
}

// quantileRange returns an interval for PERCENTILE_CONT(p) of the clamped
// values whose histogram of equal buckets between lo and hi is within h of
// the noisy histogram in every bucket (and whose counts are integers >= 0).
// Of T values, PERCENTILE_CONT(p) lies between the order statistics of
// 0-based ranks floor(p(T-1)) and ceil(p(T-1)). It is at least the start of
// the first bucket b whose cumulative count c can hold the lower one
// (c > p(c + rest - 1) for some counts in range: the largest c, the least
// rest), and at most the end of the first bucket that surely holds the
// upper one (c - 1 >= p(c + rest - 1) for every count in range: the least
// c, the largest rest).
func quantileRange(hist []float64, h, lo, hi, p float64) (float64, float64) {
	n := len(hist)
	minC := make([]float64, n)
	maxC := make([]float64, n)
	var minTot, maxTot float64
	for b, x := range hist {
		minC[b] = math.Max(0, math.Ceil(x-h))
		maxC[b] = math.Max(0, math.Floor(x+h))
		minTot += minC[b]
		maxTot += maxC[b]
	}
	if maxTot == 0 {
		return lo, hi
	}
	w := (hi - lo) / float64(n)
	bLo, bHi := n-1, n-1
	found := false
	var minCum, maxCum float64
	for b := range n {
		minCum += minC[b]
		maxCum += maxC[b]
		if !found && maxCum >= 1 && maxCum > p*(maxCum+minTot-minCum-1) {
			bLo, found = b, true
		}
		if minCum >= 1 && minCum-1 >= p*(minCum+maxTot-maxCum-1) {
			bHi = b
			break
		}
	}
	return lo + w*float64(bLo), math.Min(hi, lo+w*float64(bHi+1))
}

// medianRange is quantileRange at p = 1/2.
func medianRange(hist []float64, h, lo, hi float64) (float64, float64) {
	return quantileRange(hist, h, lo, hi, 0.5)
}

// medianOf is quantileOf at p = 1/2.
func medianOf(h []float64, lo, hi float64) float64 { return quantileOf(h, lo, hi, 0.5) }

// quantileOf reads the p-quantile off a noisy histogram of equal buckets
// between lo and hi (post-processing): where the noisy cumulative count
// reaches p of the noisy total, the values taken as spread evenly within the
// bucket (a bucket whose noisy count is not positive holds none). The counts
// are summed as drawn, negative ones included: the noise of the empty
// buckets then adds nothing to the total on average, where counting
// negative counts as 0 added about 0.4 sigma per empty bucket and pulled the
// upper quantiles towards hi (the table in docs/accuracy.md, TestQuantileErrorTable).
// A total that is not positive gives the midpoint.
func quantileOf(h []float64, lo, hi, p float64) float64 {
	total := 0.0
	for _, c := range h {
		total += c
	}
	if !(total > 0) {
		return (lo + hi) / 2
	}
	w := (hi - lo) / float64(len(h))
	cum := 0.0
	for b, c := range h {
		if c > 0 && cum+c >= p*total {
			return math.Min(hi, math.Max(lo, lo+w*(float64(b)+(p*total-cum)/c)))
		}
		cum += c
	}
	return hi
}

// jsonNumbers renders numbers as a JSON array (APPROX_QUANTILES's output).
func jsonNumbers(vs []float64) string {
	b := make([]byte, 0, 1+12*len(vs))
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return string(append(b, ']'))
}
