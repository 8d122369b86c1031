// Package pipeline holds dpsql's releases as Apache Beam pipelines, for tables
// that outgrow one machine. The driver (dpsql-beam) plans a release from
// public parameters, charges it to the ledger in the SQLite file, and only
// then builds and runs the pipeline, which writes the noisy rows to a staging
// directory the driver imports into the release table.
//
// # Avg-Mix (dp_avgmix)
//
// [Avgmix] computes exactly the law of release/avgmix's Release for a Plan:
//
//	shards --read--> row blocks --clip, sample (secure stream)--> (block, partial sums)
//	   empty sums per block --flatten--> CombinePerKey(vector sum) --> (block, exact sums)
//	   --noise, divide by m (secure stream)--> records --group by part--> staging files
//
// Every row is clipped with avgmix's ClipRow and joins each output t
// independently with probability q (Plan.SampleRow, drawn from the stream of
// a release.Noise that each DoFn instance keys from crypto/rand in Setup,
// never from pipeline options). Its clipped feature and label rows are added, in
// float64, to the output's accumulator; the values are quantised so the sums
// are exact, and so they do not depend on how Beam splits, orders or merges
// them. Outputs travel in blocks of consecutive indices (DefaultBlockBytes,
// about 80 outputs of the Fashion-MNIST shape): the shuffle's key is the
// block and its value the dense sums of the block's outputs. The sampling
// DoFn keeps one accumulator per block for the whole bundle (up to
// CombineBytes) and emits them when the bundle ends, so Beam shuffles
// partial sums, not rows; the vector-sum CombineFn merges the partial sums of
// each block (and is lifted before the shuffle where the runner supports it).
// Keying by output (T = 60000 keys of 6 KB) made the runner's per-key and
// per-element bookkeeping the pipeline's main cost, and defeated the Go
// SDK's lifted-combine cache (2000 keys, random eviction); blocks fix both.
//
// Every block enters the combine once more with empty sums, so an output no
// row joined is still released (as pure noise), exactly as Release does. The
// finishing DoFn adds Gaussian noise on avgmix's grid with avgmix's scales
// (Plan.Finish) to a block's sums, divides by the fixed m, and emits the
// block's records as one element.
//
// For hierarchical sampling the class choices are drawn by the driver (in
// avgmix.NewPlan, before any data is read) and reach the sampling DoFn as a
// side input: a row of class c joins only the outputs that chose c, each with
// probability q.
//
// # Retries
//
// No DoFn has a side effect before the sink: the sampling and noise DoFns
// only emit. If a bundle fails and is retried, its outputs are discarded and
// drawn afresh, and the runner commits exactly one attempt, so a retried
// bundle cannot release twice. The sink writes each staging part whole from
// the grouped records (committed upstream, so a retried write writes the same
// bytes). The staging files hold only noisy rows.
//
// # What is public
//
// The pipeline never counts rows and never compares the number of rows with
// the public n the plan was made for: the inclusion rate q = m/n is fixed by
// the plan, and the output has exactly T rows whatever the data.
package pipeline
