// Package optnoise computes additive noise distributions optimised for a loss
// under (epsilon, delta)-differential privacy, and verifies them exactly.
//
// It follows Selvi, Liu and Wiesemann, "Differential Privacy via
// Distributionally Robust Optimization" (arXiv:2304.12681): the noise is a
// mixture of uniform laws on N intervals of width beta = 1/D on the support
// [-H beta, H beta) (N = 2H, sensitivity normalised to 1, so neighbouring
// queries differ by at most D intervals), and the mixture weights p solve the
// linear program
//
//	minimise    sum_j p_j E[loss(U_j)]             (U_j uniform on interval j)
//	subject to  sum_j p_j = 1,  p >= 0,
//	            P(noise + shift in A) <= e^eps P(noise in A) + delta   for every shift and event A.
//
// For a shift of k intervals and a piecewise-uniform law the worst event is a
// union of intervals, found greedily (those where the shifted weight exceeds
// e^eps times the other), and shifts between grid multiples are never worse
// than both neighbouring multiples (the divergence is linear in the offset),
// so only shifts k in [-D, D] matter. The program is solved by cutting
// planes: a small dense dual simplex (lp.go) re-optimised after each batch of
// most-violated cuts.
//
// # Exact verification
//
// The solver works in floating point; nothing it returns is trusted. The
// weights are quantised to integers summing to 2^63 (the law the sampler
// draws from, see release.GridNoise) and [Verify] checks, in exact integer
// arithmetic, that for every shift k in [-D, D]
//
//	sum_i (w_{i-k} - E w_i)_+ <= delta 2^63
//
// with E a rational lower bound on e^eps (a partial Taylor sum and repeated
// squaring, each rounded down). Any excess, however small, is refused (the
// reference implementation tolerates 1e-8). If the quantised optimum fails,
// it is mixed with a reference law that passes (hockey-stick divergences are
// convex in the pair) until the mixture passes.
package optnoise

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
)

// Loss names a loss function of the noise.
type Loss string

// Losses understood by [Problem].
const (
	L1 Loss = "l1" // |x|
	L2 Loss = "l2" // x^2
)

// Limits of a problem.
const (
	MaxIntervals = 1000 // N
	MaxPerUnit   = 256  // D
	MaxEpsilon   = 8.0
)

// Grid sizes chosen by [Default].
const (
	defaultIntervals  = 160
	maxDefaultPerUnit = 20
)

// Problem is one optimisation instance, with sensitivity normalised to 1.
type Problem struct {
	Epsilon, Delta float64
	PerUnit        int  // D: intervals per unit of sensitivity (beta = 1/D)
	Half           int  // H: intervals on each side of 0 (N = 2H)
	Loss           Loss // l1 or l2, unless Cost is set
	// Cost, if set, replaces Loss: the expected loss of the uniform law on
	// [lo, hi) (used for the asymmetric loss of the paper's Figure 1).
	Cost func(lo, hi float64) float64 `json:"-"`
	// Shifts is the largest neighbour shift in intervals; 0 means PerUnit.
	Shifts int
	// Monotone adds the constraint that the probabilities do not increase
	// away from 0 (the assumption the paper shows is not free).
	Monotone bool
}

// Default returns the problem dpsql solves for (epsilon, delta, loss): the
// support of the truncated Laplace mechanism at sensitivity 1, A =
// log(1 + (e^eps - 1)/(2 delta))/eps, rounded up to whole intervals, with D
// chosen so that N is about 160 (D in [2, 20]): at most seconds to optimise.
func Default(epsilon, delta float64, loss Loss) (Problem, error) {
	p := Problem{Epsilon: epsilon, Delta: delta, Loss: loss, PerUnit: 1, Half: 1}
	if err := p.check(false); err != nil {
		return p, err
	}
	a := TLapSupport(epsilon, delta)
	d := int(math.Round(defaultIntervals / (2 * a)))
	p.PerUnit = max(2, min(d, maxDefaultPerUnit))
	p.Half = int(math.Ceil(a * float64(p.PerUnit) * (1 + 1e-12)))
	if err := p.check(true); err != nil {
		return p, err
	}
	return p, nil
}

