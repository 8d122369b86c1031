package mechanism

import (
	"strings"
	"testing"
)

// recordKeys pins every params record's JSON keys: a renamed or dropped key
// (sigma vs sigma_applied) fails here, and docs/ledger.md ("Params records") and
// the rows already written must change with it.
var recordKeys = map[string]string{
	"dp_gaussian":          "delta_requested dim epsilon_requested grid noise_tv",
	"dp_vec_sum":           "clip dim fixed_point_step grid noise_tv",
	"gdp_spend":            "note",
	"dp_laplace":           "delta_requested grid sensitivity_requested",
	"dp_tlaplace":          "delta_requested grid sensitivity_requested",
	"dp_optnoise":          "delta_requested grid interval_width intervals loss sensitivity_requested",
	"dp_avgmix":            "K T class_steps cx cy d into lambda m mu_clt mu_n n n_noisy n_source p sampling sigma_applied sigma_x sigma_y target_delta target_epsilon",
	"dp_avgmix count":      "into mu_n n_noisy n_source release_refused",
	"dp_select_topm":       "accounting c c_release classes components d eps_labels features indices into label labels m mu_labels mu_release mu_release_requested mu_select mu_select_requested n n_public order score scores sigma_release source_rowid",
	"protect":              "delta_requested epsilon_requested max_groups max_rows noise noise_tv noise_tv_per_value noise_tv_values privacy_unit protected_table public_keys statement_parts",
	"dpsql-beam avgmix":    "K T class_steps cx cy d engine into job lambda m mu_clt mu_n n n_noisy n_source p runner sampling sigma_applied sigma_x sigma_y target_delta target_epsilon",
	"dpsql-beam aggregate": "delta_requested engine epsilon_requested job max_groups max_rows noise noise_tv noise_tv_per_value noise_tv_values privacy_unit protected_table public_keys runner statement_parts",
}

func TestRecordKeysArePinned(t *testing.T) {
	for name, newRec := range Records {
		want, ok := recordKeys[name]
		if !ok {
			t.Errorf("record %q has no pinned key set", name)
			continue
		}
		if got := strings.Join(Keys(newRec()), " "); got != want {
			t.Errorf("record %q writes keys\n  %s\nthe pinned set is\n  %s", name, got, want)
		}
	}
	for name := range recordKeys {
		if Records[name] == nil {
			t.Errorf("pinned record %q is not in Records", name)
		}
	}
	// The nested records too.
	for _, tc := range []struct {
		rec  any
		want string
	}{
		{ProtectedPart{}, "bounds buckets centre column delta epsilon epsilon_count epsilon_squares mu outputs part quantum quantum_squares scale scale_count scale_squares sensitivity sensitivity_count sensitivity_squares sigma sigma_count sigma_squares threshold"},
		{SelectTopmChoice{}, "indices scores"},
	} {
		if got := strings.Join(Keys(tc.rec), " "); got != tc.want {
			t.Errorf("%T writes keys %s, pinned %s", tc.rec, got, tc.want)
		}
	}
}

// No record names a mechanism field at its top level: a row's params must
// re-account as what was charged. A quote's keys are noise_tv (which a
// record may carry as its own sampler bound) and the quoted figures.
func TestRecordKeysAvoidMechanismKeys(t *testing.T) {
	mech := map[string]bool{}
	for _, k := range Keys(Mechanism{}) {
		mech[k] = true
	}
	for name, newRec := range Records {
		for _, k := range Keys(newRec()) {
			if mech[k] || k == KeyQuoteEpsilon || k == KeyQuoteDelta {
				t.Errorf("record %q has key %q, which the mechanism or the quote owns", name, k)
			}
		}
	}
}

func TestDecodeRow(t *testing.T) {
	const row = `{"mechanism":"gaussian","mu":0.3,"sensitivity":1,"sigma":3.4,"dim":1,"grid":0.0009765625,"noise_tv":2e-38}`
	var g Gaussian
	m, err := DecodeRow([]byte(row), &g)
	if err != nil || m.Kind != KindGaussian || m.Mu != 0.3 || g.Dim != 1 || g.Grid != 0.0009765625 || g.NoiseTV != 2e-38 {
		t.Fatalf("DecodeRow: %+v %+v %v", m, g, err)
	}
	for _, tc := range []struct {
		params string
		rec    any
		want   string
	}{
		{`{"mechanism":"gaussian","mu":0.3,"dims":1}`, &Gaussian{}, `key "dims"`},
		{`{"mechanism":"gaussian","mu":0.3,"dim":"one"}`, &Gaussian{}, "do not decode"},
		{`{"mechanism":"gaussian","mu":-1,"dim":1}`, &Gaussian{}, "mu must be positive"},
		{`{"mechanism":"external","mu":0.1,"note":"x","quote_epsilon":1,"quote_delta":1e-5}`, &External{}, ""},
		{`{"mechanism":"external","mu":0.1,"sigma_applied":1}`, &External{}, `key "sigma_applied"`},
	} {
		_, err := DecodeRow([]byte(tc.params), tc.rec)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("DecodeRow(%s): %v, want %q", tc.params, err, tc.want)
		}
	}
}

func TestFields(t *testing.T) {
	f, err := Fields(External{Note: "n"})
	if err != nil || len(f) != 1 || f["note"] != "n" {
		t.Fatalf("Fields: %v %v", f, err)
	}
	if f, err := Fields(nil); err != nil || len(f) != 0 {
		t.Errorf("Fields(nil): %v %v", f, err)
	}
	if _, err := Fields([]int{1}); err == nil {
		t.Error("Fields accepted a record that is not a JSON object")
	}
}
