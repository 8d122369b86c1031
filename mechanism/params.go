package mechanism

// Params records: what a release records in its ledger row beside the
// mechanism, one typed record per release, with the JSON keys the row
// carries. The README's ledger section documents every field. A record's
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
