// Package sqlfuncs is dpsql's SQL surface: it checks arguments, decodes BLOB
// vectors, charges the ledger (package accountant) and calls the mechanisms
// (package release). It holds no mathematics of its own.
//
// [Register] adds dpsql's SQL functions (dp_init, dp_gaussian, dp_avgmix,
// dp_select_topm, gdp_epsilon, ...) to a connection. Their reference, one
// entry per function with its arguments, charge and errors, is written once,
// in docs/sql-reference.md; TestFunctionList pins the set, and
// TestSQLReferenceNamesEveryFunction checks that the reference names each.
//
// Every noisy function is registered as non-deterministic, so SQLite never
// folds or reuses a noisy value, and commits its charge on a separate ledger
// connection before it returns (see the accountant package). The functions
// that charge or change the scope are SQLITE_DIRECTONLY: SQLite refuses them
// in views, triggers and schema expressions, which whoever wrote the file's
// schema controls.
//
// The package calls SQLite only through an extension API table (see
// [Register]): it links no SQLite symbol and does not depend on go-sqlite3,
// so a loadable extension can use it with its host's SQLite.
//
// dp_select_topm's aggregate form of earlier versions, dp_select_topm(features,
// label, options [, rowid]) over a SELECT, is refused with a message that
// names the table form: a per-row release is private only over a whole table.
package sqlfuncs

