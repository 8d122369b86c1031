package protect_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/protect"
)

func dropLedgerTriggers(t testing.TB, db *sql.DB) {
	t.Helper()
	mustExec(t, db, `DROP TRIGGER dp_ledger_no_update`)
}

// lastDetails returns the params of the file's last charge.
func lastDetails(t testing.TB, db *sql.DB) protect.StatementDetails {
	t.Helper()
	var params string
	if err := db.QueryRow(`SELECT params FROM dp_ledger WHERE kind = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&params); err != nil {
		t.Fatal(err)
	}
	var d protect.StatementDetails
	if err := json.Unmarshal([]byte(params), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The attack: someone with the file (not the analyst) edits dp_policy so
// that it loosens a bound or drops a protection, without a policy record.
// The analyst path ignores dp_policy: it replays the chained records, so
// raw reads stay refused and DP statements use the chained policy; audit
// verify fails. (The old code read dp_policy: the raw SELECT succeeded and
// the statement ran with max_groups 50.)
func TestEditedPolicyTableIsNotTrusted(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1, 'bounds', json_object('bmi', json_array(10, 60)))`,
		insertPatients(300, func(i int) (int, string, int, any) { return i, []string{"F", "M"}[i%2], 30, 25.0 }))
	ctx := context.Background()
	a := openAnalyst(t, path)
	// Warm the analyst's memo first, so that the attack is seen mid-session too.
	if _, _, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, edit string
	}{
		{"loosen max_groups and bounds", `UPDATE dp_policy SET policy = '{"privacy_unit":"pid","max_groups":50,"max_rows":7,"bounds":{"bmi":[0,1000]}}'`},
		{"drop the protection", `DELETE FROM dp_policy`},
		{"drop dp_policy", `DROP TABLE dp_policy`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mustExec(t, owner, `DROP TABLE IF EXISTS dp_policy`)
			mustExec(t, owner, protect.PolicySchema)
			mustExec(t, owner, `INSERT INTO dp_policy SELECT mechanism, json_extract(params, '$.policy'), id FROM dp_ledger WHERE kind = 'policy'`)
			if _, err := protect.VerifyPolicies(ctx, owner); err != nil {
				t.Fatalf("restored dp_policy: %v", err)
			}
			mustExec(t, owner, tc.edit)
			if _, err := protect.VerifyPolicies(ctx, owner); !errors.Is(err, ledger.ErrChainBroken) {
				t.Errorf("audit verify of the edited file: %v", err)
			}
			if _, _, err := queryAll(ctx, a, `SELECT * FROM patients`); !protect.IsRefusal(err) {
				t.Errorf("raw read after the edit: %v, want refused", err)
			}
			before := ledgerRows(t, owner)
			if _, _, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5, max_groups_contributed = 5) sex, COUNT(*) AS n FROM patients GROUP BY sex`); !protect.IsRefusal(err) || !strings.Contains(err.Error(), "max_groups_contributed must be an integer in [1, 1]") {
				t.Errorf("max_groups_contributed beyond the chained policy: %v", err)
			}
			if _, _, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, AVG(bmi) AS m FROM patients GROUP BY sex`); err != nil {
				t.Fatal(err)
			}
			if n := ledgerRows(t, owner); n != before+1 {
				t.Errorf("%d charges, want %d", n, before+1)
			}
			d := lastDetails(t, owner)
			// Parts: the selection, AVG's centred sum and its count.
			if d.MaxGroups != 1 || d.MaxRows != 1 || len(d.Parts) != 3 || d.Parts[1].Bounds[0] != 10 || d.Parts[1].Bounds[1] != 60 {
				t.Errorf("the statement did not use the chained policy: %+v", d)
			}
		})
	}
	// A fresh analyst connection (no memo) sees the chained policy too.
	b, err := ext.OpenAnalyst(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, _, err := queryAll(ctx, b, `SELECT count(*) FROM patients`); !protect.IsRefusal(err) {
		t.Errorf("fresh analyst connection, raw read: %v", err)
	}
}

// An edited policy record breaks the chain: analyst statements are refused
// (nothing runs on a chain that does not verify) and verify fails.
func TestEditedPolicyRecordRefused(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid', 'max_groups', 1)`,
		insertPatients(50, func(i int) (int, string, int, any) { return i, "F", 30, 25.0 }))
	ctx := context.Background()
	a := openAnalyst(t, path)
	if _, _, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients`); err != nil {
		t.Fatal(err)
	}
	dropLedgerTriggers(t, owner)
	mustExec(t, owner, `UPDATE dp_ledger SET params = '{"action":"protect","policy":{"privacy_unit":"pid","max_groups":50,"max_rows":1}}' WHERE kind = 'policy'`)
	if _, err := protect.VerifyPolicies(ctx, owner); !errors.Is(err, ledger.ErrChainBroken) {
		t.Errorf("verify: %v", err)
	}
	before := ledgerRows(t, owner)
	for _, q := range []string{
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients`,
		`SELECT * FROM wards`,
	} {
		// The head did not move, but a fresh connection replays the whole chain.
		b, err := ext.OpenAnalyst(path, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := queryAll(ctx, b, q); err == nil || !strings.Contains(err.Error(), "chain") {
			t.Errorf("%s on a broken chain: %v", q, err)
		}
		b.Close()
	}
	if n := ledgerRows(t, owner); n != before {
		t.Errorf("charged on a broken chain")
	}
}

