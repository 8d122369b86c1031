package sqlfuncs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// TestCalibrationCacheForged is the attack of an adversary who owns a copy of
// the file: they rewrite dp_calibration_cache so that the next release would
// use less noise than its budget allows (or more, wasting utility). The
// release must recompute the epsilon of what it charges in-process, refuse
// the forged sigma, calibrate anew, charge no more than the target, and
// replace the forged row.
func TestCalibrationCacheForged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		factor float64 // forged sigma = honest sigma * factor
		n      string  // the "n" option
	}{
		{"too little noise", 0.5, ", 'n', 2000"},
		{"slightly too little", 0.99, ", 'n', 2000"},
		{"too much noise", 2, ", 'n', 2000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sqlfuncs.ResetCalibrationMemo()
			db := openDB(t, `SELECT dp_init(100)`)
			fillTrain(t, db, "train", 2000, 4, 2)
			release := func(into string) (sigma, eps, target float64, mech mechanism.Mechanism) {
				t.Helper()
				q := fmt.Sprintf(`SELECT dp_avgmix(features, label, json_object('classes', 2, 'into', '%s', 'mu', 1.0, 'T', 500, 'm', 16%s)) FROM train`, into, tc.n)
				var out string
				if err := db.QueryRow(q).Scan(&out); err != nil {
					t.Fatal(err)
				}
				var params string
				if err := db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&params); err != nil {
					t.Fatal(err)
				}
				var err error
				if mech, err = mechanism.Parse([]byte(params)); err != nil {
					t.Fatal(err)
				}
				var p struct {
					Target float64 `json:"target_epsilon"`
					Delta  float64 `json:"target_delta"`
				}
				if err := json.Unmarshal([]byte(params), &p); err != nil {
					t.Fatal(err)
				}
				if eps, err = accountant.RigorousEpsilon([]mechanism.Mechanism{mech}, p.Delta); err != nil {
					t.Fatal(err)
				}
				db.QueryRow(`SELECT sigma FROM dp_calibration_cache`).Scan(&sigma)
				return sigma, eps, p.Target, mech
			}
			honest, eps1, target, m1 := release("r1")
			if honest <= 0 {
				t.Fatalf("no calibration was cached (sigma %v)", honest)
			}
			if eps1 > target {
				t.Fatalf("honest release charged epsilon %v above its target %v", eps1, target)
			}
			if _, err := db.Exec(`UPDATE dp_calibration_cache SET sigma = sigma * ?`, tc.factor); err != nil {
				t.Fatal(err)
			}
			sqlfuncs.ResetCalibrationMemo() // a new process: only the file remembers
			cached, eps2, _, m2 := release("r2")
			if s1, s2 := subsampledSigma(m1), subsampledSigma(m2); s1 != honest || s2 != honest {
				t.Errorf("charged sigmas %v then %v, honest %v", s1, s2, honest)
			}
			if eps2 > target {
				t.Fatalf("with the forged cache the release charged epsilon %v, above its target %v", eps2, target)
			}
			if eps2 < target*(1-2e-3) {
				t.Errorf("with the forged cache the release charged epsilon %v, well below its target %v: the forged sigma was used", eps2, target)
			}
			if cached != honest {
				t.Errorf("the forged row was not replaced: cache holds %v, honest %v", cached, honest)
			}
		})
	}
}

// TestCalibrationCacheUsed checks that a fresh process uses an honest cached
// sigma: the second release charges exactly the first one's multiplier.
func TestCalibrationCacheUsed(t *testing.T) {
	sqlfuncs.ResetCalibrationMemo()
	db := openDB(t, `SELECT dp_init(100)`)
	fillTrain(t, db, "train", 2000, 4, 2)
	sigmas := map[string]float64{}
	for _, into := range []string{"r1", "r2"} {
		sqlfuncs.ResetCalibrationMemo()
		var out string
		if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('classes', 2, 'into', '` + into + `', 'mu', 1.0, 'T', 500, 'm', 16, 'n', 2000)) FROM train`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		var params string
		db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&params)
		m, err := mechanism.Parse([]byte(params))
		if err != nil {
			t.Fatal(err)
		}
		sigmas[into] = m.Sigma
	}
	var cached float64
	if err := db.QueryRow(`SELECT sigma FROM dp_calibration_cache`).Scan(&cached); err != nil {
		t.Fatal(err)
	}
	if sigmas["r1"] != cached || sigmas["r2"] != cached {
		t.Errorf("charged sigmas %v, cached %v: the cache was not used", sigmas, cached)
	}
}

// subsampledSigma is the multiplier of m's subsampled Gaussian part.
func subsampledSigma(m mechanism.Mechanism) float64 {
	for _, p := range m.Parts {
		if p.Kind == mechanism.KindSubsampledGaussian {
			return p.Sigma
		}
	}
	return m.Sigma
}
