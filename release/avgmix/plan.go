package avgmix

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// Sampling schemes.
const (
	Poisson      = "poisson"      // Algorithm 1: each row with probability m/n
	Hierarchical = "hierarchical" // Procedure 2: classes with probability P, then rows with m/(nP)
)

// Limits that keep the arithmetic exact (see the package documentation).
const (
	MaxRows = 1<<29 - 1 // rows in the table: float64 sums of 2^24-step values stay exact
	MaxDim  = 1 << 22   // coordinates per feature or label row: keeps the clipping margin sound
)

// clipMargin is the relative margin the clipping keeps below C, so that the
// rounding of the norm computation (at most (dim+6) ulps) cannot push a
// clipped row past C.
const clipMargin = 0x1p-30

// minNoise is the smallest noise scale a plan may use; the grid step stays a
// normal float64 far above it.
const minNoise = 0x1p-900

// maxClassWords bounds the memory of the stored class choices (8 bytes each).
const maxClassWords = 1 << 27

// Params describes a release. Zero values of M, Lambda, Cx, Cy and Sampling
// select the defaults.
type Params struct {
	T        int     // rows to release, >= 1
	M        int     // mixup degree; 0 = the default m* (see DefaultM)
	Mu       float64 // GDP budget of the whole release: calibrates the noise and the default m
	Lambda   float64 // feature/label noise balance sigma_y/sigma_x of Theorem 3.1; 0 = 1
	Cx, Cy   float64 // L2 clip bounds of feature and label rows; 0 = 1
	Sampling string  // Poisson ("" too) or Hierarchical
	P        float64 // class rate of hierarchical sampling, in (0, 1]; must be 0 for Poisson

	// Calibrate, if set, returns the noise multiplier sigma that the budget
	// allows for a Poisson-subsampled Gaussian of rate q over steps
	// compositions (dpsql passes its rigorous accountant, e.g.
	// func(q float64, steps int) (float64, error) {
	//     return accountant.CalibrateSubsampledSigma(q, steps, eps, delta) }).
	// If nil, the central-limit value
	// sigma = 1/sqrt(ln(1 + Mu^2/(q^2 steps))) is used. With a Calibrate,
	// Mu only chooses the default m.
	Calibrate func(q float64, steps int) (sigma float64, err error) `json:"-"`
}

// Plan is a validated, calibrated release. Release uses it as is; do not
// modify it (Release re-checks that the noise scales still cover the
// Mechanism to be charged).
type Plan struct {
	N, D, K  int    // public planning size n (not the rows read), feature and label dimensions
	T, M     int    // rows released, mixup degree
	Sampling string // Poisson or Hierarchical
	P        float64
	Cx, Cy   float64
	Lambda   float64

	// Q is the probability that an output includes a given row of its pool:
	// m/n for Poisson, m/(nP) for hierarchical sampling (the pool being the
	// rows of the output's chosen classes).
	Q float64
	// Steps is the number of subsampled-Gaussian compositions a single row
	// can take part in: T for Poisson, max over classes of T_k for
	// hierarchical sampling.
	Steps int
	// ClassSteps[k] = T_k is the number of outputs that chose class k
	// (hierarchical sampling only).
	ClassSteps []int

	// SigmaTarget is the noise multiplier returned by the calibration.
	SigmaTarget float64
	// SigmaX and SigmaY are the paper's sigma_x, sigma_y: the noise on an
	// output's average is Cx*SigmaX/M per feature coordinate and Cy*SigmaY/M
	// per label coordinate. They include the grid slack.
	SigmaX, SigmaY float64
	// Sigma is the effective noise multiplier of one step including the
	// grid slack, 1/sqrt(mu_x^2 + mu_y^2) with mu_x = GaussianMu(Cx,
	// Cx*SigmaX, D) and mu_y likewise; Sigma >= SigmaTarget.
	Sigma float64

	// Mechanism is what to charge: a subsampled Gaussian with Q, SigmaTarget
	// (the certified multiplier; the noise applied, Sigma, is at least that),
	// Steps.
	Mechanism mechanism.Mechanism
	// CLTMu is the central-limit mu-GDP figure of Mechanism,
	// Q sqrt(Steps) sqrt(e^(1/Sigma^2) - 1) (NeuroMixGDP (Li, Cao, Yao, arXiv:2202.06467), Theorem E.2): asymptotic
	// only; budgets should be decided on a rigorous figure.
	CLTMu float64

	words   int      // uint64 words per output in classes
	classes []uint64 // hierarchical: T rows of words; bit k of row t set iff output t chose class k
}

