package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
)

// The mutation test of issue 23 §1: copies of a file holding every ledger
// object (and dp_policy and dp_account, made as protect and serve make
// them), each changed at random the ways someone who owns a copy changes a
// file: random byte flips, truncation, swapped pages, edited rows, dropped
// or replaced triggers, look-alike views, another user_version. For each:
//   - if the change touched what Verify vouches for (oracle: a logical dump
//     of every dpsql object and SQLite's own integrity check of their
//     tables differ from the original's), Verify fails;
//   - if a charge's cheap checks (preflight) fail, a charge by a fresh
//     process is refused and dp_ledger keeps its rows.
//
// The one change Verify cannot see is a consistent rewrite of the chain's
// tail with its derived tables (made here too, as a control): only a kept
// head catches it. Verify vouches for dp_policy's and dp_account's SQL, the
// types of their values and their pages, not their content (protect's and
// serve's verifications replay their records), and for dp_scope_state's
// figures to a few units in the last place (figuresULPs), a rigorous
// epsilon within an earlier rule's distance passing only with a note: the
// oracle reads them so.

// mutationFixture writes the file every mutant is copied from.
func mutationFixture(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fixture.db")
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := accountant.NewBudget("default", 20, 0, 1e-5)
	rows := b
	rows.Scope, rows.Neighbours = "rows", mechanism.ReplaceOne
	capB, _ := accountant.NewBudget(accountant.FileScope, 50, 0, 1e-5)
	capB.Neighbours = mechanism.ReplaceOne
	eps, _ := accountant.NewBudget("study", 0, 8, 1e-6)
	for _, b := range []accountant.Budget{b, rows, capB, eps} {
		if err := l.Init(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	ms := []Charge{
		{Scope: "default", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.3}, Query: "SELECT dp_gaussian(count(*), 1, 0.3) FROM t"},
		{Scope: "study", Mechanism: mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.2}, Details: map[string]any{"noise_tv": 1e-12}},
		{Scope: "study", Mechanism: mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 20}},
		{Scope: "rows", Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.2, Neighbours: mechanism.ReplaceOne}, Query: "q <&> \u2028"},
	}
	for i := range 24 {
		if _, err := l.Charge(ctx, ms[i%len(ms)], nil); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	// A policy record with its dp_policy row, an account record with its
	// dp_account row, as protect and serve write them.
	if _, err := l.Append(ctx, Record{Kind: EventPolicy, Scope: accountant.FileScope, Subject: "patients",
		Params: map[string]any{"action": "protect", "policy": map[string]any{"privacy_unit": "pid", "max_groups": 1, "max_rows": 1}}},
		func(tx *sql.Tx) error {
			if _, err := tx.Exec(policySQL); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO dp_policy VALUES ('patients', '{"max_groups":1,"max_rows":1,"privacy_unit":"pid"}', (SELECT max(id) FROM dp_ledger))`)
			return err
		}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, Record{Kind: EventAccount, Scope: "default", Subject: "alice", Params: map[string]any{"action": "add"}},
		func(tx *sql.Tx) error {
			if _, err := tx.Exec(accountSQL); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO dp_account VALUES ('alice', 'default', 'sha256', '00ff', 'abcd', '2026-11-28T00:00:00Z', NULL, (SELECT max(id) FROM dp_ledger))`)
			return err
		}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}
	l.db.Close()
	sqlOn(t, path, `CREATE TABLE t(a, b)`, `INSERT INTO t VALUES (1, 'user data, not dpsql''s')`, `PRAGMA journal_mode = DELETE`)
	if err := verifyFile(path); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return path
}

// dpsqlTables are the tables whose content the oracle reads.
var dpsqlTables = []string{"dp_ledger", "dp_budget", "dp_scope_state"}

// figures are a dp_scope_state row's figures, compared within their
// tolerances.
type figures struct{ spent, remaining, epsGDP, rig float64 }

