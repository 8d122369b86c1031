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
// attempt is refused with a message saying why, and nothing is charged, or
// (the attacks of issue 22 on keys, LIKE and the ledger) answered with rows
// that do not depend on what it tried, a DP statement charged once.
func TestBypassAttemptsRefused(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1)`,
		insertPatients(50, func(i int) (int, string, int, any) { return i, "F", 40, 22.5 }))
	other := filepath.Join(t.TempDir(), "other.db")
	bt := loadBypassTable(t, other)
	for _, q := range bt.Setup {
		mustExec(t, owner, q)
	}
	attempts := bt.Attempts
	const dp = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) `
	a := openAnalyst(t, path)
	ctx := context.Background()
	state := func() (string, int) {
		var s string
		owner.QueryRow(`SELECT coalesce(group_concat(hash), '') FROM dp_ledger`).Scan(&s)
		return s, ledgerRows(t, owner)
	}
	refused := 0
	for _, at := range attempts {
		state0, charges0 := state()
		_, rows, err := queryAll(ctx, a, at.SQL)
		state1, charges1 := state()
		if at.Answer != nil {
			want := 0
			if strings.Contains(at.SQL, "DIFFERENTIAL_PRIVACY") {
				want = 1
			}
			if err != nil {
				t.Errorf("%s: %.200s\n  got %v, want an answer", at.Name, at.SQL, err)
			} else if msg := at.Answer.check(rows); msg != "" {
				t.Errorf("%s: %.200s\n  %s", at.Name, at.SQL, msg)
			}
			if charges1-charges0 != want {
				t.Errorf("%s: %d charges, want %d", at.Name, charges1-charges0, want)
			}
			continue
		}
		refused++
		if err == nil || !strings.Contains(err.Error(), at.Want) {
			t.Errorf("%s: %.200s\n  got %v, want an error containing %q", at.Name, at.SQL, err, at.Want)
		}
		if err != nil && !strings.Contains(err.Error(), "budget exceeded") && !protect.IsRefusal(err) {
			t.Errorf("%s: error %v is not a refusal", at.Name, err)
		}
		if state0 != state1 {
			t.Errorf("%s: a refused statement changed the ledger (%d charges, then %d)", at.Name, charges0, charges1)
		}
	}
	if refused < 30 {
		t.Fatalf("only %d refused attempts", refused)
	}
	// A DP SELECT run through Exec is refused too.
	charges0 := ledgerRows(t, owner)
	if _, err := a.Exec(dp + `COUNT(*) FROM patients`); err == nil || !strings.Contains(err.Error(), "as a query") {
		t.Errorf("DP through Exec: %v", err)
	}
	// A view created in TEMP over the protected table can be created but not read.
	if _, err := a.Exec(`CREATE TEMP VIEW tv AS SELECT * FROM patients`); err == nil {
		if _, _, err := queryAll(ctx, a, `SELECT * FROM tv`); err == nil || !strings.Contains(err.Error(), "is protected") {
			t.Errorf("temp view over patients: %v", err)
		}
	}
	if ledgerRows(t, owner) != charges0 {
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
