package ext_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/dpsql/dpsql/ext"
)

// The owner protects a table; an analyst's *sql.DB from ext.OpenAnalyst
// reads it only through SELECT WITH DIFFERENTIAL_PRIVACY.
func ExampleOpenAnalyst() {
	dir, _ := os.MkdirTemp("", "dpsql-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "clinic.db")

	owner, err := ext.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer owner.Close()
	owner.Exec(`SELECT dp_init(1.0, 1e-5, 'analyst')`)
	owner.Exec(`CREATE TABLE patients(pid INTEGER, sex TEXT, bmi REAL)`)
	owner.Exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 2000)
		INSERT INTO patients SELECT i, iif(i % 2, 'F', 'M'), 20 + i % 15 FROM s`)
	if _, err := owner.Exec(`SELECT dp_protect('patients', json_object('privacy_unit', 'pid', 'bounds', json_object('bmi', json_array(10, 60))))`); err != nil {
		log.Fatal(err)
	}

	analyst, err := ext.OpenAnalyst(path, "analyst")
	if err != nil {
		log.Fatal(err)
	}
	defer analyst.Close()
	_, err = analyst.Query(`SELECT * FROM patients`)
	fmt.Println(strings.HasPrefix(err.Error(), "refused: table patients is protected"))

	rows, err := analyst.Query(`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5)
		sex, COUNT(*) AS n, AVG(bmi) AS mean_bmi FROM patients GROUP BY sex ORDER BY sex`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sex string
		var n int64
		var mean float64
		rows.Scan(&sex, &n, &mean)
		fmt.Println(sex, n > 950 && n < 1050, mean > 25 && mean < 29)
	}
	// Output:
	// true
	// F true true
	// M true true
}
