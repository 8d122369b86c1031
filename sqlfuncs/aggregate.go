package sqlfuncs

/*
#include <stdlib.h>
#include "aggregate_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime/cgo"
	"unsafe"
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

// sqlFunc is what SQLite's user data points to: a scalar's Go body, or how
// to start an aggregate's run.
type sqlFunc struct {
	name   string
	scalar func(args ...any) (any, error)
	new    func() aggregate
	// copyBlobs makes []byte arguments copies that the function may keep;
	// otherwise they point into SQLite's memory, valid during the call only.
	copyBlobs bool
}

// aggregateRun is one run's state behind the handle in SQLite's aggregate
// context.
type aggregateRun struct {
	agg  aggregate
	args []any
}

// SQLite's function flags (sqlite3.h).
const (
	flagDeterministic = 0x000000800 // SQLITE_DETERMINISTIC: SQLite may fold or reuse calls
	flagDirectOnly    = 0x000080000 // SQLITE_DIRECTONLY (3.30): not from views, triggers or schema expressions
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

// RegisterDirectOnly adds the scalar SQL function name of nargs arguments
// (-1: any number) to the connection db (a sqlite3*, as passed to
// [Register]), marked SQLITE_DIRECTONLY: SQLite refuses it inside views,
// triggers and schema expressions, which whoever wrote the file's schema
// controls. It is for functions that change what protects the file, such as
// package protect's dp_protect and dp_unprotect. f receives the arguments as
// the package's functions do (int64, float64, string, []byte, a nil []byte
// for NULL); a panic in f becomes the call's error. Call it after Register.
func RegisterDirectOnly(db unsafe.Pointer, name string, nargs int, f func(args ...any) (any, error)) error {
	if _, ok := Lookup(db); !ok {
		return fmt.Errorf("registering %s: the connection has no dpsql functions: call Register first", name)
	}
	return register(db, &sqlFunc{name: name, scalar: wrap(name, f), copyBlobs: true}, nargs, flagDirectOnly)
}

// register adds f to the connection h through sqlite3_create_function_v2 over
// the API table: nargs arguments (-1: any number), flags as SQLite's
// (SQLITE_DIRECTONLY added for the directOnly functions).
func register(h unsafe.Pointer, f *sqlFunc, nargs, flags int) error {
	if h == nil {
		return errors.New("no SQLite handle")
	}
	if directOnly[f.name] {
		flags |= flagDirectOnly
	}
	app := cgo.NewHandle(f)
	cname := C.CString(f.name)
	defer C.free(unsafe.Pointer(cname))
	agg := C.int(0)
	if f.new != nil {
		agg = 1
	}
	// On failure SQLite calls the destructor, which deletes app.
	if rc := C.dpsql_create_function(h, cname, C.int(nargs), C.int(flags), C.uintptr_t(app), agg); rc != 0 {
		return fmt.Errorf("registering %s: SQLite error %d", f.name, int(rc))
	}
	return nil
}

// registerAggregate adds a release aggregate of nargs arguments whose rows
// reach step in one cgo call each, their BLOBs not copied: go-sqlite3's
// RegisterAggregator converts every argument by reflection and copies every
// BLOB, which cost about 10 µs a row (0.6 s of a 60,000-row release).
func registerAggregate(h unsafe.Pointer, name string, nargs int, new func() rowAggregate) error {
	if nargs > C.DPSQL_MAX_ARGS {
		return fmt.Errorf("registering %s: at most %d arguments", name, C.DPSQL_MAX_ARGS)
	}
	return register(h, &sqlFunc{name: name, new: func() aggregate { return textAggregate{new()} }}, nargs, 0)
}

// argValue converts one C argument to the Go value go-sqlite3 would pass:
// int64, float64, string, []byte, and a nil []byte for NULL. BLOBs are copied
// only with copyBlobs.
func argValue(a *C.dpsql_arg, copyBlobs bool) any {
	switch a._type {
	case 1:
		return int64(a.i)
	case 2:
		return float64(a.f)
	case 3:
		return C.GoStringN((*C.char)(a.p), a.n)
	case 4:
		if a.n == 0 {
			return []byte{}
		}
		b := unsafe.Slice((*byte)(a.p), int(a.n))
		if copyBlobs {
			return append([]byte(nil), b...)
		}
		return b
	}
	return []byte(nil)
}

// args converts a call's C arguments into buf.
func (f *sqlFunc) args(buf []any, argc C.int, argv *C.dpsql_arg) []any {
	buf = buf[:0]
	if argc > 0 {
		as := unsafe.Slice(argv, int(argc))
		for i := range as {
			buf = append(buf, argValue(&as[i], f.copyBlobs))
		}
	}
	return buf
}

// setError makes err the call's result.
func setError(ctx unsafe.Pointer, err error) {
	msg := err.Error()
	if msg == "" {
		msg = "error"
	}
	if len(msg) > math.MaxInt32/2 {
		msg = msg[:math.MaxInt32/2]
	}
	C.dpsql_result_error(ctx, (*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.int(len(msg)))
}

// setResult makes v the call's result, converted as go-sqlite3 converts a
// function's result: nil is NULL, integers and booleans INTEGER, floats
// REAL, a string TEXT, a []byte a BLOB (an empty one NULL).
func setResult(ctx unsafe.Pointer, res *C.dpsql_res, name string, v any) {
	switch x := v.(type) {
	case nil:
		res._type = 5
	case int64:
		res._type, res.i = 1, C.longlong(x)
	case int:
		res._type, res.i = 1, C.longlong(x)
	case int32:
		res._type, res.i = 1, C.longlong(x)
	case bool:
		res._type = 1
		if x {
			res.i = 1
		}
	case float64:
		res._type, res.f = 2, C.double(x)
	case float32:
		res._type, res.f = 2, C.double(x)
	case string:
		if len(x) == 0 {
			C.dpsql_result_text(ctx, nil, 0)
			return
		}
		C.dpsql_result_text(ctx, (*C.char)(unsafe.Pointer(unsafe.StringData(x))), C.longlong(len(x)))
	case []byte:
		if len(x) == 0 {
			res._type = 5
			return
		}
		C.dpsql_result_blob(ctx, unsafe.Pointer(&x[0]), C.longlong(len(x)))
	default:
		setError(ctx, fmt.Errorf("%s: internal error (please report): cannot return a %T to SQLite", name, v))
	}
}

// recovered turns a panic into the call's error: no panic crosses SQLite.
func recovered(ctx unsafe.Pointer, name string) {
	if r := recover(); r != nil {
		setError(ctx, fmt.Errorf("%s: internal error (please report): %v", name, r))
	}
}

//export dpsqlFunc
func dpsqlFunc(app C.uintptr_t, ctx unsafe.Pointer, argc C.int, argv *C.dpsql_arg, res *C.dpsql_res) {
	f := cgo.Handle(app).Value().(*sqlFunc)
	defer recovered(ctx, f.name)
	var buf [C.DPSQL_MAX_ARGS]any
	v, err := f.scalar(f.args(buf[:], argc, argv)...)
	if err != nil {
		setError(ctx, err)
		return
	}
	setResult(ctx, res, f.name, v)
}

//export dpsqlStep
func dpsqlStep(app C.uintptr_t, ctx unsafe.Pointer, agg *C.uintptr_t, argc C.int, argv *C.dpsql_arg) {
	f := cgo.Handle(app).Value().(*sqlFunc)
	defer recovered(ctx, f.name)
	if *agg == 0 {
		*agg = C.uintptr_t(cgo.NewHandle(&aggregateRun{agg: f.new()}))
	}
	run := cgo.Handle(*agg).Value().(*aggregateRun)
	run.args = f.args(run.args, argc, argv)
	err := run.agg.step(run.args)
	clear(run.args) // drop the references to SQLite's memory
	if err != nil {
		setError(ctx, err)
	}
}

//export dpsqlFinal
func dpsqlFinal(app C.uintptr_t, ctx unsafe.Pointer, agg C.uintptr_t, res *C.dpsql_res) {
	f := cgo.Handle(app).Value().(*sqlFunc)
	defer recovered(ctx, f.name)
	var a aggregate
	if agg == 0 {
		a = f.new() // no rows
	} else {
		h := cgo.Handle(agg)
		a = h.Value().(*aggregateRun).agg
		h.Delete()
	}
	v, err := a.final()
	if err != nil {
		setError(ctx, err)
		return
	}
	setResult(ctx, res, f.name, v)
}

//export dpsqlDestroy
func dpsqlDestroy(app C.uintptr_t) { cgo.Handle(app).Delete() }
