package protect

import (
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/accountant"
)

// FuzzPolicyRecord: replaying any policy record's params never panics, and
// a record it accepts leaves only normalised policies in the state.
func FuzzPolicyRecord(f *testing.F) {
	f.Add(`{"action":"protect","policy":{"privacy_unit":"pid","max_groups":2,"max_rows":1,"bounds":{"bmi":[10,60]}}}`, "patients")
	f.Add(`{"action":"unprotect"}`, "patients")
	f.Add(`{"action":"upgrade","policies":{"patients":{"max_groups":1,"max_rows":1}},"log_rows":1,"log_head":"x"}`, "dp_policy_log")
	f.Fuzz(func(t *testing.T, params, subject string) {
		st := &policyState{tables: map[string]policyEntry{"patients": {name: "patients", policy: Policy{MaxGroups: 1, MaxRows: 1}}}}
		r := ledger.Row{ID: 7, Kind: ledger.EventPolicy, Scope: accountant.FileScope, Mechanism: subject, Params: params}
		if err := st.apply(r, false, nil, 0, ""); err != nil {
			return
		}
		for _, e := range st.tables {
			p := e.policy
			if err := p.Normalize(); err != nil || p.MaxGroups < 1 || p.MaxRows < 1 {
				t.Fatalf("accepted policy %+v (%v)", e.policy, err)
			}
		}
	})
}
