package optnoise

import (
	"errors"
	"fmt"
	"math"
)

// dualSimplex is a dense tableau dual simplex for
//
//	min c.x  s.t.  sum_{j<n} x_j = 1,  a_r.x + s_r = rhs_r (cuts),  x, s >= 0,
//
// to which cut rows are added one at a time. Adding a row keeps the basis
// dual feasible (its slack enters the basis), so the dual simplex restores
// primal feasibility from where the last solve ended: the usual engine of a
// cutting-plane method. The tableau holds B^-1 A row by row; columns are the
// n structural variables followed by one slack per live cut. Degeneracy is
// broken by a tiny deterministic perturbation of the costs and, in the ratio
// test, by the largest pivot among near-ties, then the lowest index (Bland).
type dualSimplex struct {
	n     int         // structural variables
	rows  [][]float64 // tableau rows (length ncols)
	rhs   []float64   // basic values
	basis []int       // basic column of each row
	d     []float64   // reduced costs (length ncols)
	cost  []float64   // structural costs (perturbed)
	ncols int
	slack []int // column of each row's slack (-1 for the convexity row)
	age   []int // consecutive drop checks the row's slack was basic
	// pinned counts the first cut rows (structural constraints) that are
	// never dropped; their slacks are columns n .. n+pinned-1.
	pinned int
	iters  int
}

const (
	pivTol  = 1e-9  // smallest pivot accepted
	feasTol = 1e-12 // a basic value above -feasTol is feasible
)

var errLPInfeasible = errors.New("no distribution on this support meets the privacy constraints: enlarge the support")

func newDualSimplex(cost []float64) *dualSimplex {
	n := len(cost)
	s := &dualSimplex{n: n, ncols: n}
	s.cost = make([]float64, n)
	jmin := 0
	for j, c := range cost {
		// Perturbation: relative 1e-11, distinct for every column.
		s.cost[j] = c + 1e-11*(1+math.Abs(c))*math.Mod(float64(j)*0.6180339887498949, 1)
		if s.cost[j] < s.cost[jmin] {
			jmin = j
		}
	}
	row := make([]float64, n)
	for j := range row {
		row[j] = 1
	}
	s.rows = [][]float64{row}
	s.rhs = []float64{1}
	s.basis = []int{jmin}
	s.slack = []int{-1}
	s.age = []int{0}
	s.d = make([]float64, n)
	for j := range s.d {
		s.d[j] = s.cost[j] - s.cost[jmin]
	}
	return s
}

// x returns the structural part of the current basic solution.
func (s *dualSimplex) x() []float64 {
	x := make([]float64, s.n)
	for i, b := range s.basis {
		if b < s.n {
			x[b] = math.Max(s.rhs[i], 0)
		}
	}
	return x
}

// value returns c.x for the unperturbed costs.
func value(cost, x []float64) float64 {
	var v float64
	for j := range x {
		v += cost[j] * x[j]
	}
	return v
}

// addCut adds the row a.x <= rhs (a over the structural variables).
func (s *dualSimplex) addCut(a []float64, rhs float64) {
	col := s.ncols
	s.ncols++
	for i := range s.rows {
		s.rows[i] = append(s.rows[i], 0)
	}
	s.d = append(s.d, 0)
	row := make([]float64, s.ncols)
	copy(row, a)
	row[col] = 1
	r := rhs
	// Eliminate the basic columns.
	for i, b := range s.basis {
		if f := row[b]; f != 0 {
			ri := s.rows[i]
			for j, v := range ri {
				if v != 0 {
					row[j] -= f * v
				}
			}
			row[b] = 0
			r -= f * s.rhs[i]
		}
	}
	s.rows = append(s.rows, row)
	s.rhs = append(s.rhs, r)
	s.basis = append(s.basis, col)
	s.slack = append(s.slack, col)
	s.age = append(s.age, 0)
}

// dropSlackRows removes cut rows whose slack is basic with a value above
// keep (they are not binding), or basic for maxAge checks in a row: removing
// a row together with its basic slack column leaves the rest of the tableau
// valid and the current basis optimal.
func (s *dualSimplex) dropSlackRows(keep float64, maxAge int, pinned bool) {
	drop := map[int]bool{}
	for i, b := range s.basis {
		if s.slack[i] < 0 || b != s.slack[i] || pinned && s.slack[i] < s.n+s.pinned {
			s.age[i] = 0
			continue
		}
		s.age[i]++
		if s.rhs[i] > keep || s.age[i] >= maxAge {
			drop[b] = true
		}
	}
	if len(drop) == 0 {
		return
	}
	// New column numbering.
	newCol := make([]int, s.ncols)
	nc := 0
	for j := range newCol {
		if drop[j] {
			newCol[j] = -1
			continue
		}
		newCol[j] = nc
		nc++
	}
	compact := func(v []float64) []float64 {
		out := v[:0]
		for j, x := range v {
			if newCol[j] >= 0 {
				out = append(out, x)
			}
		}
		return out
	}
	var rows [][]float64
	var rhs []float64
	var basis, slack, age []int
	for i, b := range s.basis {
		if drop[b] {
			continue
		}
		age = append(age, s.age[i])
		rows = append(rows, compact(s.rows[i]))
		rhs = append(rhs, s.rhs[i])
		basis = append(basis, newCol[b])
		if s.slack[i] >= 0 {
			slack = append(slack, newCol[s.slack[i]])
		} else {
			slack = append(slack, -1)
		}
	}
	// Rows whose own slack was dropped cannot exist: a dropped slack is
	// basic in its own row only.
	s.rows, s.rhs, s.basis, s.slack, s.age = rows, rhs, basis, slack, age
	s.d = compact(s.d)
	s.ncols = nc
}

// solve runs dual simplex pivots until the basis is primal feasible.
func (s *dualSimplex) solve(maxIters int) error {
	for {
		r := -1
		worst := -feasTol
		for i, v := range s.rhs {
			if v < worst {
				worst, r = v, i
			}
		}
		if r < 0 {
			return nil
		}
		if s.iters >= maxIters {
			return fmt.Errorf("the simplex did not converge in %d pivots", maxIters)
		}
		s.iters++
		row := s.rows[r]
		// Ratio test over columns with a negative entry; near-ties go to
		// the largest |entry|, then the lowest index.
		best, bestRatio, bestPiv := -1, math.Inf(1), 0.0
		for j, v := range row {
			if v >= -pivTol {
				continue
			}
			ratio := math.Max(s.d[j], 0) / -v
			switch {
			case ratio < bestRatio*(1-1e-12)-1e-18:
				best, bestRatio, bestPiv = j, ratio, -v
			case ratio <= bestRatio*(1+1e-12)+1e-18 && -v > bestPiv:
				best, bestPiv = j, -v
			}
		}
		if best < 0 {
			return errLPInfeasible
		}
		s.pivot(r, best)
	}
}

func (s *dualSimplex) pivot(r, c int) {
	row := s.rows[r]
	inv := 1 / row[c]
	for j := range row {
		row[j] *= inv
	}
	row[c] = 1
	s.rhs[r] *= inv
	for i, ri := range s.rows {
		if i == r {
			continue
		}
		f := ri[c]
		if f == 0 {
			continue
		}
		for j, v := range row {
			if v != 0 {
				ri[j] -= f * v
			}
		}
		ri[c] = 0
		s.rhs[i] -= f * s.rhs[r]
	}
	if f := s.d[c]; f != 0 {
		for j, v := range row {
			if v != 0 {
				s.d[j] -= f * v
			}
		}
		s.d[c] = 0
	}
	s.basis[r] = c
}
