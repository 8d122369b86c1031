package hostsql

import (
	"unsafe"

	"github.com/dpsql/dpsql/internal/sqlite"
)

// unsafePointer is a connection's handle as the exported functions take it.
func unsafePointer(c sqlite.Conn) unsafe.Pointer { return c.Handle() }
