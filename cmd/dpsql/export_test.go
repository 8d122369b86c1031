package main

import (
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// readExport is a Python program (standard library only) that reads a file
// written by dpsql export and prints its rows as JSON records in a normal
// form: a vector as the hex of its little-endian float32 bytes, numbers as
// numbers, text as text, NULL as null. It parses .npy headers itself.
const readExport = `
import ast, csv, io, json, math, struct, sys, zipfile

fmt, path, vectors = sys.argv[1], sys.argv[2], sys.argv[3].split(",") if sys.argv[3] else []

def f32hex(xs):
    return b"".join(struct.pack("<f", float(x)) for x in xs).hex()

def npy(data):
    assert data[:6] == b"\x93NUMPY" and data[6:8] == b"\x01\x00", data[:8]
    hl = struct.unpack("<H", data[8:10])[0]
    assert (10 + hl) % 64 == 0 and data[10 + hl - 1:10 + hl] == b"\n"
    h = ast.literal_eval(data[10:10 + hl].decode("latin1"))
    assert h["fortran_order"] is False
    descr, shape, body = h["descr"], h["shape"], data[10 + hl:]
    n = shape[0]
    if descr == "<f4":
        d = shape[1]
        assert len(body) == 4 * n * d
        return [body[4 * d * i:4 * d * (i + 1)].hex() for i in range(n)]
    assert len(shape) == 1, shape
    if descr == "<i8":
        return list(struct.unpack("<%dq" % n, body))
    if descr == "<f8":
        return list(struct.unpack("<%dd" % n, body))
    if descr.startswith("<U"):
        w = int(descr[2:])
        return [body[4 * w * i:4 * w * (i + 1)].decode("utf-32-le").rstrip("\0") for i in range(n)]
    raise SystemExit("unknown descr " + descr)

out = []
if fmt == "json":
    for rec in json.load(open(path, encoding="utf-8")):
        out.append({k: (f32hex(v) if k in vectors and v is not None else v) for k, v in rec.items()})
elif fmt == "csv":
    r = csv.reader(open(path, encoding="utf-8", newline=""))
    header = next(r)
    for row in r:
        rec, i, ci = {}, 0, -1
        while i < len(header):
            ci += 1
            name = header[i]
            base = name.rsplit("_", 1)[0]
            if base in vectors and name.endswith("_0"):
                j = i
                while j < len(header) and header[j].rsplit("_", 1)[0] == base:
                    j += 1
                cells = row[i:j]
                rec[base] = None if all(c == "" for c in cells) else f32hex(cells)
                i = j
                continue
            cell = row[i]
            kind = sys.argv[4].split(",")[ci] if len(sys.argv) > 4 else "text"
            rec[name] = None if cell == "" and kind != "text" else (int(cell) if kind == "int" else float(cell) if kind == "real" else cell)
            i += 1
        out.append(rec)
elif fmt == "npz":
    z = zipfile.ZipFile(path)
    cols = {}
    for info in z.infolist():
        assert info.compress_type == zipfile.ZIP_STORED and info.filename.endswith(".npy")
        cols[info.filename[:-4]] = npy(z.read(info))
    names = [i.filename[:-4] for i in z.infolist()]
    n = len(cols[names[0]])
    out = [{k: cols[k][i] for k in names} for i in range(n)]
elif fmt == "npy":
    out = [{"col": v} for v in npy(open(path, "rb").read())]
print(json.dumps(out, ensure_ascii=False))
`

// pyReadExport runs readExport on an exported file.
func pyReadExport(t *testing.T, format, path string, vectors []string, kinds ...string) []map[string]any {
	t.Helper()
	args := []string{"-c", readExport, format, path, strings.Join(vectors, ",")}
	if len(kinds) > 0 {
		args = append(args, strings.Join(kinds, ","))
	}
	cmd := exec.Command(systemPython, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("python reading the %s export: %v\n%s", format, err, stderr)
	}
	var recs []map[string]any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	if err := dec.Decode(&recs); err != nil {
		t.Fatalf("python's output: %v\n%s", err, out)
	}
	for _, rec := range recs { // Python writes an int without '.' or 'e', a float always with one
		for k, v := range rec {
			if n, ok := v.(json.Number); ok {
				if i, err := n.Int64(); err == nil {
					rec[k] = i
				} else if f, err := strconv.ParseFloat(n.String(), 64); err == nil {
					rec[k] = f
				} else {
					t.Fatalf("python wrote the number %s", n)
				}
			}
		}
	}
	return recs
}

// tableRecords reads a table in rowid order in readExport's normal form; a
// column may be an expression "EXPR AS name".
func tableRecords(t *testing.T, db, table string, cols ...string) []map[string]any {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT ` + strings.Join(cols, ", ") + ` FROM ` + table + ` ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		rec := map[string]any{}
		for i, v := range vals {
			name := cols[i]
			if i := strings.LastIndex(name, " AS "); i >= 0 {
				name = name[i+len(" AS "):]
			}
			if b, ok := v.([]byte); ok {
				rec[name] = hex.EncodeToString(b)
			} else {
				rec[name] = v
			}
		}
		out = append(out, rec)
	}
	return out
}

