package sqlfuncs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/sqlfuncs"
	"github.com/dpsql/dpsql/vector"
)

// TestCalibrationHeadStart checks dp_avgmix's head start: with n asserted and
// Poisson sampling the calibration starts at the first row and the release
// uses its result (one calibration in all, not two) and makes the charge's
// budget decision ahead, and the charged sigma is exactly the calibration of
// the charged problem; where the problem depends
// on more than the options (a noisy count, hierarchical class draws) no head
// start runs.
func TestCalibrationHeadStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  string
		heads int64
	}{
		{"asserted n", `'n', 2000`, 1},
		{"asserted n, epsilon and delta", `'n', 2000, 'epsilon', 2.0, 'delta', 1e-6`, 1},
		{"noisy count", ``, 0},
		{"hierarchical", `'n', 2000, 'sampling', 'hierarchical', 'p', 0.5`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sqlfuncs.ResetCalibrationMemo()
			db := openDB(t, `SELECT dp_init(100)`)
			fillTrain(t, db, "train", 2000, 4, 2)
			solves0, heads0 := sqlfuncs.CalibrationCounts(1493)
			decided0 := sqlfuncs.DecisionsAhead(1493)
			opts := `'classes', 2, 'into', 'r', 'T', 1493, 'm', 16` // T is this test's alone: the counts are per problem
			if !strings.Contains(tc.opts, "epsilon") {
				opts += `, 'mu', 1.0`
			}
			if tc.opts != "" {
				opts += ", " + tc.opts
			}
			var out string
			if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object(` + opts + `)) FROM train`).Scan(&out); err != nil {
				t.Fatal(err)
			}
			solves, heads := sqlfuncs.CalibrationCounts(1493)
			if got := heads - heads0; got != tc.heads {
				t.Errorf("%d head starts finished, want %d", got, tc.heads)
			}
			// Each head start also made the charge's budget decision.
			if got := sqlfuncs.DecisionsAhead(1493) - decided0; got != tc.heads {
				t.Errorf("%d head starts made the charge's decision ahead, want %d", got, tc.heads)
			}
			// (Hierarchical sampling charges the most steps any class takes,
			// not T: its calibration is counted elsewhere.)
			if got := solves - solves0; got != 1 && !strings.Contains(tc.opts, "hierarchical") {
				t.Errorf("%d calibrations ran, want 1 (the head start's result reused)", got)
			}
			var params string
			if err := db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&params); err != nil {
				t.Fatal(err)
			}
			m, err := mechanism.Parse([]byte(params))
			if err != nil {
				t.Fatal(err)
			}
			if tc.opts == "" || strings.Contains(tc.opts, "hierarchical") {
				return // calibrated after a count or class draws: covered elsewhere
			}
			var p struct {
				Target float64 `json:"target_epsilon"`
				Delta  float64 `json:"target_delta"`
			}
			if err := json.Unmarshal([]byte(params), &p); err != nil {
				t.Fatal(err)
			}
			want, err := accountant.CalibrateSubsampledSigma(m.Q, m.Steps, p.Target, p.Delta)
			if err != nil {
				t.Fatal(err)
			}
			if m.Sigma != want {
				t.Errorf("charged sigma %v; calibrating the charged problem (q %v, %d steps, epsilon %v at %v) gives %v", m.Sigma, m.Q, m.Steps, p.Target, p.Delta, want)
			}
		})
	}
}

// TestCalibrationHeadStartFailedStatement checks that a head start outliving
// its statement (a row error after it started) charges nothing and holds the
// file only until it is done: once the application closes its database the
// last connection, the head start's ledger connection, checkpoints and
// removes the WAL.
func TestCalibrationHeadStartFailedStatement(t *testing.T) {
	sqlfuncs.ResetCalibrationMemo()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`SELECT dp_init(100)`); err != nil {
		t.Fatal(err)
	}
	fillTrain(t, db, "train", 2000, 4, 2)
	if _, err := db.Exec(`INSERT INTO train VALUES (?, 0)`, vector.Encode([]float32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	_, heads0 := sqlfuncs.CalibrationCounts(2001)
	var out string
	err = db.QueryRow(`SELECT dp_avgmix(features, label, json_object('classes', 2, 'into', 'r', 'mu', 0.7, 'n', 2001, 'm', 16)) FROM train`).Scan(&out) // T = n = 2001 steps
	if err == nil || !strings.Contains(err.Error(), "row 2001") {
		t.Fatalf("want the error of row 2001, got %v", err)
	}
	if n := ledgerRows(t, db); n != 0 {
		t.Fatalf("a failed statement charged %d rows", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := os.Stat(path + "-wal")
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the WAL is still there a minute after the last close (%v): a connection was left open", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, heads := sqlfuncs.CalibrationCounts(2001); heads != heads0+1 {
		t.Errorf("%d head starts finished, want 1 (the test needs one running when the statement fails)", heads-heads0)
	}
}
