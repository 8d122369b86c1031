// Package dfs is dpsql's differentially private feature selection and
// per-row feature release: the DFS method of Shen, Wang, Sun and Shen (seeds
// 001/002/000, Algorithms 1 and 2) redone so that every step is private.
//
// # What differs from the paper, and why
//
// The published algorithm is not differentially private as written. This
// package departs from it in five places.
//
// Selection. The paper ranks features by exact class means; the ranking (and
// so the set of released columns) is a function of the data with unbounded
// sensitivity. Here [Select] computes, in one pass over the rows, class-wise
// sums of clipped rows, class counts and (for the t-score) class-wise sums of
// squares, adds Gaussian noise to them, and ranks the features from the noisy
// statistics only. The ranking and the choice of the top m are
// post-processing. The selection is [Params.MuSelect]-GDP under add/remove
// neighbours and is charged (see [Params.SelectMechanisms]).
//
// Clipping. The paper's noise scale uses N_max, the largest L1 norm in the
// data: a data-dependent sensitivity, which is not DP. Here every row is
// clipped to a public L2 bound: whole rows to [Params.C] for the selection,
// the m kept coordinates to [Params.CRelease] for the release. Sensitivities
// are computed from these bounds only.
//
// Calibration. The paper's scale 2 N_max ln(1/delta)/epsilon is not a valid
// calibration for all (epsilon, delta), even with a public bound in place of
// N_max: read as a standard deviation on a quantity of sensitivity 2 N_max it
// fails for large epsilon (the exact Gaussian trade-off gives delta(epsilon)
// above the target from epsilon ~ 6.1 at delta = 0.1, ~ 22.6 at delta = 1e-2,
// ~ 103 at delta = 1e-4); read as a variance, as Algorithm 1's N(0, .) writes
// it, it fails for small epsilon. Here noise is calibrated in Gaussian DP:
// noise sigma on a quantity of L2 sensitivity S is exactly (S/sigma)-GDP, with
// the noise grid's rounding added to S ([release.GaussianMu]); mu converts
// exactly to (epsilon, delta) with [accountant.Epsilon].
//
// Neighbours. A per-row release (one output row per input row) reveals the
// number of rows, so it is not DP at all under add/remove neighbours. It is DP
// under replace-one neighbours (n public): two clipped rows differ by at most
// 2 CRelease in L2, so noise sigma gives (2 CRelease/sigma)-GDP, exactly. The
// release's mechanism is recorded with Neighbours = "replace_one", its
// replace-one sensitivity 2 CRelease and that mu, which the ledger charges as
// stated: the factor 2 already is both add/remove steps of a replacement.
// How a scope accounts entries of both relations is written once, in
// docs/privacy-model.md, paragraph "One neighbour relation per scope".
//
// Labels. The paper releases labels in clear. Labels = "public" keeps that,
// as a documented assumption: the labels are known to the adversary and only
// the features are protected. Labels = "private" releases each label through
// K-ary randomized response, which is EpsLabels-DP per row under replace-one
// neighbours and therefore mu-GDP with mu = 2 Phi^-1(e^eps/(1+e^eps)).
//
// # Numerics
//
// The statistics are exact: a clipped row is truncated toward zero onto the
// integer grid C 2^-24 (truncation never increases a magnitude, so the
// quantised row still has norm <= C) and summed in int64, so the sums do not
// depend on summation order or floating-point round-off, and the noise is
// added in those integer units on the power-of-two noise grid of
// [release.Noise]. Per-row releases scale rows to a norm slightly below the
// bound so that float32 rounding cannot push them over it.
//
// # Refusals
//
// Every error is returned before any noise is drawn. The argument checks
// (shapes, m, classes, budgets) depend only on public parameters. Three
// checks look at the data: a NaN or infinite value, a label outside
// [0, Classes), and more than [MaxRows] rows (a capacity limit that keeps the
// integer sums exact in float64). The first two reject malformed tables, as
// dpsql's vector decoding does. An empty class is not refused: its noisy count
// is small, and classes whose noisy count is below one are left out of the
// score (post-processing), so no refusal depends on how many rows a class
// holds.
package dfs
