package sqlfuncs

import (
	"database/sql"
	"path/filepath"
	"testing"
	"unsafe"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// TestDBHandle checks that dbHandle finds the real sqlite3* of a go-sqlite3
// connection: SQLite, asked through the handle, names the connection's file.
func TestDBHandle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	var got, want string
	var h unsafe.Pointer
	sql.Register("sqlite3_handle_test", &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		h = dbHandle(c)
		got, want = handleFilename(h), c.GetFilename("main")
		return nil
	}})
	db, err := sql.Open("sqlite3_handle_test", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	if h == nil || got == "" || got != want {
		t.Fatalf("dbHandle: handle %p names file %q, the connection's file is %q", h, got, want)
	}
}

// TestPointerField covers the cases dbHandle must refuse rather than misread.
func TestPointerField(t *testing.T) {
	x := 1
	type withPtr struct {
		a  int
		db *int
	}
	type withInt struct{ db int }
	type without struct{ other *int }
	type embedded struct{ withPtr }
	for _, tc := range []struct {
		name string
		p    any
		want unsafe.Pointer
	}{
		{"pointer field", &withPtr{db: &x}, unsafe.Pointer(&x)},
		{"nil pointer field", &withPtr{}, nil},
		{"not a pointer field", &withInt{db: 3}, nil},
		{"no such field", &without{other: &x}, nil},
		{"promoted field", &embedded{withPtr{db: &x}}, nil},
		{"not a pointer", withPtr{db: &x}, nil},
		{"nil", (*withPtr)(nil), nil},
		{"not a struct", &x, nil},
	} {
		if got := pointerField(tc.p, "db"); got != tc.want {
			t.Errorf("%s: got %p, want %p", tc.name, got, tc.want)
		}
	}
}
