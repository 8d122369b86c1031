// Package sqlfuncs is dpsql's SQL surface: it checks arguments, decodes
// vectors (package vector) and options, charges the ledger (package ledger)
// and calls the mechanisms (package release). It holds no mathematics of its
// own, and no C: SQLite is reached through package internal/sqlite.
//
// Each scalar function's arguments are declared once, as a signature (its
// name, and each argument's name and what it must be: args.go), checked
// before its body runs; every error a function returns names it once
// ("dp_init: mu must be > 0, got -1").
//
// [Register] adds dpsql's SQL functions (dp_init, dp_gaussian, dp_avgmix,
// dp_select_topm, gdp_epsilon, ...) to a connection. Their reference, one
// entry per function with its arguments, charge and errors, is written once,
// in docs/sql-reference.md; TestFunctionList pins the set, and
// TestSQLReferenceNamesEveryFunction checks that the reference names each.
//
// Every noisy function is registered as non-deterministic, so SQLite never
// folds or reuses a noisy value, and commits its charge on a separate ledger
// connection before it returns (see the ledger package). The functions
// that charge or change the scope are SQLITE_DIRECTONLY: SQLite refuses them
// in views, triggers and schema expressions, which whoever wrote the file's
// schema controls.
//
// The package calls SQLite only through an extension API table (see
// [Register] and package internal/sqlite): it links no SQLite symbol and does
// not depend on go-sqlite3, so a loadable extension can use it with its
// host's SQLite.
//
// dp_select_topm's aggregate form of earlier versions, dp_select_topm(features,
// label, options [, rowid]) over a SELECT, is refused with a message that
// names the table form: a per-row release is private only over a whole table.
package sqlfuncs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/version"
)

// Register adds every dpsql function to the SQLite connection db (a
// sqlite3*) whose calls charge scope (accountant.DefaultScope when empty). api is the
// extension API table (a const sqlite3_api_routines*) of the SQLite that
// opened db: every call into SQLite goes through it, so the same code serves
// a Go program (ext passes go-sqlite3's table and handle from its
// ConnectHook) and a loadable extension (the host's). The connection's file
// is the table's db_filename of its main database. It fails with a clear
// error when the SQLite is older than dpsql needs (3.34.0).
func Register(api, db unsafe.Pointer, scope string) (*Conn, error) {
	if db == nil {
		return nil, fmt.Errorf("dpsql: no SQLite connection handle")
	}
	if err := sqlite.SetAPI(api); err != nil {
		return nil, err
	}
	if scope == "" {
		scope = accountant.DefaultScope
	}
	h := sqlite.ConnOf(db)
	c := &Conn{db: h, path: h.Filename(), scope: scope, noise: release.NewNoise()}
	c.runs = h.CountRuns()
	for _, f := range c.functions() {
		if err := f.add(); err != nil {
			c.runs.Stop()
			return nil, fmt.Errorf("registering %s: %w", f.name, err)
		}
	}
	if c.path != "" {
		if err := ledger.RetainLedger(c.path); err != nil {
			c.runs.Stop()
			return nil, err
		}
	}
	conns.Store(uintptr(db), c)
	return c, nil
}

// Forget drops the state of a connection that is about to close (db, as
// passed to [Register]), and closes the file's ledger connection when no
// other connection uses it.
func Forget(db unsafe.Pointer) error {
	v, ok := conns.LoadAndDelete(uintptr(db))
	if !ok {
		return nil
	}
	c := v.(*Conn)
	c.runs.Stop()
	if c.path != "" {
		return ledger.ReleaseLedger(c.path)
	}
	return nil
}

// sqlFunction is one SQL function Register adds to a connection.
type sqlFunction struct {
	name string
	add  func() error
}