// logicalDump returns what Verify vouches for in the file at path, as text,
// and dp_scope_state's figures per scope.
func logicalDump(path string) (string, map[string]figures, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return "", nil, err
	}
	defer db.Close()
	var b strings.Builder
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(&b, "user_version %d\n", v)
	names := map[string]bool{}
	for _, o := range append(ledgerObjects(SchemaVersion), otherObjects...) {
		names[o.name] = true
	}
	rows, err := db.Query(`SELECT type, name, tbl_name, quote(sql) FROM sqlite_master ORDER BY name`)
	if err != nil {
		return "", nil, err
	}
	var tables []string
	for rows.Next() {
		var typ, name, tbl, s string
		if err := rows.Scan(&typ, &name, &tbl, &s); err != nil {
			rows.Close()
			return "", nil, err
		}
		if names[strings.ToLower(name)] || names[strings.ToLower(tbl)] {
			fmt.Fprintf(&b, "%s %s %s %s\n", typ, name, tbl, s)
			if typ == "table" {
				tables = append(tables, name)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", nil, err
	}
	figs := map[string]figures{}
	for _, t := range tables {
		var ok string
		if err := db.QueryRow(`PRAGMA integrity_check(` + t + `)`).Scan(&ok); err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&b, "integrity %s %s\n", t, ok)
		if !slicesContains(dpsqlTables, t) {
			continue // dp_policy, dp_account: their content is protect's and serve's to vouch for
		}
		var cols []string
		crows, err := db.Query(`SELECT name FROM pragma_table_info(?)`, t)
		if err != nil {
			return "", nil, err
		}
		for crows.Next() {
			var c string
			crows.Scan(&c)
			if t == "dp_scope_state" && (c == "epsilon_rigorous" || c == "mu_spent" || c == "mu_remaining" || c == "epsilon_spent") {
				continue
			}
			cols = append(cols, "CASE typeof("+c+") WHEN 'real' THEN printf('%.17g', "+c+") ELSE quote("+c+") END")
		}
		crows.Close()
		q := `SELECT ` + strings.Join(cols, " || '|' || ") + ` FROM ` + t + ` ORDER BY rowid`
		if t == "dp_scope_state" {
			q = `SELECT ` + strings.Join(cols, " || '|' || ") + `, scope, mu_spent, mu_remaining, epsilon_spent, epsilon_rigorous, typeof(mu_spent) || typeof(mu_remaining) || typeof(epsilon_spent) FROM ` + t + ` ORDER BY rowid`
		}
		rs, err := db.Query(q)
		if err != nil {
			return "", nil, err
		}
		for rs.Next() {
			var line, types string
			var dest = []any{&line}
			var scope any
			var f figures
			var e sql.NullFloat64
			if t == "dp_scope_state" {
				dest = append(dest, &scope, &f.spent, &f.remaining, &f.epsGDP, &e, &types)
			}
			if err := rs.Scan(dest...); err != nil {
				rs.Close()
				return "", nil, err
			}
			fmt.Fprintf(&b, "%s: %s\n", t, line)
			if t == "dp_scope_state" {
				f.rig = math.NaN()
				if e.Valid {
					f.rig = e.Float64
				}
				figs[fmt.Sprint(scope)] = f
				fmt.Fprintf(&b, "%s: %v figures of types %s, epsilon_rigorous NULL %v\n", t, scope, types, !e.Valid)
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return "", nil, err
		}
	}
	return b.String(), figs, nil
}

func slicesContains(list []string, s string) bool { return indexOf(list, s) >= 0 }

// preflightFile runs a charge's cheap checks on path, as a fresh process's
// charge runs them, in a transaction it rolls back.
func preflightFile(t *testing.T, path string) error {
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.db.Close()
	tx, err := l.db.BeginTx(context.Background(), nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, _, err = l.preflight(context.Background(), tx)
	return err
}

// mutation changes the file at path (or returns the statements that do)
// and says how.
type mutation struct {
	kind  string
	apply func(t *testing.T, r *rand.Rand, path string) (how string, stmts []string)
}

func fileBytes(t *testing.T, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeBytes(t *testing.T, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// withTriggersOff runs stmts with dp_ledger's and dp_budget's triggers
// dropped, then puts them back exactly.
func withTriggersOff(stmts ...string) []string {
	var out []string
	for _, tr := range protectingTriggers {
		out = append(out, "DROP TRIGGER "+tr.name)
	}
	out = append(out, stmts...)
	for _, tr := range protectingTriggers {
		out = append(out, "CREATE TRIGGER "+tr.name+" "+tr.body)
	}
	return out
}

var mutations = []mutation{
	{"byte flips", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		data := fileBytes(t, path)
		var at []int
		for range 1 + r.IntN(3) {
			i := r.IntN(len(data))
			data[i] ^= byte(1 + r.IntN(255))
			at = append(at, i)
		}
		writeBytes(t, path, data)
		return fmt.Sprintf("bytes %v", at), nil
	}},
	{"truncation", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		data := fileBytes(t, path)
		n := r.IntN(len(data))
		if r.IntN(2) == 0 {
			n -= n % 4096 // at a page boundary
		}
		writeBytes(t, path, data[:n])
		return fmt.Sprintf("to %d of %d bytes", n, len(data)), nil
	}},
	{"page swap", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		data := fileBytes(t, path)
		pages := len(data) / 4096
		a, b := r.IntN(pages), r.IntN(pages)
		for a == b {
			b = r.IntN(pages)
		}
		pa := append([]byte(nil), data[a*4096:(a+1)*4096]...)
		copy(data[a*4096:], data[b*4096:(b+1)*4096])
		copy(data[b*4096:], pa)
		writeBytes(t, path, data)
		return fmt.Sprintf("pages %d and %d", a+1, b+1), nil
	}},
	{"edited row", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		id := 2 + r.IntN(28)
		edits := []string{
			fmt.Sprintf(`UPDATE dp_ledger SET params = replace(params, '0.', '0.0') WHERE id = %d`, id),
			fmt.Sprintf(`UPDATE dp_ledger SET mu = mu / 2 WHERE id = %d`, id),
			fmt.Sprintf(`UPDATE dp_ledger SET at = '2020-01-01T00:00:00.000000Z' WHERE id = %d`, id),
			fmt.Sprintf(`UPDATE dp_ledger SET query = 'other' WHERE id = %d`, id),
			fmt.Sprintf(`UPDATE dp_ledger SET params = CAST(params AS BLOB) WHERE id = %d`, id),
			fmt.Sprintf(`DELETE FROM dp_ledger WHERE id = %d`, id),
			`UPDATE dp_budget SET mu_budget = mu_budget * 10 WHERE scope = 'default'`,
			`UPDATE dp_budget SET created_at = '2020-01-01T00:00:00.000000Z' WHERE scope = 'study'`,
			`UPDATE dp_budget SET neighbours = 'add_remove' WHERE scope = 'rows'`,
			`INSERT INTO dp_budget VALUES ('ghost', 1, 1e-5, '2020-01-01T00:00:00.000000Z', NULL, 'add_remove')`,
			`UPDATE dp_scope_state SET mu_spent = mu_spent * (1 + 1e-15) WHERE scope = 'default'`,
			`UPDATE dp_scope_state SET through_id = through_id - 1 WHERE scope = '*'`,
			`UPDATE dp_scope_state SET epsilon_rigorous = epsilon_rigorous * 0.5 WHERE scope = 'study'`,
			`UPDATE dp_scope_state SET epsilon_rigorous = epsilon_rigorous * (1 - 5e-4) WHERE scope = 'study'`,
			`UPDATE dp_scope_state SET mu_remaining = mu_remaining * (1 + 1e-12) WHERE scope = 'default'`,
			`UPDATE dp_scope_state SET pld = x'00' WHERE scope = 'default'`,
			`DELETE FROM dp_scope_state WHERE scope = 'rows'`,
			`UPDATE dp_policy SET policy = CAST(policy AS BLOB)`,
		}
		e := edits[r.IntN(len(edits))]
		return e, withTriggersOff(e)
	}},
	{"dropped or replaced trigger", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		tr := protectingTriggers[r.IntN(len(protectingTriggers))]
		var stmts []string
		switch r.IntN(3) {
		case 0:
			stmts = []string{"DROP TRIGGER " + tr.name}
		case 1:
			stmts = []string{"DROP TRIGGER " + tr.name, "CREATE TRIGGER " + tr.name + " " + strings.Replace(tr.body, "\nBEGIN", " WHEN 0\nBEGIN", 1)}
		default:
			stmts = []string{`CREATE TRIGGER planted AFTER INSERT ON dp_ledger BEGIN SELECT 1; END`}
		}
		return strings.Join(stmts, "; "), stmts
	}},
	{"look-alike view", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		want := stored(statusViewSQL)
		var repl string
		switch r.IntN(4) {
		case 0:
			repl = strings.Replace(want, "AS\nSELECT", "AS\nSELECT ", 1) // one more space
		case 1:
			repl = strings.Replace(want, "coalesce(s.mu_spent, 0) AS mu_spent", "0 AS mu_spent", 1)
		case 2:
			repl = v1StatusViews[r.IntN(len(v1StatusViews))] // a version-1 release's, in a version-2 file
		default:
			repl = "CREATE TABLE dp_budget_status AS SELECT * FROM dp_budget"
		}
		return repl, []string{"DROP VIEW dp_budget_status", repl}
	}},
	{"user_version", func(t *testing.T, r *rand.Rand, path string) (string, []string) {
		// Every version but the fixture's (SchemaVersion): one no dpsql
		// writes, the earlier ones (whose objects are not this file's),
		// later ones (a newer dpsql's).
		vs := []int{-1, 0, 1, SchemaVersion + 1, 99, math.MaxInt32}
		q := fmt.Sprintf("PRAGMA user_version = %d", vs[r.IntN(len(vs))])
		return q, []string{q}
	}},
}

