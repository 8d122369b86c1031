package protect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect"
)

// The issue's statement works exactly, through an analyst connection, and
// is charged once with every part recorded.
func TestIssueExample(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1)`,
		insertPatients(2000, func(i int) (int, string, int, any) {
			return i, []string{"F", "M"}[i%2], 10 + i%70, 20 + float64(i%10)
		}))
	a := openAnalyst(t, path)
	cols, rows, err := queryAll(context.Background(), a, issueExample)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cols, ",") != "sex,n,mean_bmi" || len(rows) != 2 {
		t.Fatalf("got %v %v", cols, rows)
	}
	for _, r := range rows {
		n, ok := r[1].(int64)
		if !ok || math.Abs(float64(n)-886) > 30 { // 1772 adults, half each; sigma 3.5
			t.Errorf("count %v (%T), want an INTEGER near 886", r[1], r[1])
		}
		if m := r[2].(float64); math.Abs(m-24.5) > 1.5 {
			t.Errorf("mean %v, want near 24.5", m)
		}
	}
	var mech, params string
	var mu float64
	if err := owner.QueryRow(`SELECT mechanism, mu, params FROM dp_ledger WHERE kind = 'charge'`).Scan(&mech, &mu, &params); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Mu    float64          `json:"mu"`
		Delta float64          `json:"delta"`
		Parts []map[string]any `json:"statement_parts"`
	}
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		t.Fatal(err)
	}
	if mech != mechanism.KindGaussianInf || p.Mu != 0.5 || len(p.Parts) != 3 || math.Abs(p.Delta-protect.SelectionDeltaShare*1e-5) > 1e-20 {
		t.Errorf("ledger row %s %v %s", mech, mu, params)
	}
	var sq float64
	for _, part := range p.Parts {
		sq += part["mu"].(float64) * part["mu"].(float64)
		if part["sigma"].(float64) <= 0 {
			t.Errorf("part without sigma: %v", part)
		}
	}
	if math.Abs(math.Sqrt(sq)-0.5) > 1e-12 {
		t.Errorf("parts compose to mu %v, want 0.5", math.Sqrt(sq))
	}
	if n, err := ledger.Verify(context.Background(), owner); err != nil || n != 3 { // the budget event, the policy record and the charge
		t.Errorf("audit verify: %d %v", n, err)
	}
}

// One charge per statement, the same whatever the number of groups.
func TestOneChargePerStatement(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid')`,
		insertPatients(5000, func(i int) (int, string, int, any) { return i, fmt.Sprint(i % 100), i % 2, 25.0 }))
	a := openAnalyst(t, path)
	ctx := context.Background()
	var last string
	for i, q := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.3) age, COUNT(*) FROM patients GROUP BY age`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.3) sex, COUNT(*) FROM patients GROUP BY sex`,
	} {
		_, rows, err := queryAll(ctx, a, q)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{2, 100}[i]; len(rows) != want {
			t.Errorf("%d groups released, want %d", len(rows), want)
		}
		if n := ledgerRows(t, owner); n != i+1 {
			t.Fatalf("after %d statements the ledger has %d rows", i+1, n)
		}
		var p string
		owner.QueryRow(`SELECT params FROM dp_ledger ORDER BY id DESC LIMIT 1`).Scan(&p)
		p = strings.Replace(p, "age", "sex", 1)
		p = p[strings.Index(p, `"max_groups"`):] // the same figures, whatever the groups
		if last != "" && p != last {
			t.Errorf("charges differ with the number of groups:\n%s\n%s", last, p)
		}
		last = p
	}
	// epsilon and delta are accepted too; a statement without GROUP BY has
	// no selection, and with two values at (1, 1e-6) noise = 'auto' takes
	// Laplace: a composite of two laplace parts.
	_, rows, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) COUNT(*) AS n, SUM(bmi, contribution_bounds_per_group => (0, 50)) AS s FROM patients`)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v %v", rows, err)
	}
	var mech string
	owner.QueryRow(`SELECT mechanism FROM dp_ledger ORDER BY id DESC LIMIT 1`).Scan(&mech)
	if mech != mechanism.KindComposite {
		t.Errorf("no GROUP BY: mechanism %s, want composite (laplace parts)", mech)
	}
	_, _, err = queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, noise = 'gaussian') COUNT(*) AS n FROM patients`)
	if err != nil {
		t.Fatal(err)
	}
	owner.QueryRow(`SELECT mechanism FROM dp_ledger ORDER BY id DESC LIMIT 1`).Scan(&mech)
	if mech != mechanism.KindGaussian {
		t.Errorf("no GROUP BY, noise = 'gaussian': mechanism %s, want gaussian", mech)
	}
}

// A policy changed behind dpsql's back (the file edited directly) is caught
// by VerifyPolicies, and so is an edited policy record.
func TestPolicyChainVerified(t *testing.T) {
	_, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid')`, insertPatients(1, func(i int) (int, string, int, any) { return 1, "F", 1, 1.0 }))
	ctx := context.Background()
	mustExec(t, owner, `SELECT dp_protect('wards', '{}')`)
	mustExec(t, owner, `SELECT dp_unprotect('wards')`)
	if n, err := protect.VerifyPolicies(ctx, owner); err != nil || n != 3 {
		t.Fatalf("fresh chain: %d %v", n, err)
	}
	var kinds string
	owner.QueryRow(`SELECT group_concat(kind || ':' || mechanism || ':' || json_extract(params, '$.action'), ' ') FROM dp_ledger WHERE kind = 'policy'`).Scan(&kinds)
	if kinds != "policy:patients:protect policy:wards:protect policy:wards:unprotect" {
		t.Errorf("policy records %q", kinds)
	}
	mustExec(t, owner, `UPDATE dp_policy SET policy = '{"max_groups":1,"max_rows":1}'`)
	if _, err := protect.VerifyPolicies(ctx, owner); err == nil || !strings.Contains(err.Error(), "does not match the policy records") {
		t.Errorf("edited dp_policy: %v", err)
	}
	mustExec(t, owner, `UPDATE dp_policy SET policy = '{"privacy_unit":"pid","max_groups":1,"max_rows":1}'`)
	if _, err := protect.VerifyPolicies(ctx, owner); err != nil {
		t.Errorf("restored dp_policy: %v", err)
	}
	dropLedgerTriggers(t, owner)
	mustExec(t, owner, `UPDATE dp_ledger SET params = '{"action":"protect","policy":{"max_groups":1,"max_rows":1}}' WHERE kind = 'policy' AND mechanism = 'patients'`)
	if _, err := protect.VerifyPolicies(ctx, owner); !errors.Is(err, ledger.ErrChainBroken) {
		t.Errorf("edited policy record: %v", err)
	}
	// Bad policies are refused with their reason.
	for _, bad := range []string{`'{"privacy_unit": "nope"}'`, `'{"max_groups": 2}'`, `'{"bounds": {"bmi": [5, 1]}}'`, `'{"colour": 1}'`} {
		if _, err := owner.Exec(`SELECT dp_protect('patients', ` + bad + `)`); err == nil {
			t.Errorf("policy %s accepted", bad)
		}
	}
}
