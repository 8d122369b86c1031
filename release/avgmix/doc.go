// Package avgmix is dpsql's NeuroMixGDP mechanism: it releases T noisy
// averages of random subsets of a table of (feature, label) rows, in pure Go
// with no SQL.
//
// The method is Avg-Mix from Li, Cao and Yao, "NeuroMixGDP: a
// neural-collapse-inspired random mixup for private data release" (arXiv
// 2202.06467): Algorithm 1 with Poisson sampling, or with the
// Hierarchical Sampling of Procedure 2; the noise scales of Theorem 3.1; the
// mu-GDP accounting of Appendices D and E; and the default mixup degree
// m* = nu* n / sqrt(T), nu* = argmax_nu nu log(1 + mu^2/nu^2), of Section 3.2.
//
// # The mechanism
//
// Every feature row x_i is clipped to L2 norm Cx and every label row y_i to Cy.
// For t = 1..T, a subset I_t is drawn (each row independently with probability
// q = m/n under Poisson sampling), and the released row is
//
//	x~_t = (1/m) sum_{i in I_t} x_i + N(0, (Cx sigma_x / m)^2 I_d)
//	y~_t = (1/m) sum_{i in I_t} y_i + N(0, (Cy sigma_y / m)^2 I_K)
//
// The weight is 1/m, fixed, not 1/|I_t|: adding or removing one row moves the
// pair by at most (Cx/m, Cy/m), so in units of the noise one step is a
// Gaussian mechanism with noise multiplier sigma = 1/sqrt(1/sigma_x^2 +
// 1/sigma_y^2), and the release is T compositions of a Poisson-subsampled
// Gaussian with rate q and multiplier sigma (NeuroMixGDP (Li, Cao, Yao, arXiv:2202.06467), Theorem E.1). The
// balance lambda = sigma_y/sigma_x of Theorem 3.1 splits the budget:
// sigma_x = sigma sqrt(1 + 1/lambda^2), sigma_y = sigma sqrt(1 + lambda^2).
// n is a public planning figure, never the data's row count: q = m/n is fixed
// by the plan and [Release] samples every row it is given at that q, whatever
// the actual number of rows. Poisson sampling at a fixed public q with the
// fixed divisor m is add/remove-DP for any table size, so a wrong n costs
// accuracy (subsets of about q times the true count instead of m), never
// privacy. dpsql takes n from the caller (asserted, recorded in the ledger) or
// from a charged noisy count; the paper treats the true n as public, which
// under add/remove neighbours is not DP (a release of exactly n rows reveals
// whether a person is present).
//
// # Use
//
// [NewPlan] validates the parameters, chooses m and calibrates the noise, and
// returns a [Plan] whose Mechanism field is the mechanism.Mechanism to charge.
// Charge it, then call [Release], which clips the data, draws the subsets and
// the noise, and streams the T rows to a callback in order.
//
// # Calibration
//
// The target noise multiplier comes from Params.Calibrate(q, steps) when it is
// set (dpsql passes the rigorous PLD accountant there), otherwise from the
// central-limit formula of NeuroMixGDP (arXiv:2202.06467) Theorem E.2 inverted,
// sigma = 1/sqrt(ln(1 + mu^2/(q^2 T))). Noise is then drawn by
// [release.Noise.AddGaussian], which rounds to a power-of-two grid and so
// inflates the sensitivity by g*sqrt(dim) ([release.GaussianMu]). The feature
// and label scales are each set with [release.GaussianSigma] so that their
// GaussianMu figures, including that slack, stay within lambda/(sigma
// sqrt(1+lambda^2)) and 1/(sigma sqrt(1+lambda^2)); the effective multiplier
// 1/sqrt(mu_x^2 + mu_y^2) is then at least the target, and it is that
// effective multiplier that the plan records and charges. No overshoot is
// accepted anywhere. For every fixed subset, one step is then dominated by
// the pair N(0,1), N(1/sigma_eff,1); by the dominating-pair theorem for
// Poisson subsampling under add/remove neighbours (Zhu, Dong and Wang 2022)
// the subsampled step is dominated by the subsampled Gaussian's pair, which is
// what mechanism.KindSubsampledGaussian with Q, Sigma, Steps prices.
//
// # Exact arithmetic
//
// Clipped rows are stored as multiples of h = 2^(floor(log2 C) - 23) (at most
// 2^24 of them, so they are exact float32 values) rounded toward zero, which
// never increases a norm; their sums are formed in float64, where they are
// exact for up to 2^29 rows. Noise is added to the exact sum with scale
// C sigma_x (whose sensitivity is exactly C), and the division by m comes
// after the noise, as post-processing. So floating-point rounding never adds
// to the sensitivity, and the result does not depend on the order of the
// additions (the AVX2 kernel and the portable one agree bit for bit).
//
// # Hierarchical sampling
//
// With Sampling "hierarchical", each output first draws a set of classes, each
// class independently with probability P, then includes each row of a chosen
// class with probability q = m/(n P) (Procedure 2 with p_k = P, so q_k = q for
// every class, and class sizes play no part: no per-class count n_k is used,
// public or noisy, and a class's pool is sampled at q whatever its size).
// Class choices are drawn by
// [NewPlan], before any data is read and independently of it, and are kept in
// the plan. The released labels reveal which classes an output mixed, so dpsql
// accounts as if the choices were published: conditional on them, a record of
// class c is touched only by the T_c outputs that chose c, each including it
// with probability q, and is unaffected by the others. That is T_c compositions
// of a Poisson-subsampled Gaussian with rate q; as the record's class is its
// own and may be any, the plan charges steps = max_c T_c. Releasing the choices
// themselves would be post-processing of a data-independent draw, so the
// charge covers the actual release, whose class choices are hidden behind the
// noise. The class of a row is the index of its largest label coordinate
// (first on ties), a function of that row alone.
//
// # Where dpsql departs from the paper and its code
//
//   - The paper's published code releases n rows whatever T the accounting
//     used; dpsql releases exactly the T rows it charged for.
//   - The published code accepts a 1% overshoot of mu in its noise search;
//     dpsql's noise never exceeds the calibrated target (see above), and the
//     grid slack of the secure sampler is accounted for.
//   - The paper accounts hierarchical sampling like uniform sampling at rate
//     m/n over T steps (Proposition E.3), which ignores that the labels reveal
//     the chosen classes; dpsql charges the per-class composition above, rate
//     m/(nP) over max_c T_c steps, and shrinks the default m by sqrt(P) to
//     keep the same noise multiplier.
//   - The average always has weight 1/m, so the L2 sensitivity of one output
//     is Cx/m for x and Cy/m for y; the realised subset size is never used.
//   - Sampling uses geometric skips: each row of the pool is included
//     independently with probability q, the subset comes out sorted, and the
//     work is proportional to its size. The gaps are drawn by inversion in
//     float64 from the secure stream ([release.Noise.Rand]), so the inclusion
//     law matches Bernoulli(q) up to double-precision rounding, not exactly.
//
// # Data handling and speed
//
// [Release] clips and quantises Data.X and Data.Y in place (the caller's
// slices are overwritten), so that memory stays at the input plus a few
// batches: each of the two workers keeps the float64 sums of one batch (at
// most 256 outputs and 512 KiB) and two float32 batches of output rows.
// While it runs, each feature value x = u h is stored as its int32 units u
// (|u| < 2^24, h the power-of-two step) in the same four bytes, and turned
// back into the float x when Release returns. Each worker draws the subsets
// of its batch, sums the units of the rows eight at a time in int32 (an
// AVX-512 or AVX2 kernel with software prefetch on amd64, plain Go
// elsewhere), moves the sums to float64 before 127 rows could overflow them
// and scales them by h: all exact, so every kernel gives the float64 sums of
// the values bit for bit. It then adds the noise to the whole batch in two
// calls and hands the batch over; rows are emitted in order from the calling
// goroutine. The gather of m random rows per output is bound by memory
// bandwidth and the noise by the sampler; see bench_test.go for figures.
package avgmix
