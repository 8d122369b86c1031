package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
)

// Schema versions (schema.go): a file of version 1, as the version-1
// releases wrote it, is read as it is and upgraded to version 2 by the next
// write only; a file of a later version than this dpsql's is refused in words.

// Reading a version-1 file changes none of its bytes: Verify, the status
// view, a budget, what remains, the head, even through a connection that
// could write.
func TestVersion1FileReadUnchanged(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"ledger_v1.db", "ledger_v1_cap.db"} {
		path := copyV1Fixture(t, name)
		before := fileBytes(t, path)
		db, err := sql.Open("sqlite3", path) // read-write
		if err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyAt(ctx, db, nil)
		if err != nil || rep.Version != 1 {
			t.Errorf("%s: Verify: version %d, %v; want version 1, no error", name, rep.Version, err)
		}
		sts, err := ReadStatuses(ctx, db, "")
		if err != nil || len(sts) == 0 {
			t.Errorf("%s: ReadStatuses: %d rows, %v", name, len(sts), err)
		}
		if _, err := LoadBudget(ctx, db, sts[0].Scope); err != nil {
			t.Errorf("%s: LoadBudget: %v", name, err)
		}
		if _, err := ReadHead(ctx, db); err != nil {
			t.Errorf("%s: ReadHead: %v", name, err)
		}
		db.Close()
		l, err := newLedgerConn(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Remaining(ctx, sts[0].Scope); err != nil {
			t.Errorf("%s: Remaining: %v", name, err)
		}
		l.db.Close()
		if !bytes.Equal(fileBytes(t, path), before) {
			t.Errorf("%s: reading the file changed it", name)
		}
		if v, view := versionAndView(t, path); v != 1 || indexOf(v1StatusViews, view) < 0 {
			t.Errorf("%s: after reading, version %d and the view\n%s", name, v, view)
		}
	}
}

// The next charge upgrades a version-1 file inside its own transaction: the
// view is version 2's and user_version 2, and nothing else changed (the
// other objects' SQL, dp_budget, every earlier row of the chain; the chain
// gains only the charge's own rows). A refused charge upgrades nothing.
func TestVersion1FileUpgradedByCharge(t *testing.T) {
	ctx := context.Background()
	path := copyV1Fixture(t, "ledger_v1.db")
	master := func() map[string]string {
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		m, err := readMaster(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for name, o := range m {
			s := "<nil>"
			if o.sql != nil {
				s = *o.sql
			}
			out[name] = o.typ + " " + o.table + " " + s
		}
		return out
	}
	table := func(q string) []string {
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%#v", vals))
		}
		return out
	}
	objects, budgets, chain := master(), table(`SELECT * FROM dp_budget ORDER BY scope`), table(`SELECT * FROM dp_ledger ORDER BY id`)
	var notices []string
	prev := UpgradeNotice
	UpgradeNotice = func(m string) { notices = append(notices, m) }
	defer func() { UpgradeNotice = prev }()

	// Over budget: refused after the upgrade ran in its transaction, so
	// rolled back with it.
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, gauss(100), nil); !errors.Is(err, accountant.ErrBudget) {
		t.Fatalf("charging mu 100: %v, want a budget refusal", err)
	}
	l.db.Close()
	if v, view := versionAndView(t, path); v != 1 || view != v1StatusView || len(notices) > 0 {
		t.Errorf("after a refused charge: version %d, notices %q and the view\n%s", v, notices, view)
	}

	if err := chargeFile(t, path); err != nil {
		t.Fatal(err)
	}
	if v, view := versionAndView(t, path); v != 2 || view != stored(statusViewSQL) {
		t.Errorf("after a charge: version %d and the view\n%s", v, view)
	}
	want := "upgraded the ledger of " + path + " from schema version 1 to 2 (docs/ledger.md, Schema versions); " +
		"a dpsql that reads only version 1 or earlier no longer charges it, and says it was written by a newer dpsql"
	if len(notices) != 1 || notices[0] != want {
		t.Errorf("notices after the upgrading charge: %q, want one: %q", notices, want)
	}
	after := master()
	for name, was := range objects {
		if name != "dp_budget_status" && after[name] != was {
			t.Errorf("%s changed: %s, was %s", name, after[name], was)
		}
	}
	if len(after) != len(objects) {
		t.Errorf("%d objects after the upgrade, %d before", len(after), len(objects))
	}
	if got := table(`SELECT * FROM dp_budget ORDER BY scope`); strings.Join(got, "\n") != strings.Join(budgets, "\n") {
		t.Errorf("dp_budget changed:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(budgets, "\n"))
	}
	got := table(`SELECT * FROM dp_ledger ORDER BY id`)
	if len(got) <= len(chain) || strings.Join(got[:len(chain)], "\n") != strings.Join(chain, "\n") {
		t.Fatalf("the chain's earlier rows changed or none was added")
	}
	added := table(fmt.Sprintf(`SELECT kind FROM dp_ledger WHERE id > (SELECT id FROM dp_ledger ORDER BY id LIMIT 1 OFFSET %d)`, len(chain)-1))
	for _, k := range added {
		if k != fmt.Sprintf("%#v", []any{EventCharge}) && k != fmt.Sprintf("%#v", []any{EventCheckpoint}) {
			t.Errorf("the upgrading charge appended a row of kind %s (want only its charge and a checkpoint)", k)
		}
	}
	if err := chargeFile(t, path); err != nil || len(notices) != 1 {
		t.Errorf("a second charge: %v, notices %q (want the first one only)", err, notices)
	}
	db, _ := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	defer db.Close()
	if rep, err := VerifyAt(ctx, db, nil); err != nil || rep.Version != 2 {
		t.Errorf("after the upgrade: Verify: version %d, %v", rep.Version, err)
	}
}