// The signature of every scalar SQL function (args.go): its name, each
// argument and what it must be.
var (
	sigVersion         = fn("dp_version")
	sigGDPEpsilon      = fn("gdp_epsilon", positive("mu"), probability("delta"))
	sigGDPDelta        = fn("gdp_delta", positive("mu"), nonNegative("epsilon"))
	sigGDPMu           = fn("gdp_mu", positive("epsilon"), probability("delta"))
	sigInit            = fn("dp_init", positive("mu")).optional(probability("delta"), text("scope"), neighbours)
	sigInitEpsilon     = fn("dp_init_epsilon", positive("epsilon"), probability("delta")).optional(text("scope"), neighbours)
	sigUseScope        = fn("dp_use_scope", text("scope"))
	sigScope           = fn("dp_scope")
	sigBudgetRemaining = fn("dp_budget_remaining").optional(text("scope"))
	sigSpend           = fn("gdp_spend", positive("mu")).optional(text("note"))
	sigGaussian        = fn("dp_gaussian", numberOrVector("x"), positive("sensitivity"), positive("mu")).
				or(numberOrVector("x"), positive("sensitivity"), positive("epsilon"), probability("delta"))
	sigLaplace    = fn("dp_laplace", number("x"), positive("sensitivity"), positive("epsilon"))
	sigTLaplace   = fn("dp_tlaplace", number("x"), positive("sensitivity"), positive("epsilon"), between("delta", 0.5))
	sigOptNoise   = fn("dp_optnoise", number("x"), positive("sensitivity"), positive("epsilon"), probability("delta")).optional(text("loss"))
	sigCost       = fn("dp_cost", value("mechanism_json"), probability("delta"))
	sigCostReport = fn("dp_cost_report", value("mechanism_json"), probability("delta"))
	sigEpsilon    = fn("dp_epsilon", probability("delta")).or(text("scope"), probability("delta"))
	sigVecSelect  = fn("dp_vec_select", vectorArg("x"), value("indices_json"))
	sigSelectTopm = fn("dp_select_topm", param{"table", tableName}, value("options"))
)

// neighbours is a new scope's neighbour relation.
var neighbours = oneOf("neighbours",
	mechanism.AddRemove, "one person's row added or removed",
	mechanism.ReplaceOne, "one row replaced by another; per-row releases such as dp_select_topm")

// tableName is dp_select_topm's table: TEXT naming a base table.
func tableName(v any) (any, error) {
	s, err := nonEmptyText(v)
	if err != nil {
		return s, fmt.Errorf("%w: pass the name of a base table, e.g. dp_select_topm('train', json_object(...))", err)
	}
	return s, nil
}

// functions is every SQL function dpsql adds to the connection, in the order
// of the package doc; Register adds them top to bottom.
func (c *Conn) functions() []sqlFunction {
	const pure, annotated = true, true
	return []sqlFunction{
		c.scalar(sigVersion, dpVersion, pure, !annotated),
		c.scalar(sigGDPEpsilon, gdpEpsilon, pure, annotated),
		c.scalar(sigGDPDelta, gdpDelta, pure, annotated),
		c.scalar(sigGDPMu, gdpMu, pure, annotated),
		c.scalar(sigInit, c.dpInit, !pure, annotated),
		c.scalar(sigInitEpsilon, c.dpInitEpsilon, !pure, annotated),
		c.scalar(sigUseScope, c.dpUseScope, !pure, annotated),
		c.scalar(sigScope, c.dpScope, !pure, annotated),
		c.scalar(sigBudgetRemaining, c.dpBudgetRemaining, !pure, annotated),
		c.scalar(sigSpend, c.gdpSpend, !pure, annotated),
		c.scalar(sigGaussian, c.dpGaussian, !pure, annotated),
		c.scalar(sigLaplace, c.dpLaplace, !pure, !annotated),
		c.scalar(sigTLaplace, c.dpTLaplace, !pure, !annotated),
		c.scalar(sigOptNoise, c.dpOptNoise, !pure, !annotated),
		c.scalar(sigCost, dpCost, pure, !annotated),
		c.scalar(sigCostReport, dpCostReport, pure, !annotated),
		c.scalar(sigEpsilon, c.dpEpsilon, !pure, !annotated),
		{"dp_avgmix", func() error {
			return registerAggregate(c.db, "dp_avgmix", 3, func() rowAggregate {
				return &avgmixAgg{c: c, rows: vectorRows{fn: "dp_avgmix"}}
			})
		}},
		// The table form: SQLite prefers this exact two-argument function to
		// the variadic aggregate below, which only refuses the old form.
		{"dp_select_topm", func() error {
			return register(c.db, &sqlFunc{name: "dp_select_topm", copyBlobs: true, scalar: call(sigSelectTopm, func(a *args) (any, error) {
				return c.dpSelectTopm(a.str("table", ""), a.raw("options"))
			})}, 2, 0)
		}},
		{"dp_select_topm", func() error {
			return register(c.db, &sqlFunc{name: "dp_select_topm", new: func() aggregate { return oldFormAggregate{} }}, -1, 0)
		}},
		{"dp_vec_sum", func() error {
			return register(c.db, &sqlFunc{name: "dp_vec_sum", new: func() aggregate { return vecSumAggregate{&vecSumAgg{c: c}} }}, 3, 0)
		}},
		{"dp_vec_select", func() error {
			var vs vecSelect
			return register(c.db, &sqlFunc{name: "dp_vec_select", copyBlobs: true, scalar: call(sigVecSelect, vs.call)}, -1, flagDeterministic)
		}},
	}
}

