package calibrate

import "math"

// Error bars. A released value is the exact value plus a linear combination
// of the statement's noises (a SUM is a centred sum plus its midpoint times
// a count); its interval is the released value plus or minus a half-width
// read off the exact law of that combination.

// Term is one noise of a linear combination: Coef times one draw of N's law.
type Term struct {
	N    Noisy
	Coef float64
}

// SD returns the standard deviation of sum_i Coef_i N_i.
func SD(terms ...Term) float64 {
	v := 0.0
	for _, t := range terms {
		v += t.Coef * t.Coef * t.N.Variance()
	}
	return math.Sqrt(v)
}

// HalfWidth returns h with P(|sum_i Coef_i N_i| <= h) >= conf for independent
// draws N_i of the statement's grid laws. For one term, two Gaussian terms or
// two Laplace terms it is the exact quantile of the continuous combination
// plus sum_i |Coef_i| g_i/2 (each grid draw is within half a grid step of its
// continuous law's draw), so the coverage is conf up to the grids' share,
// about 2^-15 of a scale; otherwise it splits 1 - conf equally among the
// terms (a union bound: conservative).
func HalfWidth(conf float64, terms ...Term) float64 {
	alpha := 1 - conf
	grid := 0.0
	var gauss, lap []Term
	for _, t := range terms {
		if t.Coef == 0 {
			continue
		}
		grid += math.Abs(t.Coef) * t.N.Grid() / 2
		if t.N.Law == Laplace {
			lap = append(lap, t)
		} else {
			gauss = append(gauss, t)
		}
	}
	switch {
	case len(lap) == 0 && len(gauss) == 0:
		return 0
	case len(lap) == 0:
		return SD(gauss...)*NormalQuantileUpper(alpha/2) + grid
	case len(gauss) == 0 && len(lap) == 1:
		// P(|Z| > h) = e^(-h/b).
		return math.Abs(lap[0].Coef)*lap[0].N.Lap.Scale*math.Log(1/alpha) + grid
	case len(gauss) == 0 && len(lap) == 2:
		a := math.Abs(lap[0].Coef) * lap[0].N.Lap.Scale
		b := math.Abs(lap[1].Coef) * lap[1].N.Lap.Scale
		return twoLaplaceQuantile(a, b, alpha) + grid
	}
	h := 0.0
	for _, t := range terms {
		if t.Coef != 0 {
			h += HalfWidth(1-alpha/float64(len(gauss)+len(lap)), t)
		}
	}
	return h
}

// TwoLaplaceTail returns P(|X + Y| > t), t >= 0, for independent Laplace X
// and Y of scales a and b. The characteristic function
// 1/((1 + a^2 w^2)(1 + b^2 w^2)) splits into a^2/(a^2 - b^2) times Laplace(a)'s
// less b^2/(a^2 - b^2) times Laplace(b)'s, so
// P(X + Y > t) = (a^2 e^(-t/a) - b^2 e^(-t/b)) / (2 (a^2 - b^2)); for a = b it
// is e^(-t/a) (2 + t/a)/4. Scales within 10^-3 of each other use the latter
// at the larger scale, which is heavier (conservative) and avoids the
// cancellation.
func TwoLaplaceTail(a, b, t float64) float64 {
	if a < b {
		a, b = b, a
	}
	if b == 0 {
		return math.Exp(-t / a)
	}
	if a-b <= 1e-3*a {
		return math.Exp(-t/a) * (2 + t/a) / 2
	}
	return (a*a*math.Exp(-t/a) - b*b*math.Exp(-t/b)) / (a*a - b*b)
}

// twoLaplaceQuantile returns the t with TwoLaplaceTail(a, b, t) = alpha (to
// a relative 1e-12, from above).
func twoLaplaceQuantile(a, b, alpha float64) float64 {
	lo, hi := 0.0, (a+b)*math.Log(2/alpha) // P(|X|+|Y| > hi) <= alpha
	for hi-lo > 1e-12*hi {
		m := (lo + hi) / 2
		if TwoLaplaceTail(a, b, m) > alpha {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}
