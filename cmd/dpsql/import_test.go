package main

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/internal/idx"
	_ "github.com/mattn/go-sqlite3"
)

type importedRow struct {
	id       int64
	features []float32
	label    sql.NullInt64
}

// readTable reads back an imported table with the plain sqlite3 driver.
func readTable(t *testing.T, path, table string) []importedRow {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, features, label FROM ` + quoteIdent(table) + ` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []importedRow
	for rows.Next() {
		var r importedRow
		var blob []byte
		if err := rows.Scan(&r.id, &blob, &r.label); err != nil {
			t.Fatal(err)
		}
		if r.features, err = vector.Decode(blob); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func gz(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func writeBytes(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func label(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }

func TestImportCSV(t *testing.T) {
	db := filepath.Join(t.TempDir(), "csv.db")
	csvFile := writeFile(t, "points.csv", "x,y,label\n0.5,1,3\n-2,4.25,7\n")
	out := mustRun(t, "import", db, "points", csvFile)
	if !strings.Contains(out, "imported 2 rows of dimension 2 into points (csv") || !strings.Contains(out, "labels from column label: 2 distinct values") {
		t.Fatalf("import output: %s", out)
	}
	want := []importedRow{{1, []float32{0.5, 1}, label(3)}, {2, []float32{-2, 4.25}, label(7)}}
	if got := readTable(t, db, "points"); !reflect.DeepEqual(got, want) {
		t.Fatalf("table points = %v, want %v", got, want)
	}
	mustRun(t, "import", db, "nolabel", writeFile(t, "n.csv", "1,2,3\n"))
	if got := readTable(t, db, "nolabel"); len(got) != 1 || got[0].label.Valid || len(got[0].features) != 3 {
		t.Fatalf("table nolabel = %v", got)
	}
	mustRun(t, "import", db, "cls", writeFile(t, "c.csv", "1,2,3\n4,5,6\n"), "--label-column", "0")
	if got := readTable(t, db, "cls"); !reflect.DeepEqual(got[1], importedRow{2, []float32{5, 6}, label(4)}) {
		t.Fatalf("table cls = %v", got)
	}
	// The imported vectors work with DP functions.
	mustRun(t, "init", db, "--mu", "1")
	mustRun(t, "query", db, "SELECT dp_gaussian(features, 5, 0.5) FROM points WHERE id = 1")
}

func TestImportNPY(t *testing.T) {
	le := binary.LittleEndian
	db := filepath.Join(t.TempDir(), "npy.db")
	feats := writeBytes(t, "x.npy", npyBytes("<f8", []int{3, 2, 1}, f64Bytes(le, 1, 2, 3, 4, 5, 6)))
	labels := writeBytes(t, "y.npy", npyBytes("<i8", []int{3}, i64Bytes(1, 1, 2)))
	out := mustRun(t, "import", db, "x", feats, "--labels", labels)
	if !strings.Contains(out, "imported 3 rows of dimension 2 into x (npy") || !strings.Contains(out, "labels from y.npy: 2 distinct values") {
		t.Fatalf("import output: %s", out)
	}
	want := []importedRow{{1, []float32{1, 2}, label(1)}, {2, []float32{3, 4}, label(1)}, {3, []float32{5, 6}, label(2)}}
	if got := readTable(t, db, "x"); !reflect.DeepEqual(got, want) {
		t.Fatalf("table x = %v, want %v", got, want)
	}

	// uint8 is scaled to [0, 1] unless --scale is given; gzip is read transparently.
	bytesFile := writeBytes(t, "u.npy.gz", gz(t, npyBytes("|u1", []int{1, 3}, []byte{0, 51, 255})))
	mustRun(t, "import", db, "u", bytesFile)
	if got := readTable(t, db, "u"); !reflect.DeepEqual(got[0].features, []float32{0, 0.2, 1}) || got[0].label.Valid {
		t.Fatalf("table u = %v", got)
	}
	mustRun(t, "import", db, "raw", bytesFile, "--scale", "1")
	if got := readTable(t, db, "raw"); !reflect.DeepEqual(got[0].features, []float32{0, 51, 255}) {
		t.Fatalf("table raw = %v", got)
	}

	mustFail(t, 1, "2 labels for 3 rows", "import", db, "bad", feats, "--labels", writeBytes(t, "y2.npy", npyBytes("<i8", []int{2}, i64Bytes(1, 2))))
	mustFail(t, 1, "needs 3 rows of 8 bytes", "import", db, "bad", writeBytes(t, "short.npy", npyBytes("<f4", []int{3, 2}, f32Bytes(le, 1, 2))))
	mustFail(t, 1, "must be finite", "import", db, "bad", writeBytes(t, "nan.npy", npyBytes("<f4", []int{1, 1}, []byte{0, 0, 0xc0, 0x7f})))
	mustFail(t, 1, "no rows", "import", db, "bad", writeBytes(t, "empty.npy", npyBytes("<f4", []int{0, 2}, nil)))
	// A failed import leaves no table behind.
	if out := mustRun(t, "query", db, "SELECT count(*) AS n FROM sqlite_schema WHERE name = 'bad'", "-f", "csv"); out != "n\n0\n" {
		t.Fatalf("a failed import left a table: %q", out)
	}
}

func TestImportIDX(t *testing.T) {
	db := filepath.Join(t.TempDir(), "idx.db")
	images := writeBytes(t, "train-images-idx3-ubyte.gz", gz(t, idx.Encode([]int{2, 2, 2}, []byte{0, 255, 51, 102, 255, 255, 0, 0})))
	labels := writeBytes(t, "train-labels-idx1-ubyte", idx.Encode([]int{2}, []byte{7, 3}))
	out := mustRun(t, "import", db, "mnist", images, "--labels", labels)
	if !strings.Contains(out, "imported 2 rows of dimension 4 into mnist (idx") {
		t.Fatalf("import output: %s", out)
	}
	want := []importedRow{{1, []float32{0, 1, 0.2, 0.4}, label(7)}, {2, []float32{1, 1, 0, 0}, label(3)}}
	if got := readTable(t, db, "mnist"); !reflect.DeepEqual(got, want) {
		t.Fatalf("table mnist = %v, want %v", got, want)
	}
	mustFail(t, 1, "this is a labels file", "import", db, "oops", labels)
	mustFail(t, 1, "3 labels for 2 rows", "import", db, "oops", images, "--labels", writeBytes(t, "l3", idx.Encode([]int{3}, []byte{1, 2, 3})))
	mustFail(t, 1, "not an .npy or IDX file", "import", db, "oops", images, "--labels", writeFile(t, "l.csv", "1\n2\n"))
}

func TestImportRefusals(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	csvFile := writeFile(t, "p.csv", "1,2\n")
	mustRun(t, "import", db, "p", csvFile)
	mustFail(t, 1, "already has a table (or index, view) named P", "import", db, "P", csvFile)
	// The rule of a release's "into": a plain name, not dp_ or sqlite_.
	for _, tc := range []struct{ name, want string }{
		{"dp_ledger", `dpsql: import: "dp_ledger": table names starting with dp_ or sqlite_ are reserved` + "\n"},
		{"sqlite_x", `dpsql: import: "sqlite_x": table names starting with dp_ or sqlite_ are reserved` + "\n"},
		{`odd "name"`, `dpsql: import: "odd \"name\"" is not a plain table name: use letters, digits and _, not starting with a digit (at most 128 characters)` + "\n"},
		{"1abc", `dpsql: import: "1abc" is not a plain table name: use letters, digits and _, not starting with a digit (at most 128 characters)` + "\n"},
	} {
		if r := run(t, "", "import", db, tc.name, csvFile); r.code != 2 || r.stderr != tc.want {
			t.Errorf("import into %q: exit %d, stderr %q; want 2, %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
	mustFail(t, 2, "--labels is for npy and idx files", "import", db, "q", csvFile, "--labels", csvFile)
	mustFail(t, 2, "--label-column is for CSV files", "import", db, "q", writeBytes(t, "a.npy", npyBytes("<f4", []int{1, 1}, []byte{0, 0, 0, 0})), "--label-column", "x")
	mustFail(t, 2, `unknown input format "xls"`, "import", db, "q", csvFile, "--format", "xls")
	mustFail(t, 1, "no such file or directory", "import", db, "q", filepath.Join(t.TempDir(), "missing.csv"))
	mustFail(t, 1, `line 2, column "b"`, "import", db, "q", writeFile(t, "bad.csv", "a,b\n1,zz\n"))
	mustFail(t, 2, "missing TABLE FILE", "import", db)
}

// mnistSized writes a 60000 x 784 input of the given format, MNIST-like:
// 20% of the values non-zero, labels 0..9.
func mnistSized(b *testing.B, format string) string {
	const n, d = 60000, 784
	rng := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	switch format {
	case "csv":
		buf.WriteString("label")
		for j := range d {
			fmt.Fprintf(&buf, ",p%d", j)
		}
		buf.WriteByte('\n')
		line := []byte{}
		for range n {
			line = strconv.AppendInt(line[:0], int64(rng.IntN(10)), 10)
			for range d {
				v := 0
				if rng.Float64() < 0.2 {
					v = rng.IntN(256)
				}
				line = append(line, ',')
				line = strconv.AppendInt(line, int64(v), 10)
			}
			buf.Write(append(line, '\n'))
		}
	case "npy":
		data := make([]byte, 0, 4*n*d)
		for range n * d {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(rng.NormFloat64())))
		}
		buf.Write(npyBytes("<f4", []int{n, d}, data))
	}
	p := filepath.Join(b.TempDir(), "mnist."+format)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkImport imports 60000 x 784 vectors:
//
//	go test ./cmd/dpsql -run '^$' -bench Import -benchtime 3x
func BenchmarkImport(b *testing.B) {
	for _, format := range []string{"npy", "csv"} {
		b.Run(format, func(b *testing.B) {
			in := mnistSized(b, format)
			dir := b.TempDir()
			b.ResetTimer()
			for i := range b.N {
				_, err := importFile(b.Context(), importOptions{db: filepath.Join(dir, fmt.Sprintf("%d.db", i)), table: "mnist", file: in, scale: 1})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