// TLapSupport returns the truncated Laplace mechanism's support half-width at
// sensitivity 1: log(1 + (e^eps - 1)/(2 delta))/eps.
func TLapSupport(epsilon, delta float64) float64 {
	return math.Log1p(math.Expm1(epsilon)/(2*delta)) / epsilon
}

func (p Problem) shifts() int {
	if p.Shifts > 0 {
		return p.Shifts
	}
	return p.PerUnit
}

func (p Problem) check(size bool) error {
	if !(p.Epsilon > 0 && p.Epsilon <= MaxEpsilon) {
		return fmt.Errorf("epsilon must lie in (0, %v] for optimised noise, got %v", MaxEpsilon, p.Epsilon)
	}
	if !(p.Delta > 0 && p.Delta < 1) {
		return fmt.Errorf("delta must lie strictly between 0 and 1, got %v", p.Delta)
	}
	if p.Cost == nil && p.Loss != L1 && p.Loss != L2 {
		return fmt.Errorf("unknown loss %q (want 'l1' or 'l2')", p.Loss)
	}
	if !size {
		return nil
	}
	if p.PerUnit < 1 || p.PerUnit > MaxPerUnit {
		return fmt.Errorf("intervals per unit sensitivity must lie in [1, %d], got %d", MaxPerUnit, p.PerUnit)
	}
	if p.Half < 1 || 2*p.Half > MaxIntervals {
		return fmt.Errorf("the grid needs %d intervals (limit %d, to optimise within seconds): (epsilon, delta) = (%v, %v) needs too wide a support; use dp_tlaplace or a larger delta", 2*p.Half, MaxIntervals, p.Epsilon, p.Delta)
	}
	if s := p.shifts(); s < 1 || s > 2*p.Half {
		return fmt.Errorf("shifts must lie in [1, %d], got %d", 2*p.Half, s)
	}
	return nil
}

// N returns the number of intervals.
func (p Problem) N() int { return 2 * p.Half }

// Edges returns interval j's ends [lo, hi) at sensitivity 1.
func (p Problem) Edges(j int) (lo, hi float64) {
	b := 1 / float64(p.PerUnit)
	return float64(j-p.Half) * b, float64(j-p.Half+1) * b
}

// costs returns E[loss(U_j)] per interval.
func (p Problem) costs() []float64 {
	c := make([]float64, p.N())
	for j := range c {
		lo, hi := p.Edges(j)
		switch {
		case p.Cost != nil:
			c[j] = p.Cost(lo, hi)
		case p.Loss == L1:
			c[j] = math.Abs(lo+hi) / 2 // intervals never straddle 0
		default:
			c[j] = (lo*lo + lo*hi + hi*hi) / 3
		}
	}
	return c
}

// ExpectedLoss returns the expected loss of the law with probabilities q
// (sum 1) at sensitivity 1.
func (p Problem) ExpectedLoss(q []float64) float64 { return value(p.costs(), q) }

// Solution is the floating-point optimum of a problem.
type Solution struct {
	P      []float64 // interval probabilities
	Value  float64   // expected loss at sensitivity 1
	Cuts   int       // cuts added
	Pivots int       // simplex pivots
}

// worstEvent returns, for a shift of k intervals, the violation
// sum_i (q_{i-k} - e q_i)_+ - delta and the cut's coefficients on q.
func worstEvent(q []float64, k int, e, delta float64) (float64, []float64) {
	n := len(q)
	var v float64
	a := make([]float64, n)
	for i := min(0, k); i < n+max(0, k); i++ {
		var pk, qi float64
		if i-k >= 0 && i-k < n {
			pk = q[i-k]
		}
		if i >= 0 && i < n {
			qi = q[i]
		}
		if pk-e*qi > 0 {
			v += pk - e*qi
			if i-k >= 0 && i-k < n {
				a[i-k]++
			}
			if i >= 0 && i < n {
				a[i] -= e
			}
		}
	}
	return v - delta, a
}

