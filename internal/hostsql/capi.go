package hostsql

/*
#cgo CFLAGS: -I${SRCDIR}/../../third_party/sqlite
#include "hostsql.h"
*/
import "C"

import (
	"unsafe"
)

// minVersion is the oldest SQLite whose API table has every routine hostsql
// calls (bind_text64 and bind_blob64 came in 3.8.7; changes64, 3.37, is
// called only when present).
const minVersion = 3008007

type capi = *C.api_t

func apiOf(p unsafe.Pointer) capi { return capi(p) }

// cstr returns a C string copy of s, to be freed with C.free.
func cstr(s string) *C.char { return C.CString(s) }

func cfree(p *C.char) { C.free(unsafe.Pointer(p)) }

// unsafePointer is a connection handle as the exported functions take it.
func unsafePointer(db *C.sqlite3) unsafe.Pointer { return unsafe.Pointer(db) }
