package protect

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/mechanism"
)

// corpusFile is one protect/testdata/corpus*.json: the database it runs on
// and its statements (see the file's comment).
type corpusFile struct {
	Comment string `json:"comment"`
	Budget  struct {
		Mu    float64 `json:"mu"`
		Delta float64 `json:"delta"`
	} `json:"budget"`
	Setup      []string          `json:"setup"`
	Protect    map[string]Policy `json:"protect"`
	Statements []corpusStatement `json:"statements"`
}

type corpusStatement struct {
	Name    string        `json:"name"`
	SQL     string        `json:"sql"`
	Charge  *corpusCharge `json:"charge"`
	Refused string        `json:"refused"`
	Parts   []string      `json:"parts"`
	// Sensitivities per part (0: not checked), within 0.1%.
	Sensitivities []float64 `json:"sensitivities"`
	Columns       []string  `json:"columns"`
}

type corpusCharge struct {
	Mechanism string  `json:"mechanism"`
	Mu        float64 `json:"mu"`
	Epsilon   float64 `json:"epsilon"`
	Delta     float64 `json:"delta"`
	Law       string  `json:"law"`
}

// answered reports whether the statement is to be answered (its charge
// given, or null for a statement that charges nothing).
func (s corpusStatement) answered() bool { return s.Refused == "" }

// loadCorpus reads every protect/testdata/corpus*.json.
func loadCorpus(t testing.TB) map[string]corpusFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	out := map[string]corpusFile{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f corpusFile
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[p] = f
	}
	return out
}

// corpusDB builds a corpus file's database: a scope "default" of its
// budget, its setup run as the owner, its tables protected.
func corpusDB(t testing.TB, f corpusFile) (*Engine, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "corpus.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	b, err := accountant.NewBudget("default", f.Budget.Mu, 0, f.Budget.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Init(ctx, db, b); err != nil {
		t.Fatal(err)
	}
	for _, q := range f.Setup {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for table, p := range f.Protect {
		if err := p.Normalize(); err != nil {
			t.Fatal(err)
		}
		if err := Protect(ctx, db, table, p); err != nil {
			t.Fatal(err)
		}
	}
	e, err := EngineFor(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Release() })
	return e, db
}

// Issue 25's corpus: at least 60 analyst statements, each answered with
// the charge its documentation derives (the ledger row's mechanism, its
// parts and their sensitivities) or refused with its message, nothing
// charged.
func TestCorpus(t *testing.T) {
	files := loadCorpus(t)
	n := 0
	for path, f := range files {
		e, db := corpusDB(t, f)
		ctx := context.Background()
		charges := func() (int, string, string) {
			var k int
			var mech, params string
			db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&k)
			db.QueryRow(`SELECT mechanism, params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&mech, &params)
			return k, mech, params
		}
		for _, s := range f.Statements {
			n++
			name := filepath.Base(path) + ": " + s.Name
			before, _, _ := charges()
			res, err := e.Query(ctx, "default", s.SQL)
			after, kind, params := charges()
			if !s.answered() {
				if err == nil || !strings.Contains(err.Error(), s.Refused) || !IsRefusal(err) {
					t.Errorf("%s: %s\n  got %v, want a refusal containing %q", name, s.SQL, err, s.Refused)
				}
				if after != before {
					t.Errorf("%s: refused, but charged", name)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s\n  %v", name, s.SQL, err)
				continue
			}
			if s.Columns != nil && strings.Join(res.Columns, ",") != strings.Join(s.Columns, ",") {
				t.Errorf("%s: columns %v, want %v", name, res.Columns, s.Columns)
			}
			if s.Charge == nil {
				if after != before {
					t.Errorf("%s: charged, want nothing charged", name)
				}
				continue
			}
			if after != before+1 {
				t.Errorf("%s: %d charges, want one", name, after-before)
				continue
			}
			if msg := s.Charge.check(kind, params); msg != "" {
				t.Errorf("%s: %s\n  %s", name, s.SQL, msg)
			}
			var d StatementDetails
			if err := json.Unmarshal([]byte(params), &d); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, p := range d.Parts {
				parts = append(parts, p.Part)
			}
			if s.Parts != nil && strings.Join(parts, ",") != strings.Join(s.Parts, ",") {
				t.Errorf("%s: parts %v, want %v", name, parts, s.Parts)
			}
			for i, want := range s.Sensitivities {
				if i < len(d.Parts) && want > 0 && math.Abs(d.Parts[i].Sensitivity/want-1) > 1e-3 {
					t.Errorf("%s: part %d (%s) sensitivity %v, want %v", name, i, d.Parts[i].Part, d.Parts[i].Sensitivity, want)
				}
			}
		}
	}
	if n < 60 {
		t.Errorf("the corpus has %d statements, want at least 60", n)
	}
}

// check compares a charge's ledger row with what the corpus derives: the
// mechanism and mu (and delta_s) exactly; or an (epsilon, delta) the charge
// certifies, to within 1% below.
func (c *corpusCharge) check(kind, params string) string {
	var m mechanism.Mechanism
	if err := json.Unmarshal([]byte(params), &m); err != nil {
		return err.Error()
	}
	if c.Mechanism != "" && (kind != c.Mechanism || m.Kind != c.Mechanism) {
		return "charged " + kind + ", want " + c.Mechanism
	}
	if c.Mu > 0 && (m.Mu != c.Mu || m.Delta != c.Delta) {
		return "charged mu " + num(m.Mu) + " delta " + num(m.Delta) + ", want " + num(c.Mu) + " and " + num(c.Delta)
	}
	if c.Law != "" {
		var d StatementDetails
		json.Unmarshal([]byte(params), &d)
		if d.Noise != c.Law {
			return "noise " + d.Noise + ", want " + c.Law
		}
	}
	if c.Epsilon > 0 {
		got, err := accountant.RigorousEpsilon([]mechanism.Mechanism{m}, c.Delta)
		if err != nil {
			return err.Error()
		}
		if got > c.Epsilon || got < 0.99*c.Epsilon {
			return "the charge certifies epsilon " + num(got) + " at delta " + num(c.Delta) + ", want at most and within 1% of " +
				num(c.Epsilon)
		}
	}
	return ""
}