// Solve solves the problem's linear program by cutting planes.
//
// For the symmetric losses (l1, l2) the optimum may be taken symmetric (the
// average of a feasible law and its mirror image is feasible, by convexity,
// and costs the same), so the program is solved over the H pair masses
// r_j = p_j + p_(N-1-j) and shifts k > 0 only: a quarter of the tableau.
func Solve(p Problem) (*Solution, error) {
	if err := p.check(true); err != nil {
		return nil, err
	}
	cost := p.costs()
	n := p.N()
	sym := p.Cost == nil
	// expand maps LP variables to interval probabilities; fold maps a cut
	// on the probabilities to one on the LP variables.
	expand := func(x []float64) []float64 { return x }
	fold := func(a []float64) []float64 { return a }
	lpCost := cost
	if sym {
		H := p.Half
		lpCost = cost[H:] // interval H+j mirrors H-1-j
		expand = func(x []float64) []float64 {
			q := make([]float64, n)
			for j, v := range x {
				q[H+j], q[H-1-j] = v/2, v/2
			}
			return q
		}
		fold = func(a []float64) []float64 {
			f := make([]float64, H)
			for j := range f {
				f[j] = (a[H+j] + a[H-1-j]) / 2
			}
			return f
		}
	}
	lp := newDualSimplex(lpCost)
	if p.Monotone {
		nv := len(lpCost)
		for j := 0; j+1 < nv; j++ {
			if sym { // r_(j+1) <= r_j
				a := make([]float64, nv)
				a[j+1], a[j] = 1, -1
				lp.addCut(a, 0)
			} else if j+1 < p.Half { // left side rises towards 0: p_j <= p_(j+1)
				a := make([]float64, nv)
				a[j], a[j+1] = 1, -1
				lp.addCut(a, 0)
			} else if j >= p.Half { // right side falls: p_(j+1) <= p_j
				a := make([]float64, nv)
				a[j+1], a[j] = 1, -1
				lp.addCut(a, 0)
			}
		}
		lp.pinned = lp.ncols - lp.n
	}
	e := math.Exp(p.Epsilon)
	K := p.shifts()
	lowK := -K
	if sym {
		lowK = 1 // shift -k mirrors shift k
	}
	// Aim a little below delta so that quantisation keeps the optimum
	// inside the exact constraint.
	// Quantisation moves each probability by about 2^-52 of itself plus
	// 2^-63, so each shift's delta by less than (1 + e^eps) (2^-50 + N
	// 2^-63); leave that room, twice the cut tolerance and a relative 1e-7
	// (Certify mixes in a reference law if more is needed).
	const tol = 1e-11
	qm := (1 + e) * (0x1p-50 + float64(n)*0x1p-63)
	target := math.Max(p.Delta*(1-1e-7)-qm-2*tol, 0.95*p.Delta)
	// Seed the program with the tail events of the largest shifts,
	// P(X >= i - K) - e^eps P(X >= i) <= delta (and the mirror ones): from
	// a point mass, Kelley's method would otherwise spend hundreds of
	// rounds spreading the law one cut at a time.
	for _, k := range []int{K, -K} {
		if k < lowK {
			continue
		}
		for i0 := 1; i0 < n+K; i0++ {
			a := make([]float64, n)
			for i := 0; i < n+K; i++ {
				o := i + min(0, k) // output index
				if (k > 0 && i < i0) || (k < 0 && i > n+K-1-i0) {
					continue
				}
				if j := o - k; j >= 0 && j < n {
					a[j]++
				}
				if o >= 0 && o < n {
					a[o] -= e
				}
			}
			lp.addCut(fold(a), target)
		}
	}
	cuts := 0
	for round := 0; ; round++ {
		if err := lp.solve(200000); err != nil {
			return nil, err
		}
		q := expand(lp.x())
		type viol struct {
			v float64
			a []float64
		}
		var vs []viol
		for k := lowK; k <= K; k++ {
			if k == 0 {
				continue
			}
			if v, a := worstEvent(q, k, e, target); v > tol {
				vs = append(vs, viol{v, a})
			}
		}
		if len(vs) == 0 {
			return &Solution{P: q, Value: value(cost, q), Cuts: cuts, Pivots: lp.iters}, nil
		}
		if round > 20000 {
			return nil, errors.New("the cutting-plane method did not converge in 20000 rounds")
		}
		sort.Slice(vs, func(i, j int) bool { return vs[i].v > vs[j].v })
		for _, c := range vs[:min(len(vs), 4)] {
			lp.addCut(fold(c.a), target)
			cuts++
		}
		// Keep the tableau to the cuts that bind: drop slack cuts, and
		// degenerate ones (slack basic at 0) after 8 rounds in that state.
		// A dropped cut that matters again is found again.
		lp.dropSlackRows(1e-9*p.Delta, 8, p.Monotone)
	}
}