func TestMutatedFiles(t *testing.T) {
	src := mutationFixture(t)
	orig, origFigs, err := logicalDump(src)
	if err != nil {
		t.Fatal(err)
	}
	srcBytes := fileBytes(t, src)
	r := rand.New(rand.NewPCG(23, 2026))
	n := 280 // 40 of each kind
	if testing.Short() {
		n = 28 // 4 of each kind: the quick check's longest test otherwise
	}
	type tally struct{ mutants, changed, flagged, preflightFailed, charged, chargedChanged int }
	byKind := map[string]*tally{}
	dir := t.TempDir()
	for i := range n {
		m := mutations[i%len(mutations)]
		path := filepath.Join(dir, fmt.Sprintf("m%03d.db", i))
		writeBytes(t, path, srcBytes)
		how, stmts := m.apply(t, r, path)
		if len(stmts) > 0 {
			sqlOn(t, path, stmts...)
		}
		k := byKind[m.kind]
		if k == nil {
			k = &tally{}
			byKind[m.kind] = k
		}
		k.mutants++
		dump, figs, derr := logicalDump(path)
		changed := derr != nil || dump != orig
		for s, f := range figs {
			o := origFigs[s]
			if !ulpsApart(f.spent, o.spent, figuresULPs) || !ulpsApart(f.remaining, o.remaining, figuresULPs) || !ulpsApart(f.epsGDP, o.epsGDP, figuresULPs) ||
				!math.IsNaN(o.rig) && !ulpsApart(f.rig, o.rig, figuresULPs) {
				changed = true
			}
		}
		notes, verr := verifyFileNotes(path)
		if verr == nil && len(notes) > 0 {
			// Within an earlier rule's distance: passes, but named.
			verr = fmt.Errorf("verified with notes: %v", notes)
		}
		if changed {
			k.changed++
			if verr == nil {
				t.Errorf("mutant %d (%s: %s) changed a dpsql object, and Verify passes", i, m.kind, how)
			}
		}
		if verr != nil {
			k.flagged++
		}
		before := ledgerRowsOf(path)
		perr := preflightFile(t, path)
		cerr := chargeFile(t, path)
		if perr != nil {
			k.preflightFailed++
			if cerr == nil {
				t.Errorf("mutant %d (%s: %s): a charge was committed though the cheap checks fail (%v)", i, m.kind, how, perr)
			}
			if after := ledgerRowsOf(path); after != before {
				t.Errorf("mutant %d (%s: %s): dp_ledger went from %d to %d rows on a refused charge", i, m.kind, how, before, after)
			}
		}
		if cerr == nil {
			k.charged++
			if changed {
				k.chargedChanged++
				t.Logf("mutant %d (%s: %s): charged; Verify had said %v", i, m.kind, how, verr)
			}
		}
	}
	// The stated limit, as a control: a consistent rollback of the tail.
	path := filepath.Join(dir, "rollback.db")
	writeBytes(t, path, srcBytes)
	consistentRollback(t, path)
	if err := verifyFile(path); err != nil {
		t.Errorf("consistent tail rollback: Verify says %v (the stated limit changed: update the docs)", err)
	}
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var sum tally
	for _, name := range kinds {
		k := byKind[name]
		t.Logf("%-28s mutants %3d  changed a dpsql object %3d  Verify failed %3d  cheap checks failed %3d  charged %3d (of them on changed files %d)",
			name, k.mutants, k.changed, k.flagged, k.preflightFailed, k.charged, k.chargedChanged)
		sum.mutants += k.mutants
		sum.changed += k.changed
		sum.flagged += k.flagged
		sum.preflightFailed += k.preflightFailed
		sum.charged += k.charged
		sum.chargedChanged += k.chargedChanged
	}
	t.Logf("%-28s mutants %3d  changed a dpsql object %3d  Verify failed %3d  cheap checks failed %3d  charged %3d (of them on changed files %d)",
		"all", sum.mutants, sum.changed, sum.flagged, sum.preflightFailed, sum.charged, sum.chargedChanged)
}

