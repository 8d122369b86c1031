package sqllex_test

import (
	"fmt"

	"github.com/dpsql/dpsql/internal/sqllex"
)

func ExampleTokens() {
	for _, t := range sqllex.Tokens(`SELECT "dp_""x", 'it''s' FROM [t] -- note`) {
		fmt.Printf("%-6v %-8s %s\n", t.Kind, t.Text, t.Value())
	}
	// Output:
	// Word   SELECT   SELECT
	// Quoted "dp_""x" dp_"x
	// Op     ,        ,
	// String 'it''s'  it's
	// Word   FROM     FROM
	// Quoted [t]      t
}

func ExampleSplit() {
	stmts, rest := sqllex.Split("CREATE TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b; END; SELECT 'a;b'; SELECT")
	fmt.Printf("%q\n%q\n", stmts, rest)
	// Output:
	// ["CREATE TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b; END;" "SELECT 'a;b';"]
	// "SELECT"
}
