package sqlfuncs

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/dfs"
)

// selectTopmOptions are dp_select_topm's options (a JSON object).
type selectTopmOptions struct {
	Features  string   `json:"features"`
	Label     string   `json:"label"`
	Into      string   `json:"into"`
	M         *int     `json:"m"`
	Score     string   `json:"score"`
	MuSelect  *float64 `json:"mu_select"`
	MuRelease *float64 `json:"mu_release"`
	C         *float64 `json:"c"`
	CRelease  *float64 `json:"c_release"`
	Classes   *int     `json:"classes"`
	Labels    string   `json:"labels"`
	EpsLabels *float64 `json:"eps_labels"`
	Seed      *uint64  `json:"seed"`
}

// dpSelectTopm is
//
//	dp_select_topm(table, options)
//
// It reads every row of table, a base table of the main schema, itself (in
// rowid order, no WHERE, no JOIN), then, in one ledger transaction, chooses m
// features privately ([dfs.Select]) and writes every row's m chosen features,
// clipped and noised ([dfs.ReleaseRows]), to a new table
//
//	into(id INTEGER PRIMARY KEY, source_rowid INTEGER, x BLOB, label INTEGER)
//
// where id counts 1, 2, ... in the order of source_rowid, the row's rowid in
// table: the order of the output never depends on the data (an index on the
// label cannot reorder it). Its result is a JSON summary (into, rows, d, m,
// indices, score, the mu figures, ledger_id, seconds).
//
// Why a table and not an aggregate over a SELECT: a per-row release reveals
// which rows it read, so it is private only for replace-one neighbours on a
// fixed set of rows. A WHERE, JOIN or GROUP BY would make that set depend on
// the data; a whole base table does not. Views, virtual tables, temporary
// tables and anything outside the main schema are refused.
//
// Options: features and label (the columns holding the float32 feature
// vectors and the INTEGER class ids; default "features" and "label", the
// layout of dpsql import), into (required, a new table), m (required,
// 1 <= m <= d), score ("distance", the default, or "t"), mu_select (required:
// GDP of the selection under add/remove neighbours), mu_release (required:
// GDP of the per-row feature release under replace-one neighbours), c
// (required: the public L2 bound rows are clipped to for the selection),
// c_release (the public L2 bound of the m released coordinates; default c),
// classes (required: the public number of classes K, labels in 0..K-1,
// K >= 2; it is not taken from the data because the largest label present
// would reveal its row), labels ("private", the default: K-ary randomized
// response with eps_labels, which is then required; or "public": labels
// released in clear, assumed known to the adversary), seed (test builds
// only).
//
// # The charge
//
// The selection is dfs.Params.SelectMechanisms: Gaussian entries under
// add/remove neighbours composing to mu_s <= mu_select. The release is
// dfs.Params.ReleaseMechanisms: a Gaussian of mu_r <= mu_release and, with
// private labels, randomized response dominated by a Gaussian of mu_l, both
// under replace-one neighbours (a per-row release reveals n, so it has no
// add/remove guarantee). The ledger takes one mechanism per charge, and the
// table and the charge must commit in one transaction, so the whole call is
// recorded as ONE Gaussian entry under replace-one neighbours of
//
//	mu = sqrt((2 mu_s)^2 + mu_r^2 + mu_l^2).
//
// It dominates the call soundly: the add/remove mu_s-GDP selection is
// 2 mu_s-GDP for a replacement (the argument is written once, in
// docs/privacy-model.md, paragraph "One neighbour relation per scope"); the release then runs on the
// selection's output, and adaptive composition of GDP adds the squares. The price of a single entry is the factor 2 on the
// selection, which separate add/remove and replace-one entries would not pay
// in the scope's mu_spent. Every component (each Gaussian of the selection
// and the release with its neighbours, mu_s, mu_r, mu_l, the chosen indices
// and their noisy scores, score kind, c, c_release, labels, n, d, m, classes)
// is recorded in the ledger row, so that it can be re-accounted either way.
//
// The table is read completely before anything is charged; every check
// (options, the table, shapes, NaN/Inf, NULLs, labels against classes, the
// output table, the budget) is made before the charge commits and before any
// noise is drawn; the selection and the release run inside the charge's
// transaction, so the output table exists only if the charge committed.
func (c *Conn) dpSelectTopm(name string, options any) (out string, err error) {
	const fn = "dp_select_topm"
	start := time.Now()
	opts, err := optionBytes(fn, options)
	if err != nil {
		return "", err
	}
	var o selectTopmOptions
	if err := decodeOptions(fn, opts, &o); err != nil {
		return "", err
	}
	if o.Features == "" {
		o.Features = "features"
	}
	if o.Label == "" {
		o.Label = "label"
	}
	if err := c.canWriteLedger(fn); err != nil {
		return "", err
	}
	// Cheap public checks before the table is read (the release's
	// transaction checks the name again).
	if _, err := outputTable(fn, nil, o.Into); err != nil {
		return "", err
	}
	if taken, err := c.tableExists(o.Into); err != nil {
		return "", err
	} else if taken {
		return "", fmt.Errorf("%s: table %q already exists; releases never overwrite, choose another \"into\"", fn, o.Into)
	}
	src, err := c.baseTable(fn, name, o.Features, o.Label)
	if err != nil {
		return "", err
	}
	in := &topmInput{rows: vectorRows{fn: fn}}
	return c.runRelease(releaseSteps{
		fn:    fn,
		rows:  &in.rows,
		read:  func() error { return c.readTopmTable(src, opts, in) },
		empty: fmt.Sprintf("table %q has no rows to select from", name),
		// selectTopm plans (planSelectTopm), charges and writes.
		plan: func() (func() (string, error), error) {
			return func() (string, error) { return c.selectTopm(in, o, start) }, nil
		},
	})
}