// copyFixture copies a committed fixture into a temporary directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A file written by the code before policy records (its changes in the
// separate chain dp_policy_log: patients protected with max_groups 1, wards
// protected and unprotected, patients re-protected with max_groups 2,
// max_rows 3, bmi in [10, 60]) keeps working: its log is checked and
// replayed until the owner's next change, which carries it over into one
// upgrade record; verify checks both.
func TestLegacyPolicyLogUpgraded(t *testing.T) {
	ctx := context.Background()
	path := copyFixture(t, "legacy_policy_log.db")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if n, err := protect.VerifyPolicies(ctx, owner); err != nil || n != 4 {
		t.Fatalf("legacy file: %d %v", n, err)
	}
	a := openAnalyst(t, path)
	if _, _, err := queryAll(ctx, a, `SELECT * FROM patients`); !protect.IsRefusal(err) {
		t.Errorf("legacy file, raw read: %v", err)
	}
	if _, _, err := queryAll(ctx, a, `SELECT * FROM wards`); err != nil {
		t.Errorf("legacy file, unprotected table: %v", err)
	}
	if _, _, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, AVG(bmi) AS m FROM patients GROUP BY sex`); err != nil {
		t.Fatal(err)
	}
	if d := lastDetails(t, owner); d.MaxGroups != 2 || d.MaxRows != 3 || d.Parts[1].Bounds[1] != 60 {
		t.Errorf("legacy policy not used: %+v", d)
	}
	// The owner's next change carries the log over, then records itself.
	mustExec(t, owner, `SELECT dp_protect('wards', '{}')`)
	var recs string
	owner.QueryRow(`SELECT group_concat(mechanism || ':' || json_extract(params, '$.action'), ' ') FROM dp_ledger WHERE kind = 'policy'`).Scan(&recs)
	if recs != "dp_policy_log:upgrade wards:protect" {
		t.Errorf("records %q", recs)
	}
	if n, err := protect.VerifyPolicies(ctx, owner); err != nil || n != 6 {
		t.Fatalf("upgraded file: %d %v", n, err)
	}
	ps, err := protect.LoadPolicies(ctx, owner)
	if err != nil || len(ps) != 2 || ps["patients"].MaxGroups != 2 || ps["patients"].Bounds["bmi"] != [2]float64{10, 60} {
		t.Errorf("policies after the upgrade: %v %v", ps, err)
	}
	if _, _, err := queryAll(ctx, a, `SELECT * FROM wards`); !protect.IsRefusal(err) {
		t.Errorf("wards protected after the upgrade: %v", err)
	}
	if _, err := ledger.Verify(ctx, owner); err != nil {
		t.Errorf("ledger verify: %v", err)
	}
	// The old log, edited after the upgrade, no longer matches the record
	// that carried it over.
	mustExec(t, owner, `DROP TRIGGER dp_policy_log_no_update`)
	mustExec(t, owner, `UPDATE dp_policy_log SET policy = '{"max_groups":1,"max_rows":1}' WHERE id = 4`)
	if _, err := protect.VerifyPolicies(ctx, owner); !errors.Is(err, ledger.ErrChainBroken) {
		t.Errorf("edited old log: %v", err)
	}
}

// A legacy file whose log was edited is refused, before and instead of the upgrade.
func TestLegacyPolicyLogEdited(t *testing.T) {
	ctx := context.Background()
	path := copyFixture(t, "legacy_policy_log.db")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	mustExec(t, owner, `DROP TRIGGER dp_policy_log_no_delete`)
	mustExec(t, owner, `DELETE FROM dp_policy_log WHERE id = 2`)
	if _, err := protect.VerifyPolicies(ctx, owner); !errors.Is(err, ledger.ErrChainBroken) || !strings.Contains(err.Error(), "does not chain") {
		t.Errorf("verify: %v", err)
	}
	if _, err := owner.Exec(`SELECT dp_protect('wards', '{}')`); err == nil || !strings.Contains(err.Error(), "do not verify") {
		t.Errorf("protect on a broken log: %v", err)
	}
	a := openAnalyst(t, path)
	if _, _, err := queryAll(ctx, a, `SELECT * FROM wards`); err == nil {
		t.Errorf("analyst statement on a broken log ran")
	}
}

// Policies live in the ledger: protecting a table of a file without one
// says what to do first, and changes nothing.
func TestProtectNeedsLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bare.db")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	mustExec(t, owner, `CREATE TABLE patients (pid INTEGER, bmi REAL)`)
	if _, err := owner.Exec(`SELECT dp_protect('patients', '{}')`); err == nil || !strings.Contains(err.Error(), "create a budget first") {
		t.Errorf("dp_protect without a ledger: %v", err)
	}
	var n int
	owner.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name IN ('dp_policy', 'dp_ledger')`).Scan(&n)
	if n != 0 {
		t.Errorf("%d dpsql tables created by a refused protect", n)
	}
}

// UpgradePolicies carries an old file's log over once, and then does nothing.
func TestUpgradePolicies(t *testing.T) {
	ctx := context.Background()
	path := copyFixture(t, "legacy_policy_log.db")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	for i, want := range []bool{true, false} {
		did, err := protect.UpgradePolicies(ctx, owner)
		if err != nil || did != want {
			t.Fatalf("call %d: %v %v, want %v", i, did, err, want)
		}
	}
	if n, err := protect.VerifyPolicies(ctx, owner); err != nil || n != 5 {
		t.Errorf("verify after the upgrade: %d %v", n, err)
	}
	var id int64
	var pol string
	if err := owner.QueryRow(`SELECT ledger_id, policy FROM dp_policy WHERE tbl = 'patients'`).Scan(&id, &pol); err != nil || !strings.Contains(pol, `"max_groups":2`) {
		t.Errorf("dp_policy after the upgrade: %d %s %v", id, pol, err)
	}
}
