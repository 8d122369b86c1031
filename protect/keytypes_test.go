package protect_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// GROUP BY keys of DATE, DATETIME and BOOLEAN declared types are released as
// SQLite stores them (TEXT '2024-01-02', INTEGER 1), never as the Go
// driver's time.Time or bool, whose parse is lossy ('2024-01-02' and
// '2024-01-02 00:00:00' would read as one time, 1 and 2 as true, text it
// cannot parse as the zero time); and a neighbouring database (one row
// fewer) releases byte-identical key spellings.
func TestDeclaredTypeKeysCanonical(t *testing.T) {
	fill := func(tx *sql.Tx) {
		keys := [][2]any{{"2024-01-02", 1}, {"2024-01-02 00:00:00", 0}, {"2024-01-02T00:00:00Z", 2}, {20240103, 0},
			{"not a date", 1}, {1704153600, "true"}}
		pid := 0
		for _, k := range keys {
			for range 300 {
				pid++
				if _, err := tx.Exec(`INSERT INTO events VALUES (?, ?, ?, ?)`, pid, k[0], k[0], k[1]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	released := func(drop bool) []string {
		path, owner := newClinic(t, 100, "", func(tx *sql.Tx) {
			if _, err := tx.Exec(`CREATE TABLE events (pid INTEGER, d DATE, dt DATETIME, b BOOLEAN)`); err != nil {
				t.Fatal(err)
			}
			fill(tx)
		})
		if drop {
			mustExec(t, owner, `DELETE FROM events WHERE pid = 17`)
		}
		mustExec(t, owner, `SELECT dp_protect('events', json_object('privacy_unit', 'pid'))`)
		a := openAnalyst(t, path)
		_, rows, err := queryAll(context.Background(), a,
			`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) d, dt, b, COUNT(*) AS n FROM events GROUP BY d, dt, b`)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%T %v | %T %v | %T %v", r[0], r[0], r[1], r[1], r[2], r[2]))
		}
		slices.Sort(out)
		return out
	}
	a, b := released(false), released(true)
	want := []string{
		"int64 1704153600 | int64 1704153600 | string true",
		"int64 20240103 | int64 20240103 | int64 0",
		"string 2024-01-02 | string 2024-01-02 | int64 1",
		"string 2024-01-02 00:00:00 | string 2024-01-02 00:00:00 | int64 0",
		"string 2024-01-02T00:00:00Z | string 2024-01-02T00:00:00Z | int64 2",
		"string not a date | string not a date | int64 1",
	}
	slices.Sort(want)
	if strings.Join(a, "\n") != strings.Join(want, "\n") {
		t.Errorf("released keys:\n%s\nwant:\n%s", strings.Join(a, "\n"), strings.Join(want, "\n"))
	}
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("neighbouring databases release different keys:\n%s\nand\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}
