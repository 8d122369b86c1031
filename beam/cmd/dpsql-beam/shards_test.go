package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// writeVisitsCSV writes rows as n CSV shards in dir, the header's columns in
// another order than the table's (they are matched by name) and in another
// case; a visit without a person has an empty pid field (NULL).
func writeVisitsCSV(t testing.TB, dir string, rows []visit, n int) []string {
	t.Helper()
	files := make([]string, n)
	bufs := make([]strings.Builder, n)
	for i := range bufs {
		bufs[i].WriteString("Ward,stay,PID\n")
	}
	for i, r := range rows {
		pid := ""
		if r.pid != nil {
			pid = fmt.Sprint(r.pid)
		}
		fmt.Fprintf(&bufs[i%n], "%s,%v,%s\n", r.ward, r.stay, pid)
	}
	for i := range files {
		files[i] = filepath.Join(dir, fmt.Sprintf("visits-%d.csv", i))
		if err := os.WriteFile(files[i], []byte(bufs[i].String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// visitParquet is a visit as a Parquet row.
type visitParquet struct {
	PID  *int64  `parquet:"pid,optional"`
	Ward string  `parquet:"ward"`
	Stay float64 `parquet:"stay"`
}

// writeVisitsParquet writes rows as n Parquet shards in dir.
func writeVisitsParquet(t testing.TB, dir string, rows []visit, n int) []string {
	t.Helper()
	parts := make([][]visitParquet, n)
	for i, r := range rows {
		v := visitParquet{Ward: r.ward, Stay: r.stay}
		if r.pid != nil {
			p := r.pid.(int64)
			v.PID = &p
		}
		parts[i%n] = append(parts[i%n], v)
	}
	files := make([]string, n)
	for i, p := range parts {
		files[i] = filepath.Join(dir, fmt.Sprintf("visits-%d.parquet", i))
		if err := parquet.WriteFile(files[i], p); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestAggregateShards runs the ward statement over the visits in CSV and in
// Parquet shards, the database declaring the table (protected, empty): the
// same charge as protected mode's SQL, one charge committed before the run,
// and a release within the noise of the exact bounded figures.
func TestAggregateShards(t *testing.T) {
	rows, want := visitRows(0)
	for _, format := range []string{"csv", "parquet"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			path, db := visitsSchema(t, dir, 20, 1e-5)
			var files []string
			if format == "csv" {
				files = writeVisitsCSV(t, dir, rows, 3)
			} else {
				files = writeVisitsParquet(t, dir, rows, 3)
			}
			var atRun []ledgerRow
			var job string
			main := &Main{beforeRun: func(j string) error {
				job, atRun = j, ledgerRows(t, db)
				return nil
			}}
			code, _, errs := run(t, main, "aggregate", "--db", path, "--into", "wards_rel", "--query", wardQuery,
				"--"+format, strings.Join(files, ","))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if len(atRun) != 1 || atRun[0].params["job"] != job {
				t.Fatalf("ledger when the pipeline started: %+v, want exactly the job's charge", atRun)
			}
			checkWardsAgainstSQL(t, path, db, "wards_rel", job, atRun[0].id, want)
		})
	}
}

// TestAggregateShardFailures: shards whose header or schema does not fit
// the table are refused before the charge; a malformed row a worker finds
// (a short line in the second CSV shard, a value the table's CHECK refuses)
// fails the job after the charge, which stays, with a failed outcome and no
// release table.
func TestAggregateShardFailures(t *testing.T) {
	dir := t.TempDir()
	path, db := visitsSchema(t, dir, 50, 1e-5)
	if _, err := db.Exec(`CREATE TABLE checked (pid INTEGER, ward TEXT, stay REAL CHECK (stay < 100));
		SELECT dp_protect('checked', json_object('privacy_unit', 'pid', 'bounds', json_object('stay', json_array(0, 10))))`); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.csv", "pid,ward,stay\n1,a,2\n2,b,3\n")
	short := write("short.csv", "pid,ward,stay\n3,a,2\n4,b\n")
	big := write("big.csv", "pid,ward,stay\n3,a,2\n4,b,500\n")
	unknown := write("unknown.csv", "pid,ward,height\n1,a,2\n")
	twice := write("twice.csv", "pid,ward,PID\n1,a,2\n")
	notParquet := write("x.parquet", "pid,ward,stay\n")
	q := func(table string) string {
		return "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ward, COUNT(*) AS n, SUM(stay) AS s FROM " + table + " GROUP BY ward"
	}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		err     string
		charged bool
	}{
		{"unknown column", []string{"--query", q("visits"), "--csv", good + "," + unknown}, 2, `column "height" is not a column of table visits`, false},
		{"column twice", []string{"--query", q("visits"), "--csv", twice}, 2, "appears twice", false},
		{"not parquet", []string{"--query", q("visits"), "--parquet", notParquet}, 2, "not a Parquet file", false},
		{"missing shard", []string{"--query", q("visits"), "--csv", good + "," + filepath.Join(dir, "nope.csv")}, 2, "nope.csv", false},
		{"csv and parquet", []string{"--query", q("visits"), "--csv", good, "--parquet", notParquet}, 2, "not both", false},
		{"short row", []string{"--query", q("visits"), "--csv", good + "," + short}, 1, "short.csv line 3: wrong number of fields", true},
		{"check constraint", []string{"--query", q("checked"), "--csv", good + "," + big}, 1, "big.csv, row 2: the table checked refuses it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ledgerRows(t, db)
			args := append([]string{"aggregate", "--db", path, "--into", "rel"}, tc.args...)
			code, _, errs := run(t, nil, args...)
			if code != tc.code || !strings.Contains(errs, tc.err) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.err)
			}
			after := ledgerRows(t, db)
			if !tc.charged {
				if len(after) != len(before) {
					t.Fatalf("a refused run left %d charges", len(after)-len(before))
				}
				return
			}
			if len(after) != len(before)+1 || !strings.Contains(errs, "nothing was released") {
				t.Fatalf("%d charges after a failed job, want %d: %s", len(after), len(before)+1, errs)
			}
			job, _ := after[len(after)-1].params["job"].(string)
			if o := outcomes(t, db, job); len(o) != 1 || o[0].Status != statusFailed || !strings.Contains(o[0].Error, tc.err) {
				t.Fatalf("outcome records %+v", o)
			}
			if hasTable(t, db, "rel") {
				t.Fatal("a failed job left a release table")
			}
		})
	}
	auditVerify(t, path)
}