// topmInput is the table a dp_select_topm call read, in rowid order.
type topmInput struct {
	rows   vectorRows
	rowids []int64
}

// readTopmTable reads every row of the table src in rowid order into in.
func (c *Conn) readTopmTable(src *sourceTable, opts []byte, in *topmInput) error {
	const fn = "dp_select_topm"
	q := `SELECT ` + src.rowid + `, ` + quoteIdent(src.features) + `, ` + quoteIdent(src.label) + ` FROM main.` + quoteIdent(src.name) + ` ORDER BY ` + src.rowid
	err := c.queryConn(q, nil, func(v []driver.Value) error {
		row := in.rows.N + 1
		if in.rows.N >= dfs.MaxRows {
			return fmt.Errorf("%s: table %q has more than %d rows", fn, src.name, dfs.MaxRows)
		}
		if err := topmLabel(fn, row, v[2]); err != nil {
			return err
		}
		id, ok := v[0].(int64)
		if !ok {
			return fmt.Errorf("%s: internal error: rowid of row %d is %T", fn, row, v[0])
		}
		if err := in.rows.add(v[1], v[2], opts); err != nil {
			return err
		}
		in.rowids = append(in.rowids, id)
		return nil
	})
	if err == nil && c.db.Interrupted() {
		err = fmt.Errorf("%s: the statement was interrupted; nothing was released or charged", fn)
	}
	if err != nil && !strings.HasPrefix(err.Error(), fn+":") {
		err = fmt.Errorf("%s: reading table %q: %w", fn, src.name, err)
	}
	return err
}

// topmLabel checks that a label is an INTEGER class id (or an integral REAL).
func topmLabel(fn string, row int, label any) error {
	switch l := label.(type) {
	case int64, float64:
	case nil:
		return fmt.Errorf("%s: label of row %d is NULL", fn, row)
	case []byte:
		if l == nil {
			return fmt.Errorf("%s: label of row %d is NULL", fn, row)
		}
		return fmt.Errorf("%s: label of row %d is a BLOB; dp_select_topm needs INTEGER class ids (0..classes-1), not label vectors", fn, row)
	default:
		return fmt.Errorf("%s: label of row %d must be an INTEGER class id, got %s", fn, row, typeName(label))
	}
	return nil
}

