package serve

import "testing"

// The classifier routes a DP statement written after CTEs (WITH ... SELECT
// WITH DIFFERENTIAL_PRIVACY) and EXPLAIN of one to protected mode's engine,
// and a plain WITH ... SELECT to an analyst connection.
func TestClassifierRecognisesCTEForm(t *testing.T) {
	for q, want := range map[string]statementKind{
		"WITH a AS (SELECT pid, age FROM patients WHERE age >= 18) SELECT WITH DIFFERENTIAL_PRIVACY " +
			"OPTIONS (mu = 1) COUNT(*) FROM a": dpStatement,
		"EXPLAIN WITH a AS (SELECT * FROM patients) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a": dpStatement,
		"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM (SELECT * FROM patients)":                     dpStatement,
		"WITH a AS (SELECT * FROM wards) SELECT * FROM a":                                                              plainStatement,
	} {
		got, err := checkStatement(q)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", q, got, err, want)
		}
	}
}