func f32blob(xs ...float32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// releaseDB makes a real release: dp_avgmix over 40 rows of 6-dimensional
// features and 3 classes, into released(id, x BLOB, y BLOB).
func releaseDB(t *testing.T) string {
	t.Helper()
	db := newDB(t)
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	if _, err := raw.Exec(`CREATE TABLE train(id INTEGER PRIMARY KEY, features BLOB, label INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		v := make([]float32, 6)
		for j := range v {
			v[j] = float32(r.NormFloat64()) / 3
		}
		if _, err := raw.Exec(`INSERT INTO train(features, label) VALUES (?, ?)`, f32blob(v...), i%3); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	mustRun(t, "query", db, `SELECT dp_avgmix(features, label, json_object('n', 40, 'into', 'released', 'mu', 0.5, 'classes', 3)) FROM train`)
	return db
}

// TestExportRoundTrip exports a dp_avgmix release as npz, csv and json, and a
// single column as npy; Python's standard library reads each back (the .npy
// headers parsed by hand) and every value equals the table's, vectors to the
// bit.
func TestExportRoundTrip(t *testing.T) {
	needPython(t)
	db := releaseDB(t)
	want := tableRecords(t, db, "released", "id", "x", "y")
	if len(want) != 40 || len(want[0]["x"].(string)) != 6*8 || len(want[0]["y"].(string)) != 3*8 {
		t.Fatalf("the release is not 40 rows of 6 + 3 dimensions: %d rows, %v", len(want), want[0])
	}
	dir := t.TempDir()
	for _, c := range []struct{ format, file string }{
		{"npz", "released.npz"}, {"csv", "released.csv"}, {"json", "released.json"},
	} {
		out := filepath.Join(dir, c.file)
		mustRun(t, "export", db, "released", "--out", out) // the format from the extension
		got := pyReadExport(t, c.format, out, []string{"x", "y"}, "int", "vector", "vector")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: python read\n%v\nwant\n%v", c.format, got[:2], want[:2])
		}
	}
	out := filepath.Join(dir, "x.npy")
	mustRun(t, "export", db, "released", "--format", "npy", "--column", "x", "--out", out)
	got := pyReadExport(t, "npy", out, nil)
	for i, rec := range got {
		if rec["col"] != want[i]["x"] {
			t.Fatalf("x.npy row %d: %v, want %v", i, rec["col"], want[i]["x"])
		}
	}
	// Standard output, with --format.
	if s := mustRun(t, "export", db, "released", "--format", "json"); !strings.HasPrefix(s, "[\n{\"id\":1,\"x\":[") {
		t.Errorf("json on standard output starts %q", s[:min(40, len(s))])
	}
}

// TestExportValues covers NULLs, text that CSV and JSON must quote, REALs at
// the ends of their range and a vector column with a NULL; and what npy
// refuses.
func TestExportValues(t *testing.T) {
	needPython(t)
	db := newDB(t)
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE "odd table"(id INTEGER PRIMARY KEY, v BLOB, note TEXT, r REAL, n INTEGER, at DATETIME)`); err != nil {
		t.Fatal(err)
	}
	for _, row := range [][]any{
		{f32blob(1, -2.5, 3e-38), "plain", 0.1, int64(-9007199254740993), "2026-01-02 03:04:05"},
		{nil, "quote \" comma , newline \n <&> é 😀 \u2028", -1e-300, nil, nil},
		{f32blob(float32(math.MaxFloat32), 0, -0.0), "", 1.7976931348623157e308, int64(0), "not a date"},
	} {
		if _, err := raw.Exec(`INSERT INTO "odd table"(v, note, r, n, at) VALUES (?, ?, ?, ?, ?)`, row...); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	// The DATETIME column must come out as the text it holds, never reparsed.
	want := tableRecords(t, db, `"odd table"`, "id", "v", "note", "r", "n", "CAST(at AS TEXT) AS at")
	dir := t.TempDir()
	for _, format := range []string{"csv", "json"} {
		out := filepath.Join(dir, "odd."+format)
		mustRun(t, "export", db, "odd table", "--raw", "--out", out)
		got := pyReadExport(t, format, out, []string{"v"}, "int", "vector", "text", "real", "int", "text")
		if format == "csv" { // CSV cannot tell an empty string from NULL in a TEXT column
			want[2]["note"], got[2]["note"] = "", ""
			if got[1]["at"] == "" {
				got[1]["at"] = nil
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: python read\n%v\nwant\n%v", format, got, want)
		}
	}
	mustFail(t, 1, `column v of odd table holds NULL (row 2), which a NumPy array cannot`, "export", db, "odd table", "--raw", "--out", filepath.Join(dir, "odd.npz"))
	out := filepath.Join(dir, "note.npy")
	mustRun(t, "export", db, "odd table", "--raw", "--column", "note", "--out", out)
	if got := pyReadExport(t, "npy", out, nil); got[1]["col"] != want[1]["note"] {
		t.Errorf("note.npy row 2: %q, want %q", got[1]["col"], want[1]["note"])
	}
	if _, err := os.Stat(filepath.Join(dir, "odd.npz")); !os.IsNotExist(err) {
		t.Errorf("a refused export left its file: %v", err)
	}
}

// TestExportRefusals: what export will not write, each with its reason.
func TestExportRefusals(t *testing.T) {
	db := newDB(t) // t(id, x, name, v) with v = x'0000803f' and x'00'
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists.csv")
	if err := os.WriteFile(exists, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE nan(v BLOB); INSERT INTO nan VALUES (x'0000c07f');
CREATE TABLE ok(a INTEGER); INSERT INTO ok VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for _, c := range []struct {
		code int
		want string
		args []string
	}{
		{1, "dp_ledger is one of dpsql's own tables, not a release: the ledger is public and `dpsql audit", []string{"export", db, "dp_ledger", "--format", "json"}},
		{1, "DP_budget is one of dpsql's own tables", []string{"export", db, "DP_budget", "--format", "json"}},
		{1, `has no table "nope" (its tables: nan, ok, t)`, []string{"export", db, "nope", "--format", "csv"}},
		{1, "column v of t: row 3 holds a BLOB of 1 bytes, not a float32 vector", []string{"export", db, "t", "--raw", "--format", "csv"}},
		{1, "column v of nan holds NaN or an infinity (row 1), which JSON cannot represent", []string{"export", db, "nan", "--raw", "--format", "json"}},
		{1, "exists.csv already exists; export never replaces a file", []string{"export", db, "ok", "--raw", "--out", exists}},
		{1, `has no column "zz"`, []string{"export", db, "ok", "--raw", "--format", "npy", "--column", "zz", "--out", filepath.Join(dir, "z.npy")}},
		{2, "give --format npy, csv or json", []string{"export", db, "ok"}},
		{2, `unknown --format "xml"`, []string{"export", db, "ok", "--raw", "--format", "xml"}},
		{2, "--column is for --format npy", []string{"export", db, "ok", "--raw", "--format", "csv", "--column", "a"}},
	} {
		mustFail(t, c.code, c.want, c.args...)
	}
	if b, _ := os.ReadFile(exists); string(b) != "keep" {
		t.Errorf("the existing file now holds %q", b)
	}
	if s := mustRun(t, "export", db, "nan", "--raw", "--format", "csv"); s != "v_0\nNaN\n" {
		t.Errorf("csv of a NaN vector: %q", s)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("refused exports left files: %v", ents)
	}
}

// TestExportRawNeedsFlag: export writes a release as it is, but refuses a
// table no charge wrote (raw rows, a protected table's included) unless --raw
// is given, and then warns; a ledger row naming the table for a release that
// was refused or failed does not make it one.
func TestExportRawNeedsFlag(t *testing.T) {
	db := releaseDB(t) // released: a dp_avgmix release; train: its raw input
	if r := run(t, "", "export", db, "released", "--format", "csv"); r.code != 0 || r.stderr != "" {
		t.Fatalf("exporting the release: exit %d, stderr %q", r.code, r.stderr)
	}
	r := mustFail(t, 1, "train is not a release (no charge in "+db+"'s ledger wrote it): its rows are raw data, not differentially private", "export", db, "train", "--format", "csv")
	if !strings.Contains(r.stderr, "pass --raw") || r.stdout != "" {
		t.Fatalf("refusal: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = run(t, "", "export", db, "TRAIN", "--raw", "--format", "csv")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "id,features_0,") {
		t.Fatalf("export --raw: exit %d, stdout %.80q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := "dpsql: warning: exporting train, which is not a release: its rows are raw data"; !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("export --raw: stderr %q, want %q...", r.stderr, want)
	}

	// A protected table says so.
	mustRun(t, "protect", db, "train")
	mustFail(t, 1, "the table is protected: analysts may read it only through DP statements", "export", db, "train", "--format", "json")
	if r := run(t, "", "export", db, "train", "--raw", "--format", "json"); r.code != 0 || !strings.Contains(r.stderr, "warning: exporting train") || !strings.Contains(r.stderr, "protected") {
		t.Fatalf("export --raw of a protected table: exit %d, stderr %q", r.code, r.stderr)
	}

	// A ledger row that names train for a release that did not happen.
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, params := range []string{
		`{"into":"train","release_refused":"over budget"}`,
		`{"into":"train","status":"failed","charge_id":2}`,
	} {
		if _, err := raw.Exec(`INSERT INTO dp_ledger(at, scope, mechanism, mu, params, query, prev_hash, hash, kind, form)
			VALUES ('2026-01-01T00:00:00Z', 'default', 'x', 0, ?, '', '', '', 'outcome', 1)`, params); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	mustFail(t, 1, "train is not a release", "export", db, "train", "--format", "json")
}