// selectTopmOldForm is the aggregate dp_select_topm(features, label, options
// [, rowid]) of earlier versions. It refuses: over a SELECT, the rows read
// (WHERE, JOIN, GROUP BY) and their order (an index) could depend on the
// data, and a per-row release would reveal both.
type selectTopmOldForm struct{}

// errSelectTopmOldForm explains the refusal and names the table form.
var errSelectTopmOldForm = errors.New("dp_select_topm: the aggregate form dp_select_topm(features, label, options [, rowid]) over a SELECT is no longer accepted: a per-row release reveals which rows it read, so it is private only over a whole table (replace-one neighbours on a fixed set of rows), never over a WHERE, JOIN or GROUP BY. Name the table instead and let dp_select_topm read all of it: SELECT dp_select_topm('train', json_object('features', 'features', 'label', 'label', 'into', 'selected', 'm', 20, ...)); nothing was charged")

func (a *selectTopmOldForm) Step(args ...any) error {
	if len(args) == 3 || len(args) == 4 {
		return errSelectTopmOldForm
	}
	return fmt.Errorf("dp_select_topm: takes (table, options), got %d arguments", len(args))
}

func (a *selectTopmOldForm) Done() (string, error) { return "", errSelectTopmOldForm }

// selectTopmPlan is everything dp_select_topm decides before reading noise.
type selectTopmPlan struct {
	o     selectTopmOptions
	p     dfs.Params
	mech  mechanism.Mechanism
	rec   mechanism.SelectTopm // the params record of the ledger row and the summary
	tv    float64              // the samplers' total-variation bound
	muSel float64              // composed selection figure, add/remove
	muRel float64              // feature release, replace-one
	muLab float64              // randomized response on labels, replace-one (0 with public labels)
}