// NuStar returns nu* = argmax over nu > 0 of nu ln(1 + mu^2/nu^2) (NeuroMixGDP (arXiv:2202.06467),
// Section 3.2), found by golden-section search. The objective is unimodal:
// 0 at both ends, with one stationary point.
func NuStar(mu float64) (float64, error) {
	if !(mu > 0) || math.IsInf(mu, 0) {
		return 0, fmt.Errorf("mu must be a positive finite number, got %v", mu)
	}
	f := func(nu float64) float64 { return nu * math.Log1p(mu*mu/(nu*nu)) }
	a, b := 1e-3*mu, 10*mu // nu*/mu is about 0.505
	invPhi := (math.Sqrt(5) - 1) / 2
	c, d := b-invPhi*(b-a), a+invPhi*(b-a)
	fc, fd := f(c), f(d)
	for i := 0; i < 200 && b-a > 1e-15*mu; i++ {
		if fc > fd {
			b, d, fd = d, c, fc
			c = b - invPhi*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + invPhi*(b-a)
			fd = f(d)
		}
	}
	return (a + b) / 2, nil
}

// DefaultM returns the default mixup degree: round(nu* n / sqrt(T)) for
// Poisson sampling (NeuroMixGDP (arXiv:2202.06467), Section 3.2), and round(nu* n sqrt(P) / sqrt(T))
// for hierarchical sampling, where the per-class accounting (rate m/(nP) over
// about P*T steps) makes m*sqrt(T)/(n sqrt(P)) play the role of nu. The result
// is clamped to [1, n] (Poisson) or [1, floor(nP)] (hierarchical), the range
// that keeps the inclusion rate at most 1.
func DefaultM(n, T int, mu float64, sampling string, p float64) (int, error) {
	nu, err := NuStar(mu)
	if err != nil {
		return 0, err
	}
	if n < 1 || T < 1 {
		return 0, fmt.Errorf("n and T must be >= 1, got %d and %d", n, T)
	}
	scale, hi := 1.0, float64(n)
	switch sampling {
	case "", Poisson:
	case Hierarchical:
		if !(p > 0 && p <= 1) {
			return 0, fmt.Errorf("hierarchical sampling needs a class rate p in (0, 1], got %v", p)
		}
		scale, hi = math.Sqrt(p), math.Floor(float64(n)*p)
	default:
		return 0, fmt.Errorf("unknown sampling %q (want %q or %q)", sampling, Poisson, Hierarchical)
	}
	m := math.Round(nu * float64(n) * scale / math.Sqrt(float64(T)))
	m = math.Max(1, math.Min(m, hi))
	return int(m), nil
}

// CLTSigma inverts the central-limit formula: the noise multiplier at which
// steps compositions of a Poisson-subsampled Gaussian with rate q have
// asymptotic GDP mu, 1/sqrt(ln(1 + mu^2/(q^2 steps))) (Theorem 3.1 of NeuroMixGDP (arXiv:2202.06467)
// with 1/sigma^2 = 1/sigma_x^2 + 1/sigma_y^2).
func CLTSigma(q float64, steps int, mu float64) (float64, error) {
	if !(q > 0 && q <= 1) || steps < 1 || !(mu > 0) || math.IsInf(mu, 0) {
		return 0, fmt.Errorf("CLT calibration needs q in (0,1], steps >= 1, mu > 0 (got %v, %d, %v)", q, steps, mu)
	}
	l := math.Log1p(mu * mu / (q * q * float64(steps)))
	if !(l > 0) {
		return 0, fmt.Errorf("CLT calibration underflowed for q = %v, steps = %d, mu = %v", q, steps, mu)
	}
	return 1 / math.Sqrt(l), nil
}

