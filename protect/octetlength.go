package protect

import (
	"database/sql"
	"strconv"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// readDriver is the database/sql driver of the engine's read connections:
// go-sqlite3's, with octet_length added when the SQLite in use is older than
// 3.43.0, which lacks it (Debian 12's 3.40.1, under the libsqlite3 build).
// max_length's guards and the analyst's WHERE call it.
const readDriver = "dpsql_protect_read"

// octetLengthSince is the first SQLite with the built-in octet_length.
const octetLengthSince = 3043000

func init() {
	sql.Register(readDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if _, v, _ := sqlite3.Version(); v >= octetLengthSince {
			return nil
		}
		return c.RegisterFunc("octet_length", octetLength, true)
	}})
}

// octetLength is octet_length(X) as SQLite 3.43's built-in computes it in a
// UTF-8 database: the bytes of X's text representation (of a BLOB, its
// bytes), NULL for NULL. Unlike the built-in, which reads only a column's
// record header, a Go function receives the whole value, so on an older
// SQLite the guard's time grows with the value's size (docs/protected-mode.md).
func octetLength(x any) any {
	switch v := x.(type) {
	case string:
		return int64(len(v))
	case []byte:
		return int64(len(v))
	case int64:
		return int64(len(strconv.FormatInt(v, 10)))
	case float64:
		return int64(len(realText(v)))
	}
	return nil
}

// realText spells a REAL as SQLite does (1.0, 0.1, 1.0e+20, Inf).
func realText(v float64) string {
	s := strconv.FormatFloat(v, 'g', 15, 64)
	switch s {
	case "+Inf":
		return "Inf"
	case "-Inf", "NaN":
		return s
	}
	mant, exp, hasExp := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	if hasExp {
		return mant + "e" + exp
	}
	return mant
}
