package protect_test

import (
	"database/sql"
	"strings"
	"testing"
)

// The attack of whoever wrote the file's schema on its protection: a view
// that calls dp_unprotect (or dp_protect with a weaker policy), planted in a
// file the curator received, so that the curator's plain SELECT from the view
// removes (or weakens) the policy the curator set afterwards, and analysts
// then read the table's raw rows. SQLite refuses the owner's functions there
// (SQLITE_DIRECTONLY), as it refuses the charging functions; called directly
// they work.
func TestOwnerFunctionsDirectOnly(t *testing.T) {
	const policy = `json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1, 'bounds', json_object('age', json_array(0, 100)))`
	path, owner := newClinic(t, 1, policy, func(tx *sql.Tx) {})
	for _, call := range []string{
		`dp_unprotect('patients')`,
		`dp_protect('patients', json_object('privacy_unit', 'pid', 'max_groups', 1000, 'max_rows', 1000))`,
	} {
		name := call[:strings.IndexByte(call, '(')]
		mustExec(t, owner, `SELECT dp_protect('patients', `+policy+`)`)
		mustExec(t, owner, `DROP VIEW IF EXISTS innocent`)
		mustExec(t, owner, `CREATE VIEW innocent AS SELECT name, `+call+` AS r FROM wards`)
		var r any
		err := owner.QueryRow(`SELECT r FROM innocent`).Scan(&r)
		if err == nil || !strings.Contains(err.Error(), "unsafe use of "+name) {
			t.Errorf("SELECT from a view calling %s: err = %v, want SQLite's unsafe use refusal", name, err)
		}
		var rows, groups int
		if err := owner.QueryRow(`SELECT count(*), coalesce(max(json_extract(policy, '$.max_groups')), 0) FROM dp_policy WHERE tbl = 'patients'`).Scan(&rows, &groups); err != nil {
			t.Fatal(err)
		}
		if rows != 1 || groups != 1 {
			t.Errorf("after the view calling %s: %d policies of patients, max_groups %d; want the owner's one, max_groups 1", name, rows, groups)
		}
		// The analyst still may not read the raw rows.
		an := openAnalyst(t, path)
		if _, err := an.Query(`SELECT * FROM patients`); err == nil {
			t.Errorf("after the view calling %s: the analyst reads patients' raw rows", name)
		}
	}
	// Called directly, they work.
	mustExec(t, owner, `SELECT dp_unprotect('patients')`)
	mustExec(t, owner, `SELECT dp_protect('patients', `+policy+`)`)
}
