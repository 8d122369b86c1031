package serve_test

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/serve"
)

// GET /v1/tables lists what an analyst may query: each protected table with
// its policy (privacy unit, max_groups, max_rows, persons, columns and their declared
// types, bounds, public key tables, max_length) and the public tables,
// dpsql's own left out. It is built from the policy and the schema alone:
// a neighbouring database (one person more) gives the same bytes. Its
// example statement is on a table the database protects and runs as
// written, within the scope's budget.
func TestTables(t *testing.T) {
	c := newClinic(t, 300, map[string]float64{"a": 2, "b": 0.3})
	c.exec(t, `CREATE TABLE sexes (sex TEXT)`)
	c.exec(t, `INSERT INTO sexes VALUES ('F'), ('M')`)
	c.exec(t, `SELECT dp_protect('patients', json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1,
		'bounds', json_object('bmi', json_array(10, 60)), 'public_keys', json_object('sex', 'sexes.sex'),
		'max_length', json_object('sex', 8), 'persons', 'clinic'))`)
	c.exec(t, `CREATE TABLE visits (id INTEGER, ward TEXT, cost)`)
	c.exec(t, `SELECT dp_protect('visits', json_object())`)
	alice, bob := c.account(t, "alice", "a"), c.account(t, "bob", "b")
	_, hs := c.start(t, serve.Config{})
	ctx := context.Background()

	l, err := client(hs, alice).Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Scope != "a" || len(l.Protected) != 2 || l.Protected[0].Table != "patients" || l.Protected[1].Table != "visits" {
		t.Fatalf("listing %+v", l)
	}
	p := l.Protected[0]
	if p.PrivacyUnit != "pid" || p.MaxGroups != 2 || p.MaxRows != 1 || p.Persons != "clinic" {
		t.Errorf("patients' policy %+v", p)
	}
	bmi := [2]float64{10, 60}
	want := []serve.Column{
		{Name: "pid", Type: "INTEGER", MaxLength: protect.DefaultMaxLength},
		{Name: "sex", Type: "TEXT", PublicKeys: "sexes.sex", MaxLength: 8},
		{Name: "age", Type: "INTEGER", MaxLength: protect.DefaultMaxLength},
		{Name: "bmi", Type: "REAL", Bounds: &bmi, MaxLength: protect.DefaultMaxLength},
	}
	if !reflect.DeepEqual(p.Columns, want) {
		t.Errorf("patients' columns\n got %+v\nwant %+v", p.Columns, want)
	}
	if v := l.Protected[1]; v.PrivacyUnit != "" || v.Persons != "" || v.MaxGroups != 1 || v.MaxRows != 1 || len(v.Columns) != 3 || v.Columns[2].Type != "" {
		t.Errorf("visits %+v", v)
	}
	var public []string
	for _, pt := range l.Public {
		public = append(public, pt.Table)
	}
	if strings.Join(public, ",") != "sexes,wards" {
		t.Errorf("public tables %v, want sexes and wards (no dp_ table, no protected one)", public)
	}

	// The example runs as written on the protected table, grouped by its
	// public keys, with the policy's bounds.
	if !strings.Contains(l.Example, "FROM patients GROUP BY sex") || !strings.Contains(l.Example, "AVG(bmi)") || !strings.Contains(l.Example, "mu = 0.5") {
		t.Errorf("example %q", l.Example)
	}
	res, err := client(hs, alice).Query(ctx, l.Example)
	if err != nil || len(res.Rows) != 2 || res.Charge == nil {
		t.Fatalf("the example %q: %+v, %v", l.Example, res, err)
	}
	// Bob's scope has mu 0.3: his example asks for half of it, and runs.
	lb, err := client(hs, bob).Tables(ctx)
	if err != nil || lb.Scope != "b" || !strings.Contains(lb.Example, "mu = 0.15)") {
		t.Fatalf("bob's listing %+v, %v", lb, err)
	}
	if _, err := client(hs, bob).Query(ctx, lb.Example); err != nil {
		t.Errorf("bob's example %q: %v", lb.Example, err)
	}

	// Nothing in it comes from the rows: one person more (or less) and the
	// same bytes; alice's example mu stays 0.5 (she has 1.94 left).
	before := tablesJSON(t, hs.URL, alice)
	c.exec(t, `INSERT INTO patients VALUES (9999, 'X', 99, 99.5)`)
	c.exec(t, `DELETE FROM patients WHERE pid = 17`)
	if after := tablesJSON(t, hs.URL, alice); after != before {
		t.Errorf("the listing changed with the rows:\n%s\n%s", before, after)
	}

	// Without its public key table the example does not group by the key
	// (such a statement would be refused), and still runs.
	c.exec(t, `DROP TABLE sexes`)
	l, err = client(hs, alice).Tables(ctx)
	if err != nil || strings.Contains(l.Example, "GROUP BY") || len(l.Public) != 1 {
		t.Fatalf("after DROP TABLE sexes: %+v, %v", l, err)
	}
	if _, err := client(hs, alice).Query(ctx, l.Example); err != nil {
		t.Errorf("the example %q without the key table: %v", l.Example, err)
	}

	// A database that protects another table: the example is on it.
	d := newClinic(t, 50, map[string]float64{"a": 1})
	d.exec(t, `SELECT dp_unprotect('patients')`)
	d.exec(t, `CREATE TABLE "ward stays" (pid INTEGER, days INTEGER)`)
	d.exec(t, `INSERT INTO "ward stays" WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 100) SELECT i, i % 7 FROM s`)
	d.exec(t, `SELECT dp_protect('ward stays', json_object('privacy_unit', 'pid'))`)
	tok := d.account(t, "carol", "a")
	_, hd := d.start(t, serve.Config{})
	ld, err := client(hd, tok).Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.Protected) != 1 || !strings.Contains(ld.Example, `FROM "ward stays"`) || strings.Contains(ld.Example, "patients") {
		t.Errorf("example %q on a database protecting \"ward stays\" only", ld.Example)
	}
	if _, err := client(hd, tok).Query(ctx, ld.Example); err != nil {
		t.Errorf("example %q: %v", ld.Example, err)
	}
}

// tablesJSON returns GET /v1/tables's body as the service sent it.
func tablesJSON(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/tables", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/tables: %d %s %v", resp.StatusCode, b, err)
	}
	return string(b)
}