// planSelectTopm validates the options against the rows read; the call is
// priced by its quote (dfs.Params.Quote) at the scope's delta.
func planSelectTopm(in *topmInput, o selectTopmOptions) (*selectTopmPlan, error) {
	const fn = "dp_select_topm"
	r := &in.rows
	if _, err := outputTable(fn, nil, o.Into); err != nil {
		return nil, err
	}
	pl := &selectTopmPlan{o: o}
	p := dfs.Params{Score: dfs.ScoreDistance, Labels: dfs.LabelsPrivate}
	if o.M == nil {
		return nil, fmt.Errorf("%s: option \"m\" (the number of features to keep, 1..d = %d) is required", fn, r.D)
	}
	if *o.M < 1 || *o.M > r.D {
		return nil, fmt.Errorf("%s: option \"m\" must lie in [1, d = %d] (the features have %d dimensions), got %d", fn, r.D, r.D, *o.M)
	}
	p.M = *o.M
	switch o.Score {
	case "", dfs.ScoreDistance:
	case dfs.ScoreT:
		p.Score = dfs.ScoreT
	default:
		return nil, fmt.Errorf("%s: option \"score\" must be %q or %q, got %q", fn, dfs.ScoreDistance, dfs.ScoreT, o.Score)
	}
	for _, f := range []struct {
		name, what string
		v          *float64
		dst        *float64
	}{
		{"mu_select", "the GDP budget of the feature selection, add/remove neighbours", o.MuSelect, &p.MuSelect},
		{"mu_release", "the GDP budget of the per-row feature release, replace-one neighbours", o.MuRelease, &p.MuRelease},
		{"c", "the public L2 bound rows are clipped to", o.C, &p.C},
	} {
		if f.v == nil {
			return nil, fmt.Errorf("%s: option %q (%s) is required", fn, f.name, f.what)
		}
		if !(*f.v > 0 && !math.IsInf(*f.v, 1)) {
			return nil, fmt.Errorf("%s: option %q must be positive and finite, got %v", fn, f.name, *f.v)
		}
		*f.dst = *f.v
	}
	if o.CRelease != nil {
		if !(*o.CRelease > 0 && !math.IsInf(*o.CRelease, 1)) {
			return nil, fmt.Errorf("%s: option \"c_release\" must be positive and finite, got %v", fn, *o.CRelease)
		}
		p.CRelease = *o.CRelease
	}
	if o.Classes == nil {
		return nil, fmt.Errorf("%s: option \"classes\" (the public number of classes K; labels lie in 0..K-1) is required: taking it from the largest label present would reveal that label's row", fn)
	}
	if *o.Classes < 2 {
		return nil, fmt.Errorf("%s: option \"classes\" must be at least 2 (feature selection separates classes), got %d", fn, *o.Classes)
	}
	p.Classes = *o.Classes
	if err := r.checkClasses(fn, p.Classes); err != nil {
		return nil, err
	}
	switch o.Labels {
	case "", dfs.LabelsPrivate:
		if o.EpsLabels == nil {
			return nil, fmt.Errorf("%s: labels = \"private\" (the default) releases labels by randomized response and needs option \"eps_labels\" (its epsilon); pass labels = \"public\" only if the labels are known to the adversary", fn)
		}
		if !(*o.EpsLabels > 0 && !math.IsInf(*o.EpsLabels, 1)) {
			return nil, fmt.Errorf("%s: option \"eps_labels\" must be positive and finite, got %v", fn, *o.EpsLabels)
		}
		p.EpsLabels = *o.EpsLabels
	case dfs.LabelsPublic:
		p.Labels = dfs.LabelsPublic
		if o.EpsLabels != nil {
			return nil, fmt.Errorf("%s: option \"eps_labels\" applies to labels = \"private\"; with labels = \"public\" labels are released in clear", fn)
		}
	default:
		return nil, fmt.Errorf("%s: option \"labels\" must be %q or %q, got %q", fn, dfs.LabelsPrivate, dfs.LabelsPublic, o.Labels)
	}
	pl.p = p
	// The mechanisms must be describable before anything is read or drawn.
	if _, err := p.SelectMechanisms(r.D); err != nil {
		return nil, named(fn, err)
	}
	if _, err := p.ReleaseMechanisms(); err != nil {
		return nil, named(fn, err)
	}
	pl.rec = mechanism.SelectTopm{Into: o.Into, SourceRowid: "rowid", Order: "source_rowid", Features: o.Features, Label: o.Label}
	return pl, nil
}

