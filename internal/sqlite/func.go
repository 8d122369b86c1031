package sqlite

/*
#include <stdlib.h>
#define DPSQL_API dpsql_api
#include "dpsqlapi.h"
#include "func.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime/cgo"
	"unsafe"
)

// Function flags (sqlite3_create_function_v2's).
const (
	Deterministic = 0x000000800 // SQLITE_DETERMINISTIC: SQLite may fold or reuse calls
	DirectOnly    = 0x000080000 // SQLITE_DIRECTONLY (3.30): not from views, triggers or schema expressions
)

// Func is an SQL function whose body is Go: a scalar (Scalar set) or an
// aggregate (New set). Its arguments reach Go as go-sqlite3's RegisterFunc
// passed them: int64, float64, string, []byte, and a nil []byte for NULL.
type Func struct {
	Name  string
	NArgs int // -1: any number
	Flags int // Deterministic, DirectOnly
	// Scalar computes a call's result from its arguments.
	Scalar func(args []any) (any, error)
	// New starts one run of an aggregate (one group of rows).
	New func() Aggregate
	// CopyBlobs makes []byte arguments copies the function may keep;
	// otherwise they point into SQLite's memory, valid during the call only.
	CopyBlobs bool
}

// Aggregate is one run of an aggregate SQL function: Step sees each row's
// arguments (valid only during the call unless the function's CopyBlobs is
// set), Final makes the result, a value as a scalar returns.
type Aggregate interface {
	Step(args []any) error
	Final() (any, error)
}

// aggregateRun is one run's state behind the handle in SQLite's aggregate
// context.
type aggregateRun struct {
	agg  Aggregate
	args []any
}

// CreateFunction adds f to the connection (sqlite3_create_function_v2 over
// the table [SetAPI] set, which must be the connection's). Results are
// converted as go-sqlite3 converts a function's result: nil is NULL, integers
// and booleans INTEGER, floats REAL, a string TEXT, a []byte a BLOB (an empty
// one NULL); an error is the call's error, and a panic becomes one too.
func (c Conn) CreateFunction(f *Func) error {
	if c.db == nil {
		return errors.New("no SQLite handle")
	}
	if unsafe.Pointer(c.api) != processTable() {
		return fmt.Errorf("registering %s: the connection's SQLite is not the process's (call SetAPI with its table first)", f.Name)
	}
	if (f.Scalar == nil) == (f.New == nil) {
		return fmt.Errorf("registering %s: a function is a scalar or an aggregate", f.Name)
	}
	app := cgo.NewHandle(f)
	cname := C.CString(f.Name)
	defer C.free(unsafe.Pointer(cname))
	agg := C.int(0)
	if f.New != nil {
		agg = 1
	}
	// On failure SQLite calls the destructor, which deletes app.
	if rc := C.dpsql_create_function(unsafe.Pointer(c.db), cname, C.int(f.NArgs), C.int(f.Flags), C.uintptr_t(app), agg); rc != 0 {
		return fmt.Errorf("registering %s: SQLite error %d", f.Name, int(rc))
	}
	return nil
}

// argValue converts one C argument to the Go value go-sqlite3 would pass:
// int64, float64, string, []byte, and a nil []byte for NULL. BLOBs are copied
// only with copyBlobs.
func argValue(a *C.dpsql_arg, copyBlobs bool) any {
	switch a._type {
	case C.SQLITE_INTEGER:
		return int64(a.i)
	case C.SQLITE_FLOAT:
		return float64(a.f)
	case C.SQLITE_TEXT:
		return C.GoStringN((*C.char)(a.p), a.n)
	case C.SQLITE_BLOB:
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
func (f *Func) args(buf []any, argc C.int, argv *C.dpsql_arg) []any {
	buf = buf[:0]
	if argc > 0 {
		as := unsafe.Slice(argv, int(argc))
		for i := range as {
			buf = append(buf, argValue(&as[i], f.CopyBlobs))
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

// setResult makes v the call's result (see CreateFunction).
func setResult(ctx unsafe.Pointer, res *C.dpsql_res, name string, v any) {
	switch x := v.(type) {
	case nil:
		res._type = C.SQLITE_NULL
	case int64:
		res._type, res.i = C.SQLITE_INTEGER, C.longlong(x)
	case int:
		res._type, res.i = C.SQLITE_INTEGER, C.longlong(x)
	case int32:
		res._type, res.i = C.SQLITE_INTEGER, C.longlong(x)
	case bool:
		res._type = C.SQLITE_INTEGER
		if x {
			res.i = 1
		}
	case float64:
		res._type, res.f = C.SQLITE_FLOAT, C.double(x)
	case float32:
		res._type, res.f = C.SQLITE_FLOAT, C.double(x)
	case string:
		if len(x) == 0 {
			C.dpsql_result_text(ctx, nil, 0)
			return
		}
		C.dpsql_result_text(ctx, (*C.char)(unsafe.Pointer(unsafe.StringData(x))), C.longlong(len(x)))
	case []byte:
		if len(x) == 0 {
			res._type = C.SQLITE_NULL
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
	f := cgo.Handle(app).Value().(*Func)
	defer recovered(ctx, f.Name)
	var buf [C.DPSQL_MAX_ARGS]any
	v, err := f.Scalar(f.args(buf[:], argc, argv))
	if err != nil {
		setError(ctx, err)
		return
	}
	setResult(ctx, res, f.Name, v)
}

//export dpsqlStep
func dpsqlStep(app C.uintptr_t, ctx unsafe.Pointer, agg *C.uintptr_t, argc C.int, argv *C.dpsql_arg) {
	f := cgo.Handle(app).Value().(*Func)
	defer recovered(ctx, f.Name)
	if *agg == 0 {
		*agg = C.uintptr_t(cgo.NewHandle(&aggregateRun{agg: f.New()}))
	}
	run := cgo.Handle(*agg).Value().(*aggregateRun)
	run.args = f.args(run.args, argc, argv)
	err := run.agg.Step(run.args)
	clear(run.args) // drop the references to SQLite's memory
	if err != nil {
		setError(ctx, err)
	}
}

//export dpsqlFinal
func dpsqlFinal(app C.uintptr_t, ctx unsafe.Pointer, agg C.uintptr_t, res *C.dpsql_res) {
	f := cgo.Handle(app).Value().(*Func)
	defer recovered(ctx, f.Name)
	var a Aggregate
	if agg == 0 {
		a = f.New() // no rows
	} else {
		h := cgo.Handle(agg)
		a = h.Value().(*aggregateRun).agg
		h.Delete()
	}
	v, err := a.Final()
	if err != nil {
		setError(ctx, err)
		return
	}
	setResult(ctx, res, f.Name, v)
}

//export dpsqlDestroy
func dpsqlDestroy(app C.uintptr_t) { cgo.Handle(app).Delete() }
