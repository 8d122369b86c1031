package sqlfuncs

/*
#include <stdlib.h>
#include "aggregate_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
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

// aggregateFunc is what SQLite's user data points to: how to start a run.
type aggregateFunc struct {
	name string
	new  func() rowAggregate
}

// aggregateRun is one run's state behind the handle in SQLite's aggregate
// context.
type aggregateRun struct {
	agg  rowAggregate
	args []any
}

// registerAggregate adds an aggregate SQL function of nargs arguments to the
// connection h through SQLite's C API. Each row reaches step in one cgo call,
// its BLOBs unconverted: go-sqlite3's RegisterAggregator converts every
// argument by reflection and copies every BLOB, which costs about 10 µs a row
// (0.6 s of a 60,000-row release).
func registerAggregate(h unsafe.Pointer, name string, nargs int, new func() rowAggregate) error {
	if h == nil {
		return errors.New("no SQLite handle")
	}
	if nargs > C.DPSQL_MAX_ARGS {
		return fmt.Errorf("registering %s: at most %d arguments", name, C.DPSQL_MAX_ARGS)
	}
	app := cgo.NewHandle(&aggregateFunc{name: name, new: new})
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	// On failure SQLite calls the destructor, which frees app.
	if rc := C.dpsql_create_aggregate(h, cname, C.int(nargs), C.uintptr_t(app)); rc != 0 {
		return fmt.Errorf("registering %s: SQLite error %d", name, int(rc))
	}
	return nil
}

// argValue converts one C argument to the Go value go-sqlite3 would pass:
// int64, float64, string, []byte, and a nil []byte for NULL. BLOBs are not
// copied.
func argValue(a *C.dpsql_arg) any {
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
		return unsafe.Slice((*byte)(a.p), int(a.n))
	}
	return []byte(nil)
}

//export dpsqlAggStep
func dpsqlAggStep(app C.uintptr_t, ctx *C.uintptr_t, argc C.int, argv *C.dpsql_arg) (msg *C.char) {
	f := cgo.Handle(app).Value().(*aggregateFunc)
	defer func() {
		if r := recover(); r != nil {
			msg = C.CString(fmt.Sprintf("%s: internal error (please report): %v", f.name, r))
		}
	}()
	if *ctx == 0 {
		*ctx = C.uintptr_t(cgo.NewHandle(&aggregateRun{agg: f.new()}))
	}
	run := cgo.Handle(*ctx).Value().(*aggregateRun)
	args := unsafe.Slice(argv, int(argc))
	run.args = run.args[:0]
	for i := range args {
		run.args = append(run.args, argValue(&args[i]))
	}
	err := run.agg.step(run.args)
	clear(run.args) // drop the references to SQLite's memory
	if err != nil {
		return C.CString(err.Error())
	}
	return nil
}

//export dpsqlAggFinal
func dpsqlAggFinal(app C.uintptr_t, ctx C.uintptr_t, result **C.char) (msg *C.char) {
	f := cgo.Handle(app).Value().(*aggregateFunc)
	defer func() {
		if r := recover(); r != nil {
			msg = C.CString(fmt.Sprintf("%s: internal error (please report): %v", f.name, r))
		}
	}()
	var agg rowAggregate
	if ctx == 0 {
		agg = f.new() // no rows
	} else {
		h := cgo.Handle(ctx)
		agg = h.Value().(*aggregateRun).agg
		h.Delete()
	}
	out, err := agg.done()
	if err != nil {
		return C.CString(err.Error())
	}
	*result = C.CString(out)
	return nil
}

//export dpsqlAggDestroy
func dpsqlAggDestroy(app C.uintptr_t) { cgo.Handle(app).Delete() }