// selectTopm plans, charges and writes the release of the rows in read.
func (c *Conn) selectTopm(in *topmInput, o selectTopmOptions, start time.Time) (string, error) {
	const fn = "dp_select_topm"
	r := &in.rows
	pl, err := planSelectTopm(in, o)
	if err != nil {
		return "", err
	}
	noise, err := seededNoise(fn, pl.o.Seed)
	if err != nil {
		return "", err
	}
	if noise == nil {
		noise = c.noise
	}
	// The quote: the one pricing of the call, at the scope's delta.
	b, err := c.budget(c.Scope())
	if err != nil {
		return "", err
	}
	quote, err := pl.p.Quote(r.D, r.N, pl.rec, b.Delta, accountant.Price)
	if err != nil {
		return "", named(fn, err)
	}
	data := dfs.Data{X: r.features(), D: r.D, Labels: r.Classes, N: r.N}
	var sel dfs.Selection
	receipt, err := c.ChargeQuote(fn, quote, func(tx *sql.Tx) (map[string]any, error) {
		var err error
		sel, err = writeSelectTopm(fn, tx, c, noise, data, in.rowids, pl)
		if err != nil {
			return nil, err
		}
		return mechanism.Fields(mechanism.SelectTopmChoice{Indices: sel.Indices, Scores: sel.Scores})
	})
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(selectTopmSummaryOf(quote, sel, receipt, time.Since(start)))
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// selectTopmSummary is what dp_select_topm returns: the params record its
// ledger row holds (with the features chosen), the quoted figures and the
// receipt's.
type selectTopmSummary struct {
	mechanism.SelectTopm
	Rows              int     `json:"rows"` // = n
	Mu                float64 `json:"mu"`   // the charged replace-one Gaussian's
	Neighbours        string  `json:"neighbours"`
	Epsilon           float64 `json:"epsilon"` // the quote's, at delta
	Delta             float64 `json:"delta"`   // the scope's
	NoiseTV           float64 `json:"noise_tv"`
	LedgerID          int64   `json:"ledger_id"`
	Scope             string  `json:"scope"`
	ScopeMuSpent      float64 `json:"scope_mu_spent"`
	ScopeEpsilonSpent float64 `json:"scope_epsilon_spent"`
	Seconds           float64 `json:"seconds"`
}

// selectTopmSummaryOf builds the summary from the quote that was charged,
// the selection its release made and the receipt.
func selectTopmSummaryOf(q mechanism.Quote, sel dfs.Selection, receipt ledger.Receipt, took time.Duration) selectTopmSummary {
	rec, _ := q.Params.(mechanism.SelectTopm)
	rec.Indices, rec.Scores = sel.Indices, sel.Scores
	s := selectTopmSummary{SelectTopm: rec, Rows: rec.N, Mu: q.Mechanism.GDPMu(), Neighbours: mechanism.NeighboursOf(q.Mechanism.Neighbours),
		Epsilon: q.Epsilon, Delta: q.Delta, NoiseTV: q.NoiseTV, LedgerID: receipt.ID, Scope: receipt.Scope,
		ScopeMuSpent: receipt.MuSpent, ScopeEpsilonSpent: receipt.Epsilon, Seconds: took.Seconds()}
	if math.IsInf(s.Epsilon, 0) {
		s.Epsilon = -1
	}
	return s
}

// writeSelectTopm selects the features, creates the release table and writes
// every row's noisy selected features into it, all with tx.
func writeSelectTopm(fn string, tx *sql.Tx, c *Conn, noise *release.Noise, data dfs.Data, rowids []int64, pl *selectTopmPlan) (dfs.Selection, error) {
	into := pl.o.Into
	q, err := outputTable(fn, tx, into)
	if err != nil {
		return dfs.Selection{}, err
	}
	sel, err := dfs.Select(noise, data, pl.p)
	if err != nil {
		return sel, named(fn, err)
	}
	if _, err := tx.Exec(`CREATE TABLE ` + q + ` (id INTEGER PRIMARY KEY, source_rowid INTEGER NOT NULL, x BLOB NOT NULL, label INTEGER NOT NULL)`); err != nil {
		return sel, fmt.Errorf("%s: creating %s: %w", fn, into, err)
	}
	ins := newBatchInsert(tx, q, "id", "source_rowid", "x", "label")
	var xb []byte
	n := data.N
	err = dfs.ReleaseRows(noise, data, sel, pl.p, func(i int, x []float32, label int) error {
		src := rowids[i]
		xb = vector.AppendEncoded(xb[:0], x)
		if err := ins.add(int64(i+1), src, xb, int64(label)); err != nil {
			return fmt.Errorf("%s: writing row %d of %s: %w", fn, i+1, into, err)
		}
		if i%4096 == 4095 {
			if c.db.Interrupted() {
				return fmt.Errorf("the statement was interrupted at row %d; the release was rolled back and nothing was charged", i+1)
			}
			report(fn, i+1, n)
		}
		return nil
	})
	if ferr := ins.flush(); err == nil && ferr != nil {
		err = fmt.Errorf("writing %s: %w", into, ferr)
	}
	report(fn, n, n)
	if err != nil {
		return sel, err
	}
	return sel, nil
}