// CLTMu is the central-limit GDP figure q sqrt(steps) sqrt(e^(1/sigma^2) - 1)
// of NeuroMixGDP (arXiv:2202.06467), Theorem E.2.
func CLTMu(q float64, steps int, sigma float64) float64 {
	return q * math.Sqrt(float64(steps)) * math.Sqrt(math.Expm1(1/(sigma*sigma)))
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// defaultPos returns def for 0 and checks that x is positive and finite.
func defaultPos(name string, x, def float64) (float64, error) {
	if x == 0 {
		return def, nil
	}
	if !(x > 0) || !finite(x) {
		return 0, fmt.Errorf("%s must be positive and finite (or 0 for the default), got %v", name, x)
	}
	return x, nil
}

// NewPlan validates p for a table of n rows with d feature and k label
// coordinates, chooses m if p.M is 0, calibrates the noise and describes the
// mechanism to charge. n is the public planning figure (see the package
// documentation), not the number of rows Release will read; nothing in the
// plan depends on that number. For hierarchical sampling it
// also draws every output's class choices from noise (which it may be nil for
// Poisson sampling); they are data-independent and fix the charge.
func NewPlan(noise *release.Noise, n, d, k int, p Params) (*Plan, error) {
	if n < 1 || n > MaxRows {
		return nil, fmt.Errorf("avgmix: n must lie in [1, %d], got %d", MaxRows, n)
	}
	if d < 1 || d > MaxDim || k < 1 || k > MaxDim {
		return nil, fmt.Errorf("avgmix: feature and label dimensions must lie in [1, %d], got %d and %d", MaxDim, d, k)
	}
	if p.T < 1 || p.T > math.MaxInt32 {
		return nil, fmt.Errorf("avgmix: T must lie in [1, %d], got %d", math.MaxInt32, p.T)
	}
	if !(p.Mu > 0) || !finite(p.Mu) {
		return nil, fmt.Errorf("avgmix: mu must be a positive finite number, got %v", p.Mu)
	}
	pl := &Plan{N: n, D: d, K: k, T: p.T, Sampling: p.Sampling}
	var err error
	if pl.Lambda, err = defaultPos("lambda", p.Lambda, 1); err != nil {
		return nil, fmt.Errorf("avgmix: %w", err)
	}
	if pl.Cx, err = defaultPos("cx", p.Cx, 1); err != nil {
		return nil, fmt.Errorf("avgmix: %w", err)
	}
	if pl.Cy, err = defaultPos("cy", p.Cy, 1); err != nil {
		return nil, fmt.Errorf("avgmix: %w", err)
	}
	for _, c := range []float64{pl.Cx, pl.Cy} {
		if c < 0x1p-100 || c > 0x1p100 {
			return nil, fmt.Errorf("avgmix: clip bounds must lie in [2^-100, 2^100], got %v", c)
		}
	}
	switch p.Sampling {
	case "", Poisson:
		pl.Sampling = Poisson
		if p.P != 0 {
			return nil, fmt.Errorf("avgmix: class rate p = %v is only used with %s sampling", p.P, Hierarchical)
		}
	case Hierarchical:
		if !(p.P > 0 && p.P <= 1) {
			return nil, fmt.Errorf("avgmix: hierarchical sampling needs a class rate p in (0, 1], got %v", p.P)
		}
		if noise == nil {
			return nil, errors.New("avgmix: hierarchical sampling draws its class choices in NewPlan and needs a Noise")
		}
		pl.P = p.P
	default:
		return nil, fmt.Errorf("avgmix: unknown sampling %q (want %q or %q)", p.Sampling, Poisson, Hierarchical)
	}
	switch {
	case p.M < 0:
		return nil, fmt.Errorf("avgmix: m must be >= 1 (or 0 for the default), got %d", p.M)
	case p.M == 0:
		if pl.M, err = DefaultM(n, p.T, p.Mu, pl.Sampling, pl.P); err != nil {
			return nil, fmt.Errorf("avgmix: %w", err)
		}
	case p.M > n:
		return nil, fmt.Errorf("avgmix: m = %d exceeds n = %d", p.M, n)
	default:
		pl.M = p.M
	}

	// Inclusion rate and number of steps.
	if pl.Sampling == Poisson {
		pl.Q = float64(pl.M) / float64(n)
		pl.Steps = p.T
	} else {
		pl.Q = float64(pl.M) / (float64(n) * pl.P)
		if !(pl.Q <= 1) {
			return nil, fmt.Errorf("avgmix: per-class rate q_k = m/(n p) = %d/(%d*%v) = %.4g exceeds 1; lower m or raise p", pl.M, n, pl.P, pl.Q)
		}
		if p.T*((k+63)/64) > maxClassWords {
			return nil, fmt.Errorf("avgmix: T*K = %d*%d class choices are too many to store", p.T, k)
		}
		pl.drawClasses(noise)
		for _, tk := range pl.ClassSteps {
			pl.Steps = max(pl.Steps, tk)
		}
		pl.Steps = max(pl.Steps, 1) // no class chosen anywhere: pure noise, charge one step
	}

	// Target multiplier.
	if p.Calibrate != nil {
		pl.SigmaTarget, err = p.Calibrate(pl.Q, pl.Steps)
		if err != nil {
			return nil, fmt.Errorf("avgmix: calibration failed: %w", err)
		}
	} else if pl.SigmaTarget, err = CLTSigma(pl.Q, pl.Steps, p.Mu); err != nil {
		return nil, fmt.Errorf("avgmix: %w", err)
	}
	if !(pl.SigmaTarget > 0) || !finite(pl.SigmaTarget) {
		return nil, fmt.Errorf("avgmix: calibration returned an invalid noise multiplier %v", pl.SigmaTarget)
	}

	// Split 1/sigma^2 = 1/sigma_x^2 + 1/sigma_y^2 by lambda = sigma_y/sigma_x,
	// then meet each part including the grid slack. The factor 1 - 2^-40
	// absorbs the rounding of these few operations, so that the effective
	// multiplier is never below the target.
	r := math.Sqrt(1 + pl.Lambda*pl.Lambda)
	muX := pl.Lambda / (pl.SigmaTarget * r) * (1 - 0x1p-40)
	muY := 1 / (pl.SigmaTarget * r) * (1 - 0x1p-40)
	noiseX, err := release.GaussianSigma(pl.Cx, muX, d)
	if err != nil {
		return nil, fmt.Errorf("avgmix: feature noise: %w", err)
	}
	noiseY, err := release.GaussianSigma(pl.Cy, muY, k)
	if err != nil {
		return nil, fmt.Errorf("avgmix: label noise: %w", err)
	}
	if noiseX < minNoise || noiseY < minNoise || !finite(noiseX) || !finite(noiseY) {
		return nil, fmt.Errorf("avgmix: noise scales %g, %g are out of range", noiseX, noiseY)
	}
	pl.SigmaX, pl.SigmaY = noiseX/pl.Cx, noiseY/pl.Cy
	pl.Sigma = pl.effectiveSigma()
	if !(pl.Sigma >= pl.SigmaTarget) {
		return nil, fmt.Errorf("avgmix: internal error: effective noise multiplier %v below target %v", pl.Sigma, pl.SigmaTarget)
	}
	// Charge the multiplier the calibration certified: the noise applied
	// (Sigma) is at least as large, and more noise is post-processing.
	pl.Mechanism = mechanism.Mechanism{
		Kind:  mechanism.KindSubsampledGaussian,
		Q:     pl.Q,
		Sigma: pl.SigmaTarget,
		Steps: pl.Steps,
	}
	if err := pl.Mechanism.Validate(); err != nil {
		return nil, fmt.Errorf("avgmix: internal error: %w", err)
	}
	pl.CLTMu = pl.Mechanism.GDPMu()
	return pl, nil
}

// noiseX and noiseY are the noise scales applied to the exact sums.
func (pl *Plan) noiseX() float64 { return pl.Cx * pl.SigmaX }
func (pl *Plan) noiseY() float64 { return pl.Cy * pl.SigmaY }

// effectiveSigma is 1/sqrt(mu_x^2 + mu_y^2): one step releases the sums
// (sensitivities Cx and Cy, exact arithmetic) with noise noiseX and noiseY on
// their grids, each GaussianMu-GDP, and GDP composes exactly.
func (pl *Plan) effectiveSigma() float64 {
	mx := release.GaussianMu(pl.Cx, pl.noiseX(), pl.D)
	my := release.GaussianMu(pl.Cy, pl.noiseY(), pl.K)
	return 1 / math.Hypot(mx, my)
}

// check verifies that the plan still describes a release its Mechanism covers.
func (pl *Plan) check() error {
	if pl == nil {
		return errors.New("avgmix: nil plan")
	}
	m := pl.Mechanism
	if err := m.Validate(); err != nil {
		return fmt.Errorf("avgmix: plan: %w", err)
	}
	if m.Kind != mechanism.KindSubsampledGaussian || m.Neighbours == mechanism.ReplaceOne {
		return errors.New("avgmix: plan: mechanism is not an add/remove subsampled Gaussian")
	}
	if pl.N < 1 || pl.N > MaxRows || pl.D < 1 || pl.D > MaxDim || pl.K < 1 || pl.K > MaxDim || pl.T < 1 || pl.M < 1 || pl.M > pl.N {
		return errors.New("avgmix: plan: sizes out of range (use NewPlan)")
	}
	if pl.Cx < 0x1p-100 || pl.Cx > 0x1p100 || pl.Cy < 0x1p-100 || pl.Cy > 0x1p100 {
		return errors.New("avgmix: plan: clip bounds out of range (use NewPlan)")
	}
	var q float64
	switch pl.Sampling {
	case Poisson:
		q = float64(pl.M) / float64(pl.N)
		if m.Steps < pl.T {
			return fmt.Errorf("avgmix: plan: charges %d steps for %d outputs", m.Steps, pl.T)
		}
	case Hierarchical:
		q = float64(pl.M) / (float64(pl.N) * pl.P)
		if pl.words != (pl.K+63)/64 || len(pl.classes) != pl.T*pl.words || len(pl.ClassSteps) != pl.K {
			return errors.New("avgmix: plan: class choices missing (use NewPlan)")
		}
		for k, c := range pl.classCounts() {
			if c > m.Steps {
				return fmt.Errorf("avgmix: plan: class %d is mixed in more outputs than the %d steps charged", k, m.Steps)
			}
		}
	default:
		return fmt.Errorf("avgmix: plan: unknown sampling %q", pl.Sampling)
	}
	if q != pl.Q || m.Q < q || !(q <= 1) {
		return fmt.Errorf("avgmix: plan: rate %v does not match m, n, p (%v) or the charged rate %v", pl.Q, q, m.Q)
	}
	if !(pl.noiseX() >= minNoise) || !(pl.noiseY() >= minNoise) || !finite(pl.noiseX()) || !finite(pl.noiseY()) {
		return errors.New("avgmix: plan: noise scales out of range")
	}
	if s := pl.effectiveSigma(); !(s >= m.Sigma) {
		return fmt.Errorf("avgmix: plan: noise scales give multiplier %v, below the charged %v", s, m.Sigma)
	}
	return nil
}

// drawClasses draws, for every output, each class independently with
// probability P (Procedure 2), by geometric skips over the T*K choices, and
// counts T_k.
func (pl *Plan) drawClasses(noise *release.Noise) {
	pl.words = (pl.K + 63) / 64
	pl.classes = make([]uint64, pl.T*pl.words)
	pl.ClassSteps = make([]int, pl.K)
	total := pl.T * pl.K
	sk := newSkipper(pl.P)
	r := noise.Rand()
	for pos := sk.next(r, -1, total); pos < total; pos = sk.next(r, pos, total) {
		t, k := pos/pl.K, pos%pl.K
		pl.classes[t*pl.words+k/64] |= 1 << (k % 64)
		pl.ClassSteps[k]++
	}
}

// chose reports whether output t mixes class k (hierarchical sampling).
func (pl *Plan) chose(t, k int) bool {
	return pl.classes[t*pl.words+k/64]>>(k%64)&1 != 0
}

// classCounts recounts every T_k from the stored choices, in one pass.
func (pl *Plan) classCounts() []int {
	c := make([]int, pl.K)
	for t := 0; t < pl.T; t++ {
		forEachClass(pl.classesOf(t), func(k int) { c[k]++ })
	}
	return c
}

// classesOf returns the words of output t's class set.
func (pl *Plan) classesOf(t int) []uint64 {
	return pl.classes[t*pl.words : (t+1)*pl.words]
}

// forEachClass calls f for each class chosen by output t, in increasing order.
func forEachClass(words []uint64, f func(k int)) {
	for w, x := range words {
		for x != 0 {
			f(w*64 + bits.TrailingZeros64(x))
			x &= x - 1
		}
	}
}

// Quote prices the plan. The charged mechanism is the plan's subsampled
// Gaussian, or, when prior is not nil (a pre-computation charged with it,
// dp_avgmix's noisy row count), the composite of prior and it; price
// certifies it at the scope's delta. rec holds the caller's fields of the
// params record (into, n, n_source, targets, the count); Quote fills in the
// plan's. The samplers' total-variation bound covers the T (D + K) noisy
// coordinates, and prior's one coordinate.
func (pl *Plan) Quote(prior *mechanism.Mechanism, rec mechanism.Avgmix, delta float64, price mechanism.Pricer) (mechanism.Quote, error) {
	if err := pl.check(); err != nil {
		return mechanism.Quote{}, err
	}
	m := pl.Mechanism
	coords := pl.T * (pl.D + pl.K)
	if prior != nil {
		var err error
		if m, err = mechanism.Composite(*prior, pl.Mechanism); err != nil {
			return mechanism.Quote{}, fmt.Errorf("avgmix: %w", err)
		}
		coords++
	}
	rec.D, rec.K, rec.T, rec.M = pl.D, pl.K, pl.T, pl.M
	rec.Sampling, rec.Lambda, rec.Cx, rec.Cy = pl.Sampling, pl.Lambda, pl.Cx, pl.Cy
	rec.SigmaX, rec.SigmaY, rec.SigmaApplied = pl.SigmaX, pl.SigmaY, pl.Sigma
	rec.MuCLT = m.GDPMu()
	rec.P, rec.ClassSteps = 0, nil
	if pl.Sampling == Hierarchical {
		rec.P, rec.ClassSteps = pl.P, pl.ClassSteps
	}
	return mechanism.NewQuote(m, delta, price, release.NoiseTVOf(coords), rec)
}