// Total is the sum of quantised weights.
const Total = 1 << 63

// Quantise rounds probabilities q (non-negative, sum about 1) to integer
// weights summing to exactly 2^63, by largest remainders.
func Quantise(q []float64) []uint64 {
	var sum float64
	for _, v := range q {
		sum += math.Max(v, 0)
	}
	w := make([]uint64, len(q))
	rem := make([]int, len(q))
	frac := make([]float64, len(q))
	var tot uint64
	for j, v := range q {
		x := math.Ldexp(math.Max(v, 0)/sum, 63)
		f := math.Floor(x)
		w[j] = uint64(min(f, 0x1p63-0x1p11)) // below 2^63 as a float64
		frac[j] = x - f
		tot += w[j]
		rem[j] = j
	}
	sort.SliceStable(rem, func(a, b int) bool { return frac[rem[a]] > frac[rem[b]] })
	for i := 0; tot < Total; i = (i + 1) % len(rem) { // a few hundred units at most
		w[rem[i]]++
		tot++
	}
	for i := 0; tot > Total; i = (i + 1) % len(rem) {
		if j := rem[len(rem)-1-i]; w[j] > 0 {
			w[j]--
			tot--
		}
	}
	return w
}

// ExpLower returns a rational lower bound on e^x, x >= 0 finite: the Taylor
// sum of e^(x/2^s) to 30 terms (x/2^s <= 2^-6), squared s times, every
// operation on positive numbers rounded towards zero at 256 bits.
func ExpLower(x float64) *big.Rat {
	if !(x >= 0) || math.IsInf(x, 0) {
		panic("optnoise: ExpLower needs a finite x >= 0")
	}
	const prec = 256
	nf := func() *big.Float { return new(big.Float).SetPrec(prec).SetMode(big.ToZero) }
	s := 0
	if _, e := math.Frexp(x); e > -6 {
		s = e + 6
	}
	y := nf().SetFloat64(x)
	y.SetMantExp(y, -s) // exact
	sum := nf().SetInt64(1)
	term := nf().SetInt64(1)
	for i := int64(1); i <= 30; i++ {
		term.Mul(term, y)
		term.Quo(term, nf().SetInt64(i))
		sum.Add(sum, term)
	}
	for range s {
		sum.Mul(sum, sum)
	}
	r, _ := sum.Rat(nil)
	return r
}

// ShiftDeltas returns, for each shift k in [-K, K] (index k+K; k = 0 gives
// 0), the exact delta(eps) of the law with weights w (sum 2^63) against its
// copy shifted by k intervals, with e^eps replaced by the lower bound E:
// sum_i (w_{i-k} - E w_i)_+ / 2^63.
func ShiftDeltas(w []uint64, K int, E *big.Rat) []*big.Rat {
	n := len(w)
	num, den := E.Num(), E.Denom()
	out := make([]*big.Rat, 2*K+1)
	a, b, t := new(big.Int), new(big.Int), new(big.Int)
	for k := -K; k <= K; k++ {
		s := new(big.Int)
		if k != 0 {
			for i := min(0, k); i < n+max(0, k); i++ {
				var pk, qi uint64
				if i-k >= 0 && i-k < n {
					pk = w[i-k]
				}
				if i >= 0 && i < n {
					qi = w[i]
				}
				if pk == 0 {
					continue
				}
				a.SetUint64(pk)
				a.Mul(a, den)
				b.SetUint64(qi)
				b.Mul(b, num)
				if t.Sub(a, b); t.Sign() > 0 {
					s.Add(s, t)
				}
			}
		}
		d := new(big.Int).Lsh(den, 63)
		out[k+K] = new(big.Rat).SetFrac(s, d)
	}
	return out
}

// ErrVerify reports weights that do not meet the privacy constraint.
var ErrVerify = errors.New("optnoise: the distribution does not meet (epsilon, delta)")

