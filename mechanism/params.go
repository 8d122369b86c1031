package mechanism

// Params records: what a release records in its ledger row beside the
// mechanism, one typed record per release, with the JSON keys the row
// carries. docs/ledger.md ("Params records") documents every field. A record's
// keys never name a mechanism field (the accountant refuses a row whose
// params would re-account differently).

// Where dp_avgmix's n comes from.
const (
	NAsserted   = "asserted"    // option "n": a public figure the caller asserts
	NNoisyCount = "noisy_count" // a charged noisy count of the rows
)

// Avgmix is the params record of a dp_avgmix release.
type Avgmix struct {
	Into          string   `json:"into"`                  // the release table
	N             int      `json:"n"`                     // the public (asserted or noisy) number of rows
	NSource       string   `json:"n_source"`              // NAsserted or NNoisyCount
	D             int      `json:"d"`                     // feature dimension
	K             int      `json:"K"`                     // label dimension (classes)
	T             int      `json:"T"`                     // rows released
	M             int      `json:"m"`                     // mixup degree
	Sampling      string   `json:"sampling"`              // "poisson" or "hierarchical"
	Lambda        float64  `json:"lambda"`                // label/feature noise balance
	Cx            float64  `json:"cx"`                    // feature clip bound (L2)
	Cy            float64  `json:"cy"`                    // label clip bound (L2)
	SigmaX        float64  `json:"sigma_x"`               // feature noise multiplier applied
	SigmaY        float64  `json:"sigma_y"`               // label noise multiplier applied
	SigmaApplied  float64  `json:"sigma_applied"`         // effective multiplier applied (>= the charged sigma)
	MuCLT         float64  `json:"mu_clt"`                // central-limit mu of the charged mechanism (shown, never decides)
	TargetEpsilon float64  `json:"target_epsilon"`        // the epsilon the release was calibrated to
	TargetDelta   float64  `json:"target_delta"`          // at this delta
	NNoisy        *float64 `json:"n_noisy,omitempty"`     // the noisy count (n_source noisy_count)
	MuN           float64  `json:"mu_n,omitempty"`        // the count's mu (n_source noisy_count)
	P             float64  `json:"p,omitempty"`           // class rate (hierarchical sampling)
	ClassSteps    []int    `json:"class_steps,omitempty"` // outputs per class (hierarchical sampling)
}

// AvgmixCount is the params record of a dp_avgmix noisy row count charged on
// its own, because the release that was to follow it failed or was refused.
type AvgmixCount struct {
	Into           string  `json:"into"`
	NSource        string  `json:"n_source"` // always NNoisyCount
	NNoisy         float64 `json:"n_noisy"`
	MuN            float64 `json:"mu_n"`
	ReleaseRefused string  `json:"release_refused"` // why the release did not follow
}

// SelectTopm is the params record of a dp_select_topm release.
type SelectTopm struct {
	Into               string                `json:"into"`
	N                  int                   `json:"n"`        // rows read (public under replace-one neighbours)
	NPublic            bool                  `json:"n_public"` // always true
	D                  int                   `json:"d"`
	M                  int                   `json:"m"` // features kept
	Classes            int                   `json:"classes"`
	Score              string                `json:"score"` // "distance" or "t"
	C                  float64               `json:"c"`     // selection clip bound (L2)
	CRelease           float64               `json:"c_release"`
	Labels             string                `json:"labels"` // "private" or "public"
	MuSelect           float64               `json:"mu_select"`
	MuSelectRequested  float64               `json:"mu_select_requested"`
	MuRelease          float64               `json:"mu_release"`
	MuReleaseRequested float64               `json:"mu_release_requested"`
	MuLabels           float64               `json:"mu_labels"`
	SigmaRelease       float64               `json:"sigma_release"`
	EpsLabels          float64               `json:"eps_labels,omitempty"`
	Components         []SelectTopmComponent `json:"components"`
	Accounting         string                `json:"accounting"`   // how the parts compose into the one charged Gaussian
	SourceRowid        string                `json:"source_rowid"` // always "rowid"
	Order              string                `json:"order"`        // always "source_rowid"
	Features           string                `json:"features"`     // source columns
	Label              string                `json:"label"`
	Indices            []int                 `json:"indices,omitempty"` // the features chosen (recorded after selection)
	Scores             []float64             `json:"scores,omitempty"`
}

// SelectTopmComponent is one part of a dp_select_topm charge: its mechanism
// as stated, with its part name and its replace-one mu.
type SelectTopmComponent struct {
	Mechanism
	Part         string  `json:"part"`
	MuReplaceOne float64 `json:"mu_replace_one"`
}

// SelectTopmChoice is what a dp_select_topm release adds to its row once the
// features are chosen (inside the charge's transaction): the same keys as
// SelectTopm's Indices and Scores.
type SelectTopmChoice struct {
	Indices []int     `json:"indices"` // the features chosen, in the order released
	Scores  []float64 `json:"scores"`  // their noisy scores
}

// Gaussian is the params record of dp_gaussian (scalar or vector; mu form,
// or the (epsilon, delta) form that converts to mu by the exact
// analytic-Gaussian relation).
type Gaussian struct {
	Dim              int     `json:"dim"`                         // coordinates noised: 1 for a number, d for a vector
	Grid             float64 `json:"grid"`                        // the sampler's grid step (a power of two)
	NoiseTV          float64 `json:"noise_tv"`                    // the sampler's total-variation bound over Dim draws, paid from delta
	EpsilonRequested float64 `json:"epsilon_requested,omitempty"` // the (epsilon, delta) form's epsilon
	DeltaRequested   float64 `json:"delta_requested,omitempty"`   // and its delta
}

