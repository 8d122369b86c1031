package protect_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/release"
)

// TestStatementOutsideSQLite: PlanStatement plans and charges exactly what
// Engine.Query charges for the same statement; NewStatement rebuilds the
// same plan from the inputs alone; RowSQL's shards cover each eligible row
// once with the rewritten SQL's clamped fixed-point values; ReleaseGroup
// and Order post-process as the engine does.
func TestStatementOutsideSQLite(t *testing.T) {
	ctx := context.Background()
	path, owner := newClinic(t, 20, `json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 2)`, insertPatients(600, func(i int) (int, string, int, any) {
		var bmi any = float64(i%70) + 0.3 // some above the bounds (10, 60)
		if i%50 == 0 {
			bmi = nil // dropped from AVG
		}
		return i / 3, []string{"f", "m"}[i%2], 10 + i%60, bmi
	}))
	s, err := protect.PlanStatement(ctx, path, "default", issueExample)
	if err != nil {
		t.Fatal(err)
	}
	// The same statement through protected mode's SQL.
	an := openAnalyst(t, path)
	if _, _, err := queryAll(ctx, an, issueExample); err != nil {
		t.Fatal(err)
	}
	var mechJSON, paramsJSON string
	if err := owner.QueryRow(`SELECT params, params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&mechJSON, &paramsJSON); err != nil {
		t.Fatal(err)
	}
	var params map[string]any
	json.Unmarshal([]byte(paramsJSON), &params)
	wantDetails, _ := json.Marshal(s.Details())
	var wd map[string]any
	json.Unmarshal(wantDetails, &wd)
	for k, v := range wd {
		if !reflect.DeepEqual(params[k], v) {
			t.Errorf("detail %s: SQL path %v, PlanStatement %v", k, params[k], v)
		}
	}
	var charged mechanism.Mechanism
	if err := json.Unmarshal([]byte(mechJSON), &charged); err != nil {
		t.Fatal(err)
	}
	cj, _ := json.Marshal(charged)
	pj, _ := json.Marshal(s.Mechanism())
	if string(cj) != string(pj) {
		t.Errorf("SQL path charged %s, PlanStatement plans %s", cj, pj)
	}

	// Rebuilt from its inputs (after a JSON round trip, as a worker gets them).
	b, _ := json.Marshal(s.Inputs())
	var in protect.StatementInputs
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	s2, err := protect.NewStatement(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s2.Mechanism(), s.Mechanism()) || !reflect.DeepEqual(s2.Details(), s.Details()) {
		t.Fatal("NewStatement does not rebuild the plan")
	}
	in.Policy.MaxRows = 3 // a worker with another policy plans another charge
	if s3, err := protect.NewStatement(in); err != nil || reflect.DeepEqual(s3.Details(), s.Details()) {
		t.Fatalf("a changed policy gave the same details (%v)", err)
	}

	// RowSQL: three shards read every eligible row once (age >= 18, pid
	// not NULL), with AVG's values clamped to (10, 60), centred and in fixed
	// point (NULL when dropped).
	var want int
	owner.QueryRow(`SELECT count(*) FROM patients WHERE age >= 18 AND pid IS NOT NULL`).Scan(&want)
	ro, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, nulls := 0, 0
	groups := map[string]protect.Figures{}
	for part := range 3 {
		rows, err := ro.Query(s.RowSQL(3, part))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, 1+1+2*2)
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			unit, f, err := s.DecodeRow(vals)
			if err != nil {
				t.Fatal(err)
			}
			if unit == nil || len(f.Keys) != 1 {
				t.Fatalf("row %v: unit %v, keys %v", vals, unit, f.Keys)
			}
			if f.Counts[1] == 0 {
				nulls++
			}
			g := groups[protect.CanonKey(f.Keys)]
			g.Add(f)
			groups[protect.CanonKey(f.Keys)] = g
			got++
		}
		rows.Close()
	}
	if got != want || nulls == 0 {
		t.Fatalf("the shards read %d rows (%d without a value), want %d", got, nulls, want)
	}
	if _, _, err := s.DecodeRow(make([]any, 3)); err == nil {
		t.Fatal("decoded a row of the wrong width")
	}
	// ReleaseGroup: a large group passes the selection and its COUNT is
	// within 6 sigma; an empty one does not pass.
	f := groups[protect.CanonKey([]any{"f"})]
	f.Keys, f.Persons = []any{"f"}, 100
	row, ok := s.ReleaseGroup(release.NewNoise(), f)
	if !ok || len(row) != 3 || row[0] != "f" {
		t.Fatalf("released %v, %v", row, ok)
	}
	parts := wd["statement_parts"].([]any)
	sigma := parts[1].(map[string]any)["sigma"].(float64)
	if n := row[1].(int64); math.Abs(float64(n-f.Vals[0])) > 6*sigma {
		t.Fatalf("COUNT %d for %d (sigma %v)", n, f.Vals[0], sigma)
	}
	if _, ok := s.ReleaseGroup(release.NewNoise(), protect.Figures{Keys: []any{"x"}}); ok {
		t.Fatal("an empty group passed the selection")
	}
	rows := [][]any{{"m", int64(1), 2.0}, {"f", int64(2), 3.0}}
	if got := s.Order(rows); len(got) != 2 || fmt.Sprint(got) != fmt.Sprint(rows) {
		t.Fatalf("Order changed a statement without ORDER BY: %v", got)
	}
}
