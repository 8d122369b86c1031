package protect

import (
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Every checker step names the clause it checks, so that every refusal from
// the checker names the part of the statement it is about.
func TestEveryStepNamesItsClause(t *testing.T) {
	for _, step := range checkerSteps {
		if n := stepName(step); stepClauses[n] == "" {
			t.Errorf("checker step %s has no clause in stepClauses", n)
		}
	}
}

// The example a refusal ends with is accepted by the checker, for every
// clause and for tables of every shape: text keys or none, declared number
// types or none, bounds in the policy or not, public keys, names that need
// quotes.
func TestExamplesAccepted(t *testing.T) {
	shapes := []tableShape{
		{table: "patients", cols: []shapeColumn{{"pid", "INTEGER"}, {"sex", "TEXT"}, {"age", "INTEGER"}, {"bmi", "REAL"}},
			policy: Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"bmi": {10, 60}}}},
		{table: "patients", cols: []shapeColumn{{"pid", ""}, {"sex", ""}, {"age", ""}, {"bmi", ""}},
			policy: Policy{PrivacyUnit: "pid", Bounds: map[string][2]float64{"bmi": {10, 60}}}},
		{table: "readings", cols: []shapeColumn{{"device", "INT"}, {"v", "DOUBLE"}}, policy: Policy{PrivacyUnit: "device"}},
		{table: "only", cols: []shapeColumn{{"pid", "INTEGER"}}, policy: Policy{PrivacyUnit: "pid"}},
		{table: "rows", cols: []shapeColumn{{"x", "BLOB"}, {"y", "NUMERIC"}}},
		{table: "select", cols: []shapeColumn{{"the pid", "INTEGER"}, {"group", "VARCHAR(3)"}, {"the value", "REAL"}},
			policy: Policy{PrivacyUnit: "the pid", PublicKeys: map[string]string{"group": "groups.g"}}},
	}
	clauses := []string{"", dpselect.ClauseFrom, dpselect.ClauseOptions, dpselect.ClauseSelect, dpselect.ClauseWhere,
		dpselect.ClauseGroupBy, dpselect.ClauseHaving, dpselect.ClauseOrderBy, dpselect.ClauseLimit}
	for _, s := range shapes {
		s.policy.Normalize()
		cols := map[string]string{}
		for _, c := range s.cols {
			cols[strings.ToLower(c.name)] = c.name
		}
		for _, clause := range clauses {
			q := s.example(clause)
			st, err := dpselect.Parse(q)
			if err != nil {
				t.Errorf("%s, %s: %s: %v", s.table, clause, q, err)
				continue
			}
			pl, err := checkStatement(st, map[string]Policy{s.table: s.policy}, cols, 1e-5)
			if err == nil {
				var keys [][]any
				for range pl.keySources {
					keys = append(keys, []any{"a"})
				}
				err = completePlan(pl, nil, false, SchemaFacts{}, keys)
			}
			if err != nil {
				t.Errorf("%s, %s: %s: %v", s.table, clause, q, err)
			}
		}
	}
	if got := shapes[0].example(dpselect.ClauseFrom); got !=
		"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, COUNT(*) AS n FROM patients GROUP BY sex" {
		t.Errorf("the issue's example: %s", got)
	}
}
