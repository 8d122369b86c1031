package sqlfuncs

import (
	"errors"

	"github.com/dpsql/dpsql/internal/sqlite"
)

// rowAggregate is one run of a release aggregate (dp_avgmix): step sees each
// row's arguments, done makes the result. Values passed to step are valid
// only during the call ([]byte arguments point into SQLite's memory): step
// copies what it keeps.
type rowAggregate interface {
	step(args []any) error
	done() (string, error)
}

// aggregate is one run of any aggregate SQL function: step sees each row's
// arguments, final makes the result (a value as a scalar returns).
type aggregate interface {
	step(args []any) error
	final() (any, error)
}

// textAggregate is a rowAggregate as an aggregate.
type textAggregate struct{ rowAggregate }

func (a textAggregate) final() (any, error) { return a.done() }

// sqlFunc is one of dpsql's SQL functions: a scalar's Go body, or how to
// start an aggregate's run.
type sqlFunc struct {
	name   string
	scalar func(args ...any) (any, error)
	new    func() aggregate
	// copyBlobs makes []byte arguments copies that the function may keep;
	// otherwise they point into SQLite's memory, valid during the call only.
	copyBlobs bool
}

// SQLite's function flags.
const (
	flagDeterministic = sqlite.Deterministic // SQLite may fold or reuse calls
	flagDirectOnly    = sqlite.DirectOnly    // not from views, triggers or schema expressions
)

// directOnly names the functions that spend budget, write the ledger or a
// release, or change the scope a connection charges. SQLite refuses them
// (SQLITE_DIRECTONLY) inside views, triggers, CHECK constraints, defaults and
// generated columns, so that whoever wrote the schema of a file (a copy
// received from someone else) cannot make a curator's plain SELECT from a
// view spend the curator's budget: they run only in the SQL the connection's
// own caller writes.
var directOnly = map[string]bool{
	"dp_init": true, "dp_init_epsilon": true, "dp_use_scope": true, "gdp_spend": true,
	"dp_gaussian": true, "dp_laplace": true, "dp_tlaplace": true, "dp_optnoise": true,
	"dp_avgmix": true, "dp_select_topm": true, "dp_vec_sum": true,
}

// register adds f to the connection through package sqlite's function shim:
// nargs arguments (-1: any number), flags as SQLite's (SQLITE_DIRECTONLY
// added for the directOnly functions).
func register(db sqlite.Conn, f *sqlFunc, nargs, flags int) error {
	if !db.Valid() {
		return errors.New("no SQLite handle")
	}
	if directOnly[f.name] {
		flags |= flagDirectOnly
	}
	sf := &sqlite.Func{Name: f.name, NArgs: nargs, Flags: flags, CopyBlobs: f.copyBlobs}
	if f.scalar != nil {
		body := f.scalar
		sf.Scalar = func(args []any) (any, error) { return body(args...) }
	} else {
		newAgg, name := f.new, f.name
		sf.New = func() sqlite.Aggregate { return aggregateRun{newAgg(), name} }
	}
	return db.CreateFunction(sf)
}

// aggregateRun is an aggregate as package sqlite runs it; its errors name
// the function once.
type aggregateRun struct {
	a    aggregate
	name string
}

func (r aggregateRun) Step(args []any) error { return named(r.name, r.a.step(args)) }

func (r aggregateRun) Final() (any, error) {
	v, err := r.a.final()
	return v, named(r.name, err)
}

// registerAggregate adds a release aggregate of nargs arguments whose rows
// reach step in one cgo call each, their BLOBs not copied: go-sqlite3's
// RegisterAggregator converts every argument by reflection and copies every
// BLOB, which cost about 10 µs a row (0.6 s of a 60,000-row release).
func registerAggregate(db sqlite.Conn, name string, nargs int, new func() rowAggregate) error {
	return register(db, &sqlFunc{name: name, new: func() aggregate { return textAggregate{new()} }}, nargs, 0)
}