// A scope created (dp_init) in a version-1 file upgrades it too: the write
// that needs the version-2 objects.
func TestVersion1FileUpgradedByInit(t *testing.T) {
	ctx := context.Background()
	path := copyV1Fixture(t, "ledger_v1_rows.db")
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.db.Close()
	b, _ := accountant.NewBudget("new", 1, 0, 1e-5)
	if err := l.Init(ctx, b); err != nil {
		t.Fatal(err)
	}
	if v, view := versionAndView(t, path); v != 2 || view != stored(statusViewSQL) {
		t.Errorf("after dp_init: version %d and the view\n%s", v, view)
	}
	if err := verifyFile(path); err != nil {
		t.Error(err)
	}
}

// A file of a later version is refused in words that say what to do, by
// every reader and writer, and left as it is; it is not taken for tampering.
func TestNewerVersionRefusedInWords(t *testing.T) {
	ctx := context.Background()
	for _, v := range []int{SchemaVersion + 1, 99} {
		want := fmt.Sprintf("this file was written by a newer dpsql (ledger schema version %d; this dpsql reads up to %d): upgrade dpsql", v, SchemaVersion)
		path := restingLedger(t)
		sqlOn(t, path, fmt.Sprintf(`PRAGMA user_version = %d`, v))
		rows := ledgerRowsOf(path)
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyAt(ctx, db, nil)
		if err == nil || err.Error() != want || !errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrMismatch) || rep.Version != v {
			t.Errorf("version %d: Verify says %v (version %d), want exactly %q", v, err, rep.Version, want)
		}
		if _, err := ReadStatuses(ctx, db, ""); err == nil || err.Error() != want {
			t.Errorf("version %d: ReadStatuses says %v, want exactly %q", v, err, want)
		}
		db.Close()
		l, err := newLedgerConn(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Remaining(ctx, "default"); !errors.Is(err, ErrNewerSchema) {
			t.Errorf("version %d: Remaining says %v", v, err)
		}
		if _, err := l.Charge(ctx, gauss(0.1), nil); err == nil || !strings.HasSuffix(err.Error(), want) || !strings.Contains(err.Error(), "nothing was written") ||
			strings.Contains(err.Error(), "audit verify") {
			t.Errorf("version %d: a charge says %v, want a refusal ending %q", v, err, want)
		}
		b, _ := accountant.NewBudget("other", 1, 0, 1e-5)
		if err := l.Init(ctx, b); !errors.Is(err, ErrNewerSchema) {
			t.Errorf("version %d: Init says %v", v, err)
		}
		l.db.Close()
		sqlOn(t, path, `PRAGMA journal_mode = DELETE`) // the refused writes switched it to WAL first
		if n := ledgerRowsOf(path); n != rows {
			t.Errorf("version %d: %d rows after the refused writes, want %d", v, n, rows)
		}
		if vv, view := versionAndView(t, path); vv != v || view != stored(statusViewSQL) {
			t.Errorf("version %d: after the refused writes, version %d and the view\n%s", v, vv, view)
		}
	}
}

// schemaHashes is the SHA-256 of the SQL texts every schema version accepts
// (ledgerObjects), and of the other packages' objects (otherObjects).
const schemaHashes = "testdata/schema_versions.txt"

