package protect_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/protect"
)

// An analyst who writes the SQL tries every way around protected mode; each
// attempt is refused with a message saying why, and nothing is charged.
func TestBypassAttemptsRefused(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1)`,
		insertPatients(50, func(i int) (int, string, int, any) { return i, "F", 40, 22.5 }))
	mustExec(t, owner, `CREATE VIEW patients_view AS SELECT * FROM patients`)
	mustExec(t, owner, `CREATE INDEX patients_age ON patients(age)`)
	mustExec(t, owner, `ANALYZE`)
	mustExec(t, owner, `CREATE TABLE visits (id INTEGER PRIMARY KEY AUTOINCREMENT, pid)`)
	mustExec(t, owner, `INSERT INTO visits(pid) VALUES (1)`)
	mustExec(t, owner, `SELECT dp_protect('visits', '{"privacy_unit": "pid"}')`)
	other := filepath.Join(t.TempDir(), "other.db")
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	attempts := []struct{ name, sql, want string }{
		{"plain select", `SELECT * FROM patients`, "table patients is protected"},
		{"upper-case name", `SELECT * FROM PATIENTS`, "is protected"},
		{"schema-qualified", `SELECT * FROM main.patients`, "is protected"},
		{"rowid only", `SELECT rowid FROM patients`, "is protected"},
		{"raw count", `SELECT count(*) FROM patients`, "is protected"},
		{"raw group by", `SELECT sex, count(*) FROM patients GROUP BY sex`, "is protected"},
		{"old DP function", `SELECT dp_gaussian(count(*), 1, 0.5) FROM patients`, "is protected"},
		{"CTE", `WITH c AS (SELECT * FROM patients) SELECT * FROM c`, "is protected"},
		{"UNION", `SELECT name FROM wards UNION SELECT sex FROM patients`, "is protected"},
		{"scalar subquery", `SELECT * FROM wards WHERE beds > (SELECT count(*) FROM patients)`, "is protected"},
		{"EXISTS subquery", `SELECT * FROM wards WHERE EXISTS (SELECT 1 FROM patients WHERE pid = 1)`, "is protected"},
		{"FROM subquery", `SELECT * FROM (SELECT * FROM patients)`, "is protected"},
		{"join with public", `SELECT * FROM wards, patients`, "is protected"},
		{"self-join", `SELECT * FROM patients a JOIN patients b ON a.pid = b.pid`, "is protected"},
		{"owner's view", `SELECT * FROM patients_view`, "is protected"},
		{"temp table from it", `CREATE TEMP TABLE x AS SELECT * FROM patients`, "is protected"},
		{"copy into public", `INSERT INTO wards SELECT sex, age FROM patients`, "refused"},
		{"ATTACH", `ATTACH '` + other + `' AS o`, "ATTACH"},
		{"load_extension", `SELECT load_extension('libevil')`, "load_extension() is not available"},
		{"writable_schema", `PRAGMA writable_schema = 1`, "PRAGMA writable_schema is not available"},
		{"query_only off", `PRAGMA query_only = 0`, "PRAGMA query_only"},
		{"ANALYZE", `ANALYZE`, "ANALYZE is not available"},
		{"sqlite_stat1", `SELECT * FROM sqlite_stat1`, "sqlite_stat1 is not readable"},
		{"sqlite_sequence (row counts)", `SELECT seq FROM sqlite_sequence WHERE name = 'visits'`, "sqlite_sequence is not readable"},
		{"page count", `SELECT * FROM pragma_page_count`, "PRAGMA page_count is not available"},
		{"VACUUM INTO", `VACUUM INTO '` + other + `'`, "VACUUM"},
		{"delete ledger", `DELETE FROM dp_ledger`, "writes only its own TEMP tables"},
		{"new budget row", `INSERT INTO dp_budget VALUES ('x', 100, 1e-5, 'now', NULL)`, "writes only its own TEMP tables"},
		{"edit policy", `UPDATE dp_policy SET policy = '{}'`, "writes only its own TEMP tables"},
		{"drop policy", `DROP TABLE dp_policy`, "changes the database schema"},
		{"drop ledger trigger", `DROP TRIGGER dp_ledger_no_delete`, "changes the database"},
		{"create main table", `CREATE TABLE notes (a)`, "changes the database schema"},
		{"temp trigger", `CREATE TEMP TRIGGER tt AFTER INSERT ON wards BEGIN SELECT 1; END`, "changes the database"},
		{"shadow dp_policy", `CREATE TEMP TABLE dp_policy (tbl, policy)`, "may not be named dp_policy"},
		{"shadow patients", `CREATE TEMP TABLE patients (pid)`, "may not be named patients"},
		{"dp_init", `SELECT dp_init(100)`, "dp_init() is not available"},
		{"dp_use_scope", `SELECT dp_use_scope('other')`, "dp_use_scope() is not available"},
		{"dp_unprotect", `SELECT dp_unprotect('patients')`, "dp_unprotect() is not available"},
		{"dp_protect", `SELECT dp_protect('wards', '{}')`, "dp_protect() is not available"},
		{"release into main", `SELECT dp_avgmix(x'0000803f', 1, json_object('into', 'dp_policy', 'mu', 1)) FROM wards`, "dp_avgmix() writes a release table"},
		{"DP bare column", dp + `pid, COUNT(*) FROM patients`, "neither a GROUP BY key"},
		{"DP HAVING", dp + `sex, COUNT(*) FROM patients GROUP BY sex HAVING COUNT(*) > 5`, "HAVING"},
		{"DP subquery", dp + `COUNT(*) FROM patients WHERE pid IN (SELECT pid FROM patients)`, "subqueries"},
		{"DP abs()", dp + `COUNT(*) FROM patients WHERE abs(pid) > 1`, "abs() is not allowed"},
		{"DP json_extract", dp + `COUNT(*) FROM patients WHERE json_extract(sex, '$.a') = 1`, "json_extract() is not allowed"},
		{"DP LIKE ESCAPE", dp + `COUNT(*) FROM patients WHERE sex LIKE 'a' ESCAPE 'bc'`, "ESCAPE"},
		{"DP LIKE pattern past SQLite's limit", dp + `COUNT(*) FROM patients WHERE age > 200 AND sex LIKE '` + strings.Repeat("%a", 30000) + `'`, "at most 1000 bytes"},
		{"DP LIKE column pattern", dp + `COUNT(*) FROM patients WHERE sex LIKE sex`, "literal pattern"},
		{"DP unbounded SUM", dp + `SUM(bmi) FROM patients`, "needs bounds"},
		{"DP max_groups above policy", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, max_groups_contributed = 3) sex, COUNT(*) FROM patients GROUP BY sex`, "max_groups_contributed"},
		{"DP privacy unit option", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1, privacy_unit_column = 1) COUNT(*) FROM patients`, "privacy unit is set by the owner"},
		{"DP zero mu", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0) COUNT(*) FROM patients`, "mu must lie"},
		{"DP public table", dp + `COUNT(*) FROM wards`, "not protected"},
		{"DP UNION", dp + `COUNT(*) FROM patients UNION SELECT 1`, "compound"},
		{"DP join", dp + `COUNT(*) FROM patients JOIN patients`, "joins"},
		{"DP two statements", dp + `COUNT(*) FROM patients; SELECT * FROM patients`, "one statement only"},
		{"DP aggregate in WHERE", dp + `COUNT(*) FROM patients WHERE max(age) > 3`, "max() needs at least 2"},
		{"DP over budget", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 50) COUNT(*) FROM patients`, "budget exceeded"},
	}
	a := openAnalyst(t, path)
	ctx := context.Background()
	var state0 string
	owner.QueryRow(`SELECT coalesce(group_concat(hash), '') FROM dp_ledger`).Scan(&state0)
	for _, at := range attempts {
		_, _, err := queryAll(ctx, a, at.sql)
		if err == nil || !strings.Contains(err.Error(), at.want) {
			t.Errorf("%s: %s\n  got %v, want an error containing %q", at.name, at.sql, err, at.want)
		}
		if err != nil && !strings.Contains(err.Error(), "budget exceeded") && !protect.IsRefusal(err) {
			t.Errorf("%s: error %v is not a refusal", at.name, err)
		}
	}
	var state1 string
	owner.QueryRow(`SELECT coalesce(group_concat(hash), '') FROM dp_ledger`).Scan(&state1)
	if state0 != state1 || ledgerRows(t, owner) != 0 {
		t.Errorf("refused statements charged: ledger went from %q to %q", state0, state1)
	}
	if len(attempts) < 30 {
		t.Fatalf("only %d attempts", len(attempts))
	}
	// A DP SELECT run through Exec is refused too.
	if _, err := a.Exec(dp + `COUNT(*) FROM patients`); err == nil || !strings.Contains(err.Error(), "as a query") {
		t.Errorf("DP through Exec: %v", err)
	}
	// A view created in TEMP over the protected table can be created but not read.
	if _, err := a.Exec(`CREATE TEMP VIEW tv AS SELECT * FROM patients`); err == nil {
		if _, _, err := queryAll(ctx, a, `SELECT * FROM tv`); err == nil || !strings.Contains(err.Error(), "is protected") {
			t.Errorf("temp view over patients: %v", err)
		}
	}
	if ledgerRows(t, owner) != 0 {
		t.Errorf("a refused statement charged")
	}
}

// The DSN parameter dp_role=analyst makes the same analyst connections as
// ext.OpenAnalyst; an unknown role is an error.
func TestDSNRole(t *testing.T) {
	path, _ := newClinic(t, 10, `json_object('privacy_unit', 'pid')`, insertPatients(3, func(i int) (int, string, int, any) { return i, "F", 40, 22.5 }))
	db, err := sql.Open(ext.DriverName, ext.DSN(path)+"&dp_role=analyst&dp_scope=default")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := queryAll(context.Background(), db, `SELECT * FROM patients`); err == nil || !strings.Contains(err.Error(), "is protected") {
		t.Errorf("dp_role=analyst: %v", err)
	}
	if _, _, err := queryAll(context.Background(), db, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.1) COUNT(*) FROM patients`); err != nil {
		t.Errorf("dp_role=analyst DP query: %v", err)
	}
	bad, _ := sql.Open(ext.DriverName, ext.DSN(path)+"&dp_role=boss")
	defer bad.Close()
	if err := bad.Ping(); err == nil || !strings.Contains(err.Error(), "unknown dp_role") {
		t.Errorf("unknown role: %v", err)
	}
}

