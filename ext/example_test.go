package ext_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dpsql/dpsql/ext"
)

// A desktop program embeds dpsql by opening its database file with ext.Open:
// every connection then has the DP functions, and every noisy answer is
// charged to the budget stored in the same file.
func Example() {
	dir, _ := os.MkdirTemp("", "dpsql-example")
	defer os.RemoveAll(dir)
	db, err := ext.Open(filepath.Join(dir, "clinic.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// A budget of mu = 1 for the default scope, then some data.
	db.Exec(`SELECT dp_init(1.0)`)
	db.Exec(`CREATE TABLE visits(age INTEGER)`)
	db.Exec(`INSERT INTO visits SELECT 20 + value % 60 FROM json_each('[` + ones(500) + `]')`)

	// One person changes the count by at most 1: sensitivity 1, spend mu = 0.5.
	var noisy float64
	if err := db.QueryRow(`SELECT dp_gaussian(count(*), 1, 0.5) FROM visits`).Scan(&noisy); err != nil {
		log.Fatal(err)
	}
	fmt.Println("noisy count within 10 of 500:", noisy > 490 && noisy < 510)

	var spent, remaining float64
	db.QueryRow(`SELECT mu_spent, mu_remaining FROM dp_budget_status WHERE scope = 'default'`).Scan(&spent, &remaining)
	fmt.Printf("mu spent %.2f, remaining %.3f\n", spent, remaining)

	// A query over the budget fails and releases nothing.
	err = db.QueryRow(`SELECT dp_gaussian(count(*), 1, 0.9) FROM visits`).Scan(&noisy)
	fmt.Println(err != nil)
	// Output:
	// noisy count within 10 of 500: true
	// mu spent 0.50, remaining 0.866
	// true
}

func ones(n int) string {
	s := "1"
	for i := 1; i < n; i++ {
		s += ",1"
	}
	return s
}