// oldFormAggregate is the refusing aggregate form of dp_select_topm.
type oldFormAggregate struct{ a selectTopmOldForm }

func (o oldFormAggregate) step(args []any) error { return o.a.Step(args...) }
func (o oldFormAggregate) final() (any, error)   { return o.a.Done() }

// vecSumAggregate is dp_vec_sum's aggregate (registered with 3 arguments).
type vecSumAggregate struct{ a *vecSumAgg }

func (v vecSumAggregate) step(args []any) error { return v.a.Step(args[0], args[1], args[2]) }
func (v vecSumAggregate) final() (any, error)   { return v.a.Done() }

// call is the Go body of a scalar SQL function of signature sig: the
// arguments are checked against sig before body runs, every error names the
// function once, and a panic becomes an error.
func call(sig signature, body func(a *args) (any, error)) func(args ...any) (any, error) {
	return func(raw ...any) (v any, err error) {
		defer guard(sig.name, &err)
		a, err := sig.parse(raw)
		if err != nil {
			return nil, named(sig.name, err)
		}
		v, err = body(a)
		return v, named(sig.name, err)
	}
}

// scalar is a scalar function (see call); pure ones SQLite may fold;
// annotated ones name, when they fail, the charges earlier calls of the same
// statement committed (see annotate).
func (c *Conn) scalar(sig signature, body func(a *args) (any, error), pure, annotated bool) sqlFunction {
	impl := call(sig, body)
	if annotated {
		checked := impl
		impl = func(args ...any) (any, error) {
			v, err := checked(args...)
			return v, c.annotate(err)
		}
	}
	flags := 0
	if pure {
		flags = flagDeterministic
	}
	return sqlFunction{sig.name, func() error {
		return register(c.db, &sqlFunc{name: sig.name, scalar: impl, copyBlobs: true}, -1, flags)
	}}
}

func dpVersion(*args) (any, error) { return version.Version, nil }

func (c *Conn) dpScope(*args) (any, error) { return c.Scope(), nil }

func gdpEpsilon(a *args) (any, error) {
	return accountant.Epsilon(a.num("mu", 0), a.num("delta", 0))
}

func gdpDelta(a *args) (any, error) {
	return accountant.Delta(a.num("mu", 0), a.num("epsilon", 0))
}

func gdpMu(a *args) (any, error) {
	return accountant.Mu(a.num("epsilon", 0), a.num("delta", 0))
}

func (c *Conn) initScope(fn string, b accountant.Budget) (any, error) {
	l, err := c.ledger()
	if err != nil {
		return nil, err
	}
	if err := c.canWriteLedger(fn); err != nil {
		return nil, err
	}
	if err := l.Init(context.Background(), b); err != nil {
		return nil, err
	}
	return b.Scope, nil
}

func (c *Conn) dpInit(a *args) (any, error) {
	b, err := accountant.NewBudget(a.str("scope", accountant.DefaultScope), a.num("mu", 0), 0, a.num("delta", 1e-5))
	if err != nil {
		return nil, err
	}
	b.Neighbours = a.str("neighbours", mechanism.AddRemove)
	return c.initScope("dp_init", b)
}

func (c *Conn) dpInitEpsilon(a *args) (any, error) {
	b, err := accountant.NewBudget(a.str("scope", accountant.DefaultScope), 0, a.num("epsilon", 0), a.num("delta", 0))
	if err != nil {
		return nil, err
	}
	b.Neighbours = a.str("neighbours", mechanism.AddRemove)
	return c.initScope("dp_init_epsilon", b)
}

// budget returns a scope's budget (its delta, its relation) without the
// accounting a status needs.
func (c *Conn) budget(scope string) (accountant.Budget, error) {
	l, err := c.ledger()
	if err != nil {
		return accountant.Budget{}, err
	}
	return l.Budget(context.Background(), scope)
}

func (c *Conn) dpUseScope(a *args) (any, error) {
	s := a.str("scope", "")
	if _, err := c.budget(s); err != nil {
		return nil, err
	}
	c.SetScope(s)
	return s, nil
}

