package dpselect

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// Hex literals read as SQLite reads them: up to 16 digits, a 64-bit two's
// complement integer (0xFFFFFFFFFFFFFFFF is -1); more digits are refused in
// words. Each value is checked against SQLite's own answer.
func TestHexLiteralsAsSQLite(t *testing.T) {
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, lit := range []string{"0x0", "0x10", "0X7fffffffffffffff", "0x8000000000000000", "0xFFFFFFFFFFFFFFFF", "0xfffffffffffffffe"} {
		var want float64
		if err := db.QueryRow("SELECT CAST(" + lit + " AS REAL)").Scan(&want); err != nil {
			t.Fatalf("%s: SQLite: %v", lit, err)
		}
		got, err := parseFloat(lit)
		if err != nil || got != want {
			t.Errorf("parseFloat(%s) = %v, %v; SQLite reads %v", lit, got, err, want)
		}
		q := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) COUNT(*) AS n FROM t WHERE x <> " + lit
		if _, err := Parse(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	if _, err := parseFloat("0x1FFFFFFFFFFFFFFFF"); err == nil || !strings.Contains(err.Error(), "at most 16 digits") {
		t.Errorf("a 17-digit hex literal: %v, want a refusal saying at most 16 digits", err)
	}
}