import (
	"context"
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

// functions is every SQL function dpsql adds to the connection, in the order
// of the package doc; Register adds them top to bottom.
func (c *Conn) functions() []sqlFunction {
	const pure, annotated = true, true
	return []sqlFunction{
		c.scalar("dp_version", dpVersion, pure, !annotated),
		c.scalar("gdp_epsilon", gdpEpsilon, pure, annotated),
		c.scalar("gdp_delta", gdpDelta, pure, annotated),
		c.scalar("gdp_mu", gdpMu, pure, annotated),
		c.scalar("dp_init", c.dpInit, !pure, annotated),
		c.scalar("dp_init_epsilon", c.dpInitEpsilon, !pure, annotated),
		c.scalar("dp_use_scope", c.dpUseScope, !pure, annotated),
		c.scalar("dp_scope", c.dpScope, !pure, annotated),
		c.scalar("dp_budget_remaining", c.dpBudgetRemaining, !pure, annotated),
		c.scalar("gdp_spend", c.gdpSpend, !pure, annotated),
		c.scalar("dp_gaussian", c.dpGaussian, !pure, annotated),
		c.scalar("dp_laplace", c.dpLaplace, !pure, !annotated),
		c.scalar("dp_tlaplace", c.dpTLaplace, !pure, !annotated),
		c.scalar("dp_optnoise", c.dpOptNoise, !pure, !annotated),
		c.scalar("dp_cost", dpCost, pure, !annotated),
		c.scalar("dp_cost_report", dpCostReport, pure, !annotated),
		c.scalar("dp_epsilon", c.dpEpsilon, !pure, !annotated),
		{"dp_avgmix", func() error {
			return registerAggregate(c.db, "dp_avgmix", 3, func() rowAggregate {
				return &avgmixAgg{c: c, rows: vectorRows{fn: "dp_avgmix"}}
			})
		}},
		// The table form: SQLite prefers this exact two-argument function to
		// the variadic aggregate below, which only refuses the old form.
		{"dp_select_topm", func() error {
			return register(c.db, &sqlFunc{name: "dp_select_topm", copyBlobs: true, scalar: func(args ...any) (any, error) {
				return c.dpSelectTopm(args[0], args[1])
			}}, 2, 0)
		}},
		{"dp_select_topm", func() error {
			return register(c.db, &sqlFunc{name: "dp_select_topm", new: func() aggregate { return oldFormAggregate{} }}, -1, 0)
		}},
		{"dp_vec_sum", func() error {
			return register(c.db, &sqlFunc{name: "dp_vec_sum", new: func() aggregate { return vecSumAggregate{&vecSumAgg{c: c}} }}, 3, 0)
		}},
		{"dp_vec_select", func() error {
			var vs vecSelect
			return register(c.db, &sqlFunc{name: "dp_vec_select", copyBlobs: true, scalar: wrap("dp_vec_select", vs.call)}, -1, flagDeterministic)
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

// scalar is a scalar function: f runs under guard (a panic becomes an
// error); pure ones SQLite may fold; annotated ones name, when they fail, the
// charges earlier calls of the same statement committed (see annotate).
func (c *Conn) scalar(name string, f func(args ...any) (any, error), pure, annotated bool) sqlFunction {
	impl := wrap(name, f)
	if annotated {
		guarded := impl
		impl = func(args ...any) (any, error) {
			v, err := guarded(args...)
			return v, c.annotate(err)
		}
	}
	flags := 0
	if pure {
		flags = flagDeterministic
	}
	return sqlFunction{name, func() error {
		return register(c.db, &sqlFunc{name: name, scalar: impl, copyBlobs: true}, -1, flags)
	}}
}

func dpVersion(args ...any) (any, error) {
	return version.Version, arity("dp_version", args, 0, 0, "no arguments")
}

func (c *Conn) dpScope(args ...any) (any, error) {
	return c.Scope(), arity("dp_scope", args, 0, 0, "no arguments")
}

func wrap(name string, f func(args ...any) (any, error)) func(args ...any) (any, error) {
	return func(args ...any) (v any, err error) {
		defer guard(name, &err)
		return f(args...)
	}
}

func gdpEpsilon(args ...any) (any, error) {
	const fn = "gdp_epsilon"
	if err := arity(fn, args, 2, 2, "(mu, delta)"); err != nil {
		return nil, err
	}
	mu, err := positive(fn, "mu", args[0])
	if err != nil {
		return nil, err
	}
	d, err := probability(fn, "delta", args[1])
	if err != nil {
		return nil, err
	}
	return accountant.Epsilon(mu, d)
}

func gdpDelta(args ...any) (any, error) {
	const fn = "gdp_delta"
	if err := arity(fn, args, 2, 2, "(mu, epsilon)"); err != nil {
		return nil, err
	}
	mu, err := positive(fn, "mu", args[0])
	if err != nil {
		return nil, err
	}
	e, err := number(fn, "epsilon", args[1])
	if err != nil {
		return nil, err
	}
	if e < 0 {
		return nil, argError(fn, "epsilon", "must be >= 0, got %v", e)
	}
	return accountant.Delta(mu, e)
}

func gdpMu(args ...any) (any, error) {
	const fn = "gdp_mu"
	if err := arity(fn, args, 2, 2, "(epsilon, delta)"); err != nil {
		return nil, err
	}
	e, err := positive(fn, "epsilon", args[0])
	if err != nil {
		return nil, err
	}
	d, err := probability(fn, "delta", args[1])
	if err != nil {
		return nil, err
	}
	return accountant.Mu(e, d)
}

func (c *Conn) initScope(fn string, b accountant.Budget) (any, error) {
	l, err := c.ledger()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if err := c.canWriteLedger(fn); err != nil {
		return nil, err
	}
	if err := l.Init(context.Background(), b); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return b.Scope, nil
}

func optScope(fn string, args []any, i int) (string, error) {
	if len(args) <= i {
		return accountant.DefaultScope, nil
	}
	return text(fn, "scope", args[i])
}

func (c *Conn) dpInit(args ...any) (any, error) {
	const fn = "dp_init"
	if err := arity(fn, args, 1, 4, "(mu [, delta [, scope [, neighbours]]])"); err != nil {
		return nil, err
	}
	mu, err := positive(fn, "mu", args[0])
	if err != nil {
		return nil, err
	}
	d := 1e-5
	if len(args) > 1 {
		if d, err = probability(fn, "delta", args[1]); err != nil {
			return nil, err
		}
	}
	scope, err := optScope(fn, args, 2)
	if err != nil {
		return nil, err
	}
	b, err := accountant.NewBudget(scope, mu, 0, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if b.Neighbours, err = optNeighbours(fn, args, 3); err != nil {
		return nil, err
	}
	return c.initScope(fn, b)
}

// optNeighbours reads the optional neighbour relation of a new scope.
func optNeighbours(fn string, args []any, i int) (string, error) {
	if len(args) <= i {
		return mechanism.AddRemove, nil
	}
	n, err := text(fn, "neighbours", args[i])
	if err != nil {
		return "", err
	}
	if n != mechanism.AddRemove && n != mechanism.ReplaceOne {
		return "", argError(fn, "neighbours", "must be '%s' (one person's row added or removed) or '%s' (one row replaced by another; per-row releases such as dp_select_topm), got %q", mechanism.AddRemove, mechanism.ReplaceOne, n)
	}
	return n, nil
}

func (c *Conn) dpInitEpsilon(args ...any) (any, error) {
	const fn = "dp_init_epsilon"
	if err := arity(fn, args, 2, 4, "(epsilon, delta [, scope [, neighbours]])"); err != nil {
		return nil, err
	}
	e, err := positive(fn, "epsilon", args[0])
	if err != nil {
		return nil, err
	}
	d, err := probability(fn, "delta", args[1])
	if err != nil {
		return nil, err
	}
	scope, err := optScope(fn, args, 2)
	if err != nil {
		return nil, err
	}
	b, err := accountant.NewBudget(scope, 0, e, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if b.Neighbours, err = optNeighbours(fn, args, 3); err != nil {
		return nil, err
	}
	return c.initScope(fn, b)
}

// budget returns a scope's budget (its delta, its relation) without the
// accounting a status needs.
func (c *Conn) budget(fn, scope string) (accountant.Budget, error) {
	l, err := c.ledger()
	if err != nil {
		return accountant.Budget{}, fmt.Errorf("%s: %w", fn, err)
	}
	b, err := l.Budget(context.Background(), scope)
	if err != nil {
		return b, fmt.Errorf("%s: %w", fn, err)
	}
	return b, nil
}

func (c *Conn) status(fn, scope string) (ledger.Status, error) {
	l, err := c.ledger()
	if err != nil {
		return ledger.Status{}, fmt.Errorf("%s: %w", fn, err)
	}
	st, err := l.Remaining(context.Background(), scope)
	if err != nil {
		return st, fmt.Errorf("%s: %w", fn, err)
	}
	return st, nil
}

func (c *Conn) dpUseScope(args ...any) (any, error) {
	const fn = "dp_use_scope"
	if err := arity(fn, args, 1, 1, "(scope)"); err != nil {
		return nil, err
	}
	s, err := text(fn, "scope", args[0])
	if err != nil {
		return nil, err
	}
	if _, err := c.budget(fn, s); err != nil {
		return nil, err
	}
	c.SetScope(s)
	return s, nil
}

func (c *Conn) dpBudgetRemaining(args ...any) (any, error) {
	const fn = "dp_budget_remaining"
	if err := arity(fn, args, 0, 1, "([scope])"); err != nil {
		return nil, err
	}
	scope := c.Scope()
	if len(args) == 1 {
		var err error
		if scope, err = text(fn, "scope", args[0]); err != nil {
			return nil, err
		}
		if err := c.otherScope(fn, scope); err != nil {
			return nil, err
		}
	}
	l, err := c.ledger()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	// The room of one more scalar dp_gaussian call, its sampler's error included.
	r, err := l.GaussianRoom(context.Background(), scope, release.NoiseTVOf(1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return r, nil
}

func (c *Conn) gdpSpend(args ...any) (any, error) {
	const fn = "gdp_spend"
	if err := arity(fn, args, 1, 2, "(mu [, note])"); err != nil {
		return nil, err
	}
	mu, err := positive(fn, "mu", args[0])
	if err != nil {
		return nil, err
	}
	var rec mechanism.External
	if len(args) == 2 {
		if rec.Note, err = text(fn, "note", args[1]); err != nil {
			return nil, err
		}
	}
	r, err := c.Charge(fn, mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: mu}, rec, nil)
	if err != nil {
		return nil, err
	}
	return r.MuRemaining, nil
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
func (c *Conn) dpGaussian(args ...any) (any, error) {
	const fn = "dp_gaussian"
	if err := arity(fn, args, 3, 4, "(x, sensitivity, mu) or (x, sensitivity, epsilon, delta)"); err != nil {
		return nil, err
	}
	var scalar []float64
	var vec []float32
	switch args[0].(type) {
	case int64, float64:
		x, err := number(fn, "x", args[0])
		if err != nil {
			return nil, err
		}
		scalar = []float64{x}
	case []byte, string:
		if b, ok := args[0].([]byte); ok && b == nil {
			return nil, argError(fn, "x", "must be a number or a vector (float32 BLOB or JSON array TEXT), got NULL")
		}
		if s, ok := args[0].(string); ok && !strings.HasPrefix(strings.TrimSpace(s), "[") {
			return nil, argError(fn, "x", "must be a number or a vector (float32 BLOB or JSON array TEXT such as '[1, 2.5]'), got TEXT %q", abbreviateJSON([]byte(s)))
		}
		var err error
		if vec, err = decodeVector(args[0]); err != nil {
			return nil, fmt.Errorf("%s: x: %w", fn, err)
		}
	default:
		return nil, argError(fn, "x", "must be a number or a vector (float32 BLOB or JSON array TEXT), got %s", typeName(args[0]))
	}
	sens, err := positive(fn, "sensitivity", args[1])
	if err != nil {
		return nil, err
	}
	var mu float64
	var rec mechanism.Gaussian
	if len(args) == 3 {
		if mu, err = positive(fn, "mu", args[2]); err != nil {
			return nil, err
		}
	} else {
		eps, err := positive(fn, "epsilon", args[2])
		if err != nil {
			return nil, err
		}
		d, err := probability(fn, "delta", args[3])
		if err != nil {
			return nil, err
		}
		if mu, err = accountant.Mu(eps, d); err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		rec.EpsilonRequested, rec.DeltaRequested = eps, d
	}
	dim := len(scalar) + len(vec)
	sigma, err := release.GaussianSigma(sens, mu, dim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
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
		return nil, fmt.Errorf("%s: the noisy value overflowed", fn)
	}
	return scalar[0], nil
}