// Verify checks exactly that the law with weights w (sum 2^63) meets
// (epsilon, delta) for every shift of up to K intervals, and returns the
// largest delta(epsilon) over the shifts (as a float64 rounded up).
func Verify(w []uint64, K int, epsilon, delta float64) (float64, error) {
	var sum uint64
	for _, v := range w {
		if v > Total || sum+v > Total {
			return 0, fmt.Errorf("%w: weights must sum to 2^63, they exceed it", ErrVerify)
		}
		sum += v
	}
	if len(w) == 0 || sum != Total {
		return 0, fmt.Errorf("%w: weights must sum to 2^63, got %d", ErrVerify, sum)
	}
	if K < 1 {
		return 0, fmt.Errorf("%w: shifts must be >= 1, got %d", ErrVerify, K)
	}
	if !(epsilon >= 0) || math.IsInf(epsilon, 0) || !(delta >= 0 && delta < 1) {
		return 0, fmt.Errorf("%w: bad (epsilon, delta) = (%v, %v)", ErrVerify, epsilon, delta)
	}
	limit := new(big.Rat).SetFloat64(delta)
	worst := new(big.Rat)
	for _, d := range ShiftDeltas(w, K, ExpLower(epsilon)) {
		if d.Cmp(worst) > 0 {
			worst = d
		}
	}
	f, _ := worst.Float64()
	if new(big.Rat).SetFloat64(f).Cmp(worst) < 0 {
		f = math.Nextafter(f, 1)
	}
	if worst.Cmp(limit) > 0 {
		return f, fmt.Errorf("%w: delta(%v) is %.17g over shifts of up to %d intervals, above %v", ErrVerify, epsilon, f, K, delta)
	}
	return f, nil
}

// Distribution is a verified quantised law.
type Distribution struct {
	Problem  Problem
	Weights  []uint64 // sum 2^63: what the sampler draws from
	Delta    float64  // largest delta(epsilon) over shifts, verified <= Problem.Delta
	LPValue  float64  // the LP optimum (floating point)
	Value    float64  // expected loss of the quantised law at sensitivity 1
	Mixed    float64  // weight of the reference law mixed in to pass verification (0: none)
	Solution *Solution
}

// Probabilities returns w/2^63.
func Probabilities(w []uint64) []float64 {
	q := make([]float64, len(w))
	for j, v := range w {
		q[j] = math.Ldexp(float64(v), -63)
	}
	return q
}

// reference returns a law on the problem's grid that meets its constraints
// with room to spare if any simple one does: geometric weights with ratio
// e^(-eps'/K) per interval, eps' slightly below eps, so that inside the
// support no shift of up to K intervals changes the weight by more than
// e^eps', and only the mass pushed off the support counts.
func reference(p Problem) []float64 {
	K := float64(p.shifts())
	r := math.Exp(-p.Epsilon * (1 - 1e-3) / K)
	q := make([]float64, p.N())
	for j := range q {
		q[j] = math.Pow(r, math.Abs(float64(j-p.Half)+0.5))
	}
	return q
}

// Optimise solves the problem, quantises the optimum and returns it once
// Verify accepts it, mixing in the reference law if needed.
func Optimise(p Problem) (*Distribution, error) {
	sol, err := Solve(p)
	if err != nil {
		return nil, err
	}
	return Certify(p, sol)
}

// Certify quantises a solution and verifies it, mixing in the reference law
// until the mixture passes.
func Certify(p Problem, sol *Solution) (*Distribution, error) {
	K := p.shifts()
	ref := reference(p)
	var rsum float64
	for _, v := range ref {
		rsum += v
	}
	for i := range ref {
		ref[i] /= rsum
	}
	for _, mix := range []float64{0, 1e-6, 1e-4, 1e-3, 0.01, 0.03, 0.1, 0.3, 1} {
		q := make([]float64, len(sol.P))
		for j := range q {
			q[j] = (1-mix)*sol.P[j] + mix*ref[j]
		}
		w := Quantise(q)
		d, err := Verify(w, K, p.Epsilon, p.Delta)
		if errors.Is(err, ErrVerify) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Distribution{Problem: p, Weights: w, Delta: d, LPValue: sol.Value,
			Value: p.ExpectedLoss(Probabilities(w)), Mixed: mix, Solution: sol}, nil
	}
	return nil, fmt.Errorf("%w: no mixture with the reference law passed exact verification ; use a larger delta or dp_tlaplace", ErrVerify)
}