// What an analyst may do: read public tables, the ledger, budgets and
// policies, the schema, and keep TEMP tables.
func TestAnalystMayReadPublic(t *testing.T) {
	path, _ := newClinic(t, 10, `json_object('privacy_unit', 'pid')`,
		insertPatients(5, func(i int) (int, string, int, any) { return i, "F", 40, 22.5 }))
	a := openAnalyst(t, path)
	ctx := context.Background()
	for _, q := range []string{
		`SELECT * FROM wards`, `SELECT * FROM dp_ledger`, `SELECT * FROM dp_policy`,
		`SELECT * FROM dp_budget_status`, `PRAGMA table_info(patients)`, `SELECT name FROM sqlite_schema`,
		`CREATE TEMP TABLE mine AS SELECT * FROM wards`, `INSERT INTO mine VALUES ('east', 3)`, `SELECT count(*) FROM mine`,
		`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) SELECT * FROM c`,
		`SELECT dp_scope()`,
	} {
		if _, _, err := queryAll(ctx, a, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// A statement prepared while a table was public cannot read it after the
// owner protects it.
func TestPreparedBeforeProtect(t *testing.T) {
	path, owner := newClinic(t, 10, "", insertPatients(5, func(i int) (int, string, int, any) { return i, "F", 40, 22.5 }))
	a := openAnalyst(t, path)
	conn, err := a.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := conn.PrepareContext(context.Background(), `SELECT * FROM patients`)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustExec(t, owner, `SELECT dp_protect('patients', '{"privacy_unit": "pid"}')`)
	rows, err := st.Query()
	if err == nil {
		rows.Close()
		t.Fatal("a statement prepared before protection still reads the table")
	}
	if !strings.Contains(err.Error(), "prepare it again") {
		t.Errorf("error %v", err)
	}
	var _ *sql.Stmt = st
}
