// Package pld is a rigorous privacy accountant built on privacy loss
// distributions (PLDs): every epsilon and delta it reports is an upper bound
// on the true figure, floating-point round-off included.
//
// A mechanism M is described, for neighbouring databases D and D' (D' = D
// minus one row; both directions are kept, "remove" (M(D), M(D')) and "add"
// (M(D'), M(D))), by the distribution of its privacy loss
// L = log(dP/dQ)(o), o ~ P (Meiser and Mohammadi 2018; Sommer, Meiser and
// Mohammadi 2019). Then delta(eps) = E[(1 - e^(eps - L))_+] plus the mass of
// L = +inf, and composition adds independent losses, so the PLD of a
// composition is the convolution of the PLDs (Koskela, Jälkö and Honkela
// 2020; Koskela, Jälkö, Prediger and Honkela 2021, who compute it by FFT).
//
// # Discretisation: connect the dots
//
// Each mechanism is discretised on the grid {k h} by the "connect the dots"
// construction of Doroshenko, Ghazi, Kamath, Kumar and Manurangsi ("Connect
// the Dots: Tighter Discrete Approximations of Privacy Loss Distributions",
// arXiv 2207.04380): from the exact hockey-stick curve delta(eps) at the grid
// points it builds the loss distribution of a discrete pair whose curve is
// the interpolation of those points linear in e^eps. delta is convex in e^eps
// (a supremum of functions affine in e^eps), so the interpolation lies above
// it for every real eps, negative ones included: the discrete pair dominates
// the mechanism. Unlike rounding every loss up, whose bias grows as
// steps * h/2, the error is second order in h; epsilon has four correct
// digits at h = 2^-10 and the default is h = 2^-13 (about 1.22e-4; intervals
// are powers of two so that every grid point is exact in floating point).
// The 1/(e^h - 1) factor of the construction amplifies evaluation errors of
// delta: every evaluation carries an error bound (tails in log space, Mills'
// ratio past -30 standard deviations where math.Erfc underflows) and the
// discrete tails are raised by the amplified bound, which only moves mass to
// larger losses. These bounds, like the FFT bounds below, are a priori
// first-order estimates with generous constants, not interval arithmetic.
//
// # What is stored, and why the figures are upper bounds
//
// Each direction is a non-negative measure A on the grid plus mass at +inf.
// The connect-the-dots measure does not dominate the true loss
// stochastically (it puts mass on both sides of it), so it does not
// integrate every non-decreasing function at least as much as the true loss
// does. What holds is domination of the hockey-stick curves: with
// f_eps(x) = (1 - e^(eps - x))_+ and f_eps(+inf) = 1,
//
//	delta_A(eps) = integral f_eps dA >= delta(eps)  for every real eps,
//
// delta the curve of the dominated pair (the mechanism, or the composition so
// far). This survives every operation the package performs: composition,
// because delta_(A*C)(eps) = integral delta_A(eps - y) dC(y) for any
// non-negative C, so A >= B in this sense gives A*C >= B*C (and A*C is the
// loss measure of the product of the dominating pairs); moving mass to
// larger losses, since f_eps is non-decreasing (the lower tail is merged into
// the lowest kept bin, the upper tail beyond a truncation point goes to +inf,
// never dropped; Config.Tail bounds each truncation); adding mass and
// clamping negative round-off to 0, since f_eps >= 0; scaling a measure up
// (direct convolutions charge their round-off so: every term is
// non-negative, so each computed bin is within a relative gamma_m of the
// exact one); charging a bound on the l1 norm of the floating-point error at
// +inf, since f_eps <= 1; and moving a measure to a coarser grid by connect
// the dots from its own curve (coarsened: the curve of any non-negative
// measure is convex in e^eps, so its interpolation lies above it). The FFT
// error bounds (see fftRelErr) are a priori, normwise and componentwise; the
// smaller is charged. Epsilon refuses to answer (ErrRoundoff) when the
// charged round-off exceeds delta/10.
//
// # Composition
//
// Convolutions use an FFT of 5-smooth length (2^a 3^b 5^c) with two real
// sequences packed per complex transform. Self-composition (SelfCompose)
// transforms once and raises every coefficient to the k-th power, on a
// window chosen from Chernoff bounds on both tails of the k-fold sum (its
// exact moment generating function): mass outside the window aliases into
// it — upwards for the lower tail, which is allowed; the upper tail's
// (bounded) mass is also charged at +inf. Powering multiplies a spectral
// coefficient's absolute error by up to t where |P_k| is close to 1, so those
// few coefficients are recomputed directly from 1 - P_k with relative
// accuracy: the round-off bound of a t-fold composition no longer grows
// with t (about 3e-12 at t = 50000 against 1.2e-8 before). When a few small
// direct convolutions suffice (binary powering), they are used instead, and
// nothing is charged at +inf. Heterogeneous composition (Compose) is exact
// linear convolution followed by truncation. Accumulate is the composition a
// running total (a ledger's scope) repeats once per entry: a bounded number
// of bins (the grid coarsened by connect the dots when needed), direct
// convolution for narrow entries (round-off relative to each bin, not
// absolute), tails trimmed at AccumulateTail; see accumulate.go for why each
// keeps the result an upper bound.
//
// # Mechanisms
//
// Gaussian (sensitivity, sigma), Poisson-subsampled Gaussian (rate q, noise
// multiplier sigma, both directions, exact hockey-stick formulas), Laplace
// (sensitivity, scale), truncated Laplace in closed form (TruncatedLaplace),
// any additive noise given as a probability vector on an integer grid
// (Discrete), and mixtures of uniform laws on equal intervals, pessimistic
// over every shift of up to a number of intervals (GridNoise). CalibrateSubsampledGaussian finds the
// noise multiplier for a target (epsilon, delta) by secant steps guided by the
// central limit theorem, then bisection if needed; GaussianEpsilon converts a
// mu-GDP target to epsilon at delta.
package pld