// TestAggregateShardsPublicKeys: a GROUP BY over public keys read from CSV
// shards releases exactly the listed keys (one the shards lack, too) and
// drops rows whose key is not listed, as the SQL path does; the key list
// reaches the workers from the database's key table.
func TestAggregateShardsPublicKeys(t *testing.T) {
	dir := t.TempDir()
	path, db := visitsSchema(t, dir, 20, 1e-5)
	if _, err := db.Exec(`CREATE TABLE wardlist (name TEXT); INSERT INTO wardlist VALUES ('a'), ('b'), ('z');
		SELECT dp_protect('visits', json_object('privacy_unit', 'pid', 'public_keys', json_object('ward', 'wardlist.name')))`); err != nil {
		t.Fatal(err)
	}
	var rows []visit
	for p := range 3000 {
		rows = append(rows, visit{int64(p), []string{"a", "b", "c"}[p%3], 1})
	}
	files := writeVisitsCSV(t, dir, rows, 2)
	code, _, errs := run(t, nil, "aggregate", "--db", path, "--into", "pk", "--csv", strings.Join(files, ","),
		"--query", `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) ward, COUNT(*) AS n FROM visits GROUP BY ward ORDER BY ward`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	_, params, _ := lastCharge(t, db)
	sigma := statementParts(t, params)["count"]["sigma"].(float64)
	got := map[string]int64{}
	var order []string
	r, err := db.Query(`SELECT ward, n FROM pk ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var w string
		var n int64
		if err := r.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		got[w] = n
		order = append(order, w)
	}
	r.Close()
	if fmt.Sprint(order) != "[a b z]" {
		t.Fatalf("released wards %v, want the listed a, b, z in order", order)
	}
	for w, exact := range map[string]float64{"a": 1000, "b": 1000, "z": 0} {
		if d := float64(got[w]) - exact; d > 5*sigma+1 || d < -5*sigma-1 {
			t.Errorf("ward %s: COUNT %d, exact %v (sigma %.3g)", w, got[w], exact, sigma)
		}
	}
}