// consistentRollback deletes the chain's last charge and rewrites the
// derived tables as the chain without it says.
func consistentRollback(t *testing.T, path string) {
	t.Helper()
	sqlOn(t, path, withTriggersOff(`DELETE FROM dp_ledger WHERE id = (SELECT max(id) FROM dp_ledger)`)...)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := computeState(rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The compositions kept for the last checkpoint stay as they were (the
	// deleted row follows it).
	kept := map[string][]byte{}
	prows, err := conn.QueryContext(ctx, `SELECT scope, pld FROM dp_scope_state WHERE pld IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for prows.Next() {
		var s string
		var b []byte
		if err := prows.Scan(&s, &b); err != nil {
			t.Fatal(err)
		}
		kept[s] = b
	}
	prows.Close()
	if _, err := conn.ExecContext(ctx, `DELETE FROM dp_scope_state`); err != nil {
		t.Fatal(err)
	}
	if err := writeStates(ctx, conn, fs, append(sortedScopes(fs), accountant.FileScope)...); err != nil {
		t.Fatal(err)
	}
	for s, b := range kept {
		if _, err := conn.ExecContext(ctx, `UPDATE dp_scope_state SET pld = ? WHERE scope = ?`, b, s); err != nil {
			t.Fatal(err)
		}
	}
}
