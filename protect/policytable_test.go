package protect_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/protect"
)

// The attack: whoever has the file rebuilds dp_policy so that SQL readers
// see a policy the records do not lead to, while audit verify still passes.
// Verify read dp_policy into a map by lower-case name (a second row for the
// same table, in any case, was folded away) and checked only tables: a view
// named dp_policy went unread.
func TestPolicyTableRebuiltNotVerified(t *testing.T) {
	const loose = `'{"privacy_unit":"pid","max_groups":50,"max_rows":7}'`
	tests := []struct {
		name    string
		protect bool
		edit    []string
	}{
		{"a second row for the table, before the true one", true, []string{
			`ALTER TABLE dp_policy RENAME TO dp_policy_true`,
			`CREATE TABLE dp_policy (tbl TEXT, policy TEXT NOT NULL, ledger_id INTEGER NOT NULL)`,
			`INSERT INTO dp_policy SELECT tbl, ` + loose + `, ledger_id FROM dp_policy_true`,
			`INSERT INTO dp_policy SELECT * FROM dp_policy_true`,
			`DROP TABLE dp_policy_true`,
		}},
		{"a second row in another case", true, []string{
			`ALTER TABLE dp_policy RENAME TO dp_policy_true`,
			`CREATE TABLE dp_policy (tbl TEXT PRIMARY KEY, policy TEXT NOT NULL, ledger_id INTEGER NOT NULL)`,
			`INSERT INTO dp_policy SELECT upper(tbl), ` + loose + `, ledger_id FROM dp_policy_true`,
			`INSERT INTO dp_policy SELECT * FROM dp_policy_true`,
			`DROP TABLE dp_policy_true`,
		}},
		{"a view claiming a protection no record made", false, []string{
			`CREATE VIEW dp_policy AS SELECT 'patients' AS tbl, '{"privacy_unit":"pid","max_groups":1,"max_rows":1}' AS policy, 1 AS ledger_id`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			policy := ""
			if tc.protect {
				policy = `json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1)`
			}
			_, owner := newClinic(t, 10, policy, insertPatients(10, func(i int) (int, string, int, any) { return i, "F", 40, 22.5 }))
			ctx := context.Background()
			if _, err := protect.VerifyPolicies(ctx, owner); err != nil {
				t.Fatalf("before the edit: %v", err)
			}
			for _, q := range tc.edit {
				mustExec(t, owner, q)
			}
			if _, err := protect.VerifyPolicies(ctx, owner); !errors.Is(err, ledger.ErrChainBroken) {
				t.Errorf("audit verify of the rebuilt dp_policy: %v, want a broken chain", err)
			}
		})
	}
}