// objectsDigest is the hex SHA-256 of a list of objects: each object's
// type, name, table and accepted texts, in order.
func objectsDigest(objs []object) string {
	h := sha256.New()
	for _, o := range objs {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00", o.typ, o.name, o.table, len(o.sql))
		for _, s := range o.sql {
			fmt.Fprintf(h, "%d\x00%s\x00", len(s), s)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// A change to the SQL of any object dpsql creates is a new schema version.
// An older dpsql compares a file's objects with the texts of the file's
// version: given this code's objects under an old version number, it
// reports them as replaced, a tamper alarm, rather than "written by a newer
// dpsql". So each version's texts are pinned by hash in
// testdata/schema_versions.txt, and a version's line never changes. To change
// an object: bump SchemaVersion, keep the old version's texts as that
// version's (objects.go), upgrade in place (migrate.go), and add the new
// version's line with
//
//	DPSQL_WRITE_SCHEMA_HASHES=1 go test ./ledger -run TestObjectSQLIsVersioned
//
// which appends lines for versions that have none and changes no other.
func TestObjectSQLIsVersioned(t *testing.T) {
	got := map[string]string{"others": objectsDigest(otherObjects)}
	for v := 0; v <= SchemaVersion; v++ {
		got[strconv.Itoa(v)] = objectsDigest(ledgerObjects(v))
	}
	want := map[string]string{}
	var order []string
	if f, err := os.Open(schemaHashes); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, h, ok := strings.Cut(line, " ")
			if !ok {
				t.Fatalf("%s: bad line %q", schemaHashes, line)
			}
			want[k] = strings.TrimSpace(h)
			order = append(order, k)
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if os.Getenv("DPSQL_WRITE_SCHEMA_HASHES") == "1" {
		var add []string
		for v := 0; v <= SchemaVersion; v++ {
			if _, ok := want[strconv.Itoa(v)]; !ok {
				add = append(add, fmt.Sprintf("%d %s\n", v, got[strconv.Itoa(v)]))
				want[strconv.Itoa(v)] = got[strconv.Itoa(v)]
			}
		}
		if _, ok := want["others"]; !ok {
			add = append(add, "others "+got["others"]+"\n")
			want["others"] = got["others"]
		}
		f, err := os.OpenFile(schemaHashes, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(strings.Join(add, ""))
		f.Close()
	}
	for v := 0; v <= SchemaVersion; v++ {
		k := strconv.Itoa(v)
		switch w, ok := want[k]; {
		case !ok:
			t.Errorf("%s has no line for schema version %d (this code's): add it with DPSQL_WRITE_SCHEMA_HASHES=1 (see the test's comment)", schemaHashes, v)
		case w != got[k] && v == SchemaVersion:
			t.Errorf("the SQL of an object dpsql creates changed, but SchemaVersion is still %d: a dpsql of version %d would refuse this code's files as tampered "+
				"(\"was replaced\") instead of saying they were written by a newer dpsql. Bump SchemaVersion, keep version %d's texts as version %d's "+
				"(objects.go), upgrade in place (migrate.go), and add the new version's line (see the test's comment); never edit a version's line", v, v, v, v)
		case w != got[k]:
			t.Errorf("the SQL texts schema version %d accepts changed: files written by version %d would be refused; keep them exactly as that version wrote them", v, v)
		}
	}
	if w, ok := want["others"]; !ok || w != got["others"] {
		t.Errorf("the SQL of protect's, serve's or sqlfuncs' objects (otherObjects) changed: a dpsql that checks the old text refuses a file holding the new one "+
			"as replaced; make their check depend on the schema version, bump SchemaVersion, then add the new hash (got %s)", got["others"])
	}
	for _, k := range order {
		if v, err := strconv.Atoi(k); err == nil && v > SchemaVersion {
			t.Errorf("%s has a line for schema version %d, later than this code's %d", schemaHashes, v, SchemaVersion)
		}
	}
	// The pinned texts are the ones this code writes (a fresh file is
	// checked against them in TestObjectsAreWhatDpsqlWrites).
	cur := statements(Schema)
	for _, o := range ledgerObjects(SchemaVersion) {
		if o.sql != nil && o.sql[0] != cur[o.name] {
			t.Errorf("%s: version %d's first text is not the one Schema creates", o.name, SchemaVersion)
		}
	}
}

// A version-1 file whose view is a look-alike (none a version-1 release
// wrote) is refused by Verify and by a charge, not upgraded over: the
// upgrade replaces only a view dpsql wrote, so the evidence stays.
func TestVersion1LookAlikeViewNotUpgraded(t *testing.T) {
	path := copyV1Fixture(t, "ledger_v1.db")
	sqlOn(t, path, `DROP VIEW dp_budget_status`, `CREATE VIEW dp_budget_status AS SELECT 'default' AS scope, 1e9 AS mu_budget, 0 AS mu_spent,
		1e9 AS mu_remaining, 0 AS epsilon_spent, 1e-5 AS delta, NULL AS epsilon_budget, NULL AS epsilon_rigorous, 0 AS entries,
		'add_remove' AS neighbours, 'mu-GDP' AS guarantee`)
	_, lookAlike := versionAndView(t, path)
	refusedNamingView(t, path, "a version-1 file with a look-alike view")
	if v, view := versionAndView(t, path); v != 1 || view != lookAlike {
		t.Errorf("after the refused charge: version %d and the view\n%s", v, view)
	}
}
