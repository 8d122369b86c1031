package sqlfuncs

import (
	"reflect"
	"unsafe"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// dbHandle returns the sqlite3* behind a go-sqlite3 connection, or nil. This is
// the one place dpsql reads go-sqlite3's private state: the package does not
// export the handle, which the C shims (handle.go, aggregate_shim.c) need.
// The field is found by name, so a go-sqlite3 release that renames it or
// changes its type makes Register fail with a clear error, and
// TestDBHandle fail, rather than anything read at a wrong offset.
func dbHandle(c *sqlite3.SQLiteConn) unsafe.Pointer { return pointerField(c, "db") }

// pointerField reads the pointer-typed field name of the struct p points to;
// nil when p is not a non-nil pointer to a struct with such a field.
func pointerField(p any, name string) unsafe.Pointer {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f, ok := v.Elem().Type().FieldByName(name)
	if !ok || len(f.Index) != 1 || f.Type.Kind() != reflect.Pointer && f.Type.Kind() != reflect.UnsafePointer {
		return nil
	}
	return *(*unsafe.Pointer)(unsafe.Add(v.UnsafePointer(), f.Offset))
}