// VecSum is the params record of dp_vec_sum: a Gaussian on the clipped sum.
type VecSum struct {
	Dim            int     `json:"dim"`              // vector dimension
	Grid           float64 `json:"grid"`             // the sampler's grid step
	NoiseTV        float64 `json:"noise_tv"`         // the sampler's total-variation bound over Dim draws
	Clip           float64 `json:"clip"`             // each row's L2 norm bound (the sensitivity)
	FixedPointStep float64 `json:"fixed_point_step"` // the exact fixed-point sum's unit (a power of two)
}

// External is the params record of gdp_spend: a spend made outside dpsql.
type External struct {
	Note string `json:"note,omitempty"` // the caller's note
}

// Laplace is the params record of dp_laplace and dp_tlaplace: rounded
// (truncated) Laplace noise, charged at sensitivity_requested + grid.
type Laplace struct {
	Grid                 float64 `json:"grid"`                      // the sampler's grid step
	SensitivityRequested float64 `json:"sensitivity_requested"`     // the caller's sensitivity (the mechanism's is it plus grid)
	DeltaRequested       float64 `json:"delta_requested,omitempty"` // dp_tlaplace: the caller's delta
}

// OptNoise is the params record of dp_optnoise: optimised piecewise-uniform
// grid noise.
type OptNoise struct {
	Grid                 float64 `json:"grid"`                  // the sampler's grid step
	SensitivityRequested float64 `json:"sensitivity_requested"` // the caller's sensitivity
	DeltaRequested       float64 `json:"delta_requested"`       // the caller's delta
	Loss                 string  `json:"loss"`                  // "l1" or "l2": what the law was optimised for
	Intervals            int     `json:"intervals"`             // number of uniform intervals
	IntervalWidth        float64 `json:"interval_width"`        // their width, in the query's units
}

// Protected is the params record of a protected-mode statement (package
// protect; also what dpsql-beam's aggregate records): one charge for the
// whole statement.
type Protected struct {
	Table            string            `json:"protected_table"`
	PrivacyUnit      string            `json:"privacy_unit"` // "" when each row is a person
	MaxGroups        int               `json:"max_groups"`   // groups one person may touch
	MaxRows          int               `json:"max_rows"`     // rows one person may hold per group
	PublicKeys       map[string]string `json:"public_keys,omitempty"`
	Parts            []ProtectedPart   `json:"statement_parts"`
	NoiseTV          float64           `json:"noise_tv_per_value"` // the Gaussian sampler's bound per value drawn
	NoiseTVValues    float64           `json:"noise_tv_values"`    // a public bound on the values the Gaussian sampler draws
	NoiseTVTotal     float64           `json:"noise_tv"`           // NoiseTVValues * NoiseTV, paid from delta by the accountant
	Noise            string            `json:"noise"`              // the statement's noise law: gaussian or laplace
	EpsilonRequested float64           `json:"epsilon_requested,omitempty"`
	DeltaRequested   float64           `json:"delta_requested,omitempty"`
}

// ProtectedPart is one part of a protected statement's budget: one noisy
// value the statement draws per group (Part: the partition selection's count
// of persons, a count, a sum, a sum of squares or a histogram), with its
// noise (Mu and Sigma, or Laplace Scale and Epsilon), its sensitivity as
// charged (L2, or L1 plus the Laplace grid), the aggregates that read it
// (Outputs) and, for a sum of values centred on a midpoint, Centre. Records
// written before values were shared have one part per aggregate, with the
// count's and squares' figures in the *_count and *_squares fields.
type ProtectedPart struct {
	Part               string    `json:"part"` // selection, count, sum, avg, var_pop, stddev_pop, median
	Column             string    `json:"column,omitempty"`
	Mu                 float64   `json:"mu,omitempty"`
	Sigma              float64   `json:"sigma,omitempty"`
	Sensitivity        float64   `json:"sensitivity"`
	Scale              float64   `json:"scale,omitempty"`   // laplace
	Epsilon            float64   `json:"epsilon,omitempty"` // laplace: Sensitivity/Scale
	ScaleCount         float64   `json:"scale_count,omitempty"`
	EpsilonCount       float64   `json:"epsilon_count,omitempty"`
	ScaleSquares       float64   `json:"scale_squares,omitempty"`
	EpsilonSquares     float64   `json:"epsilon_squares,omitempty"`
	Delta              float64   `json:"delta,omitempty"`     // selection: delta_s
	Threshold          float64   `json:"threshold,omitempty"` // selection: tau
	Bounds             []float64 `json:"bounds,omitempty"`
	Quantum            float64   `json:"quantum,omitempty"`
	Buckets            int       `json:"buckets,omitempty"` // median: the histogram's buckets
	SigmaCount         float64   `json:"sigma_count,omitempty"`
	SensitivityCount   float64   `json:"sensitivity_count,omitempty"`
	SigmaSquares       float64   `json:"sigma_squares,omitempty"`
	SensitivitySquares float64   `json:"sensitivity_squares,omitempty"`
	QuantumSquares     float64   `json:"quantum_squares,omitempty"`
	Centre             float64   `json:"centre,omitempty"`
	Outputs            []string  `json:"outputs,omitempty"`
}

// BeamRun is what dpsql-beam adds to the record of a release it runs.
type BeamRun struct {
	Engine string `json:"engine"` // always "beam"
	Job    string `json:"job"`    // the job id its outcome record names
	Runner string `json:"runner"` // the Beam runner
}

// BeamAggregate is the params record of dpsql-beam's aggregate: the
// protected statement's record and the run's.
type BeamAggregate struct {
	Protected
	BeamRun
}
