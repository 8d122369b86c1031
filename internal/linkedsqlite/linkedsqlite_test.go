package linkedsqlite_test

import (
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/internal/linkedsqlite"
)

// The table captured here is the one package ext captures: one SQLite.
func TestAPIIsExtsTable(t *testing.T) {
	got, err := linkedsqlite.API()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ext.SQLiteAPI()
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got == nil {
		t.Errorf("linkedsqlite.API() = %p, ext.SQLiteAPI() = %p", got, want)
	}
}