func (c *Conn) dpBudgetRemaining(a *args) (any, error) {
	scope := c.Scope()
	if a.has("scope") {
		scope = a.str("scope", "")
		if err := c.otherScope("dp_budget_remaining", scope); err != nil {
			return nil, err
		}
	}
	l, err := c.ledger()
	if err != nil {
		return nil, err
	}
	// What can still be charged, the figure every surface shows (the room
	// of one more scalar dp_gaussian call, its sampler's error included),
	// stopped by an interrupt of the statement.
	ctx, stop := c.untilInterrupted()
	defer stop()
	st, err := l.Remaining(ctx, scope)
	if err != nil && ctx.Err() != nil {
		return nil, errors.New("dp_budget_remaining: the statement was interrupted")
	}
	if err != nil {
		return nil, err
	}
	return st.MuRemaining, nil
}

func (c *Conn) gdpSpend(a *args) (any, error) {
	rec := mechanism.External{Note: a.str("note", "")}
	r, err := c.Charge("gdp_spend", mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: a.num("mu", 0)}, rec, nil)
	if err != nil {
		return nil, err
	}
	return r.MuRemaining, nil
}

// numberOrVector is dp_gaussian's x: a finite number (float64), or a vector
// (float32 BLOB or JSON array TEXT, []float32).
func numberOrVector(name string) param {
	return param{name, func(v any) (any, error) {
		switch x := v.(type) {
		case int64, float64:
			return finiteNumber(v)
		case []byte:
			if x == nil {
				return nil, errors.New("must be a number or a vector (float32 BLOB or JSON array TEXT), got NULL")
			}
		case string:
			if !strings.HasPrefix(strings.TrimSpace(x), "[") {
				return nil, fmt.Errorf("must be a number or a vector (float32 BLOB or JSON array TEXT such as '[1, 2.5]'), got TEXT %q", abbreviateJSON([]byte(x)))
			}
		default:
			return nil, fmt.Errorf("must be a number or a vector (float32 BLOB or JSON array TEXT), got %s", typeName(v))
		}
		vec, err := decodeVector(v)
		if err != nil {
			return nil, detail{err}
		}
		return vec, nil
	}}
}

// dpGaussian implements dp_gaussian(x, sensitivity, mu) and
// dp_gaussian(x, sensitivity, epsilon, delta). x is a number, or a float32
// vector BLOB whose L2 sensitivity is given.
//
// The sensitivity is the caller's claim about x as SQLite computed it, and two
// SQLite facts can break it. An INTEGER x reaches this function as a float64:
// above 2^53 it is rounded (to a multiple of 2^(e-52) for x in [2^e, 2^(e+1)))
// before the noise, so one person can move the rounded value by up to one
// rounding step more than the stated sensitivity; keep integer aggregates below
// 2^53 (or give a sensitivity that covers the step). And SQLite's sum() over
// REAL values adds in floating point, in the order it reads the rows: the
// rounded sum of clipped values can move by more than the clip bound when one
// row is added or removed (Casacuberta, Shoemate, Vadhan and Wagaman,
// "Widespread Underestimation of Sensitivity in Differentially Private
// Libraries and How to Fix It", arXiv 2207.10635), so sum(min(max(v, -C), C))
// over REALs is not exactly C-sensitive. Sums of INTEGERs are exact (below
// 2^63); for REALs, scale to integers first or add a margin to the
// sensitivity.
func (c *Conn) dpGaussian(a *args) (any, error) {
	const fn = "dp_gaussian"
	var scalar []float64
	vec, _ := a.raw("x").([]float32)
	if vec == nil {
		scalar = []float64{a.num("x", 0)}
	}
	sens, mu := a.num("sensitivity", 0), a.num("mu", 0)
	var rec mechanism.Gaussian
	if a.has("epsilon") {
		eps, d := a.num("epsilon", 0), a.num("delta", 0)
		var err error
		if mu, err = accountant.Mu(eps, d); err != nil {
			return nil, err
		}
		rec.EpsilonRequested, rec.DeltaRequested = eps, d
	}
	dim := len(scalar) + len(vec)
	sigma, err := release.GaussianSigma(sens, mu, dim)
	if err != nil {
		return nil, err
	}
	rec.Dim, rec.Grid, rec.NoiseTV = dim, release.Grid(sigma), release.NoiseTVOf(dim)
	m := mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu, Sensitivity: sens, Sigma: sigma}
	if _, err := c.Charge(fn, m, rec, nil); err != nil {
		return nil, err
	}
	if vec != nil {
		c.noise.AddGaussian32(vec, sigma)
		return vector.Encode(vec), nil
	}
	c.noise.AddGaussian(scalar, sigma)
	if math.IsInf(scalar[0], 0) {
		return nil, errors.New("the noisy value overflowed")
	}
	return scalar[0], nil
}
