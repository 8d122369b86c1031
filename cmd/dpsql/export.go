package main

import (
	"archive/zip"
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/npy"
	"github.com/spf13/cobra"
)

// Export formats.
const (
	ExportNPY  = "npy"
	ExportCSV  = "csv"
	ExportJSON = "json"
)

type exportOptions struct {
	db, table, format, out, column string
	immutable, raw                 bool
}

func (m *Main) newExportCmd() *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export DB TABLE --format npy|csv|json [--out FILE] [--raw]",
		Short: "Write a table (a release) out as NumPy arrays, CSV or JSON, vectors as arrays",
		Long: `Write TABLE out, in rowid order, for tools outside SQLite. BLOB columns are read
as vectors of little-endian float32 (the layout of dpsql's releases, dpsql
import and sqlite-vec), one dimension per column, and written as arrays of
numbers, never as hex or base64.

  npy   a NumPy .npz archive (numpy.savez's layout, uncompressed) holding one
        array per column, named after it: a vector column as a float32 matrix
        (rows x dimension), an INTEGER column as int64, a REAL column (or one
        mixing INTEGER and REAL) as float64, a TEXT column as fixed-width
        unicode ('<U' + its longest value). np.load(FILE)["x"] is the matrix
        of column x. With --column C, a single .npy array of column C instead.
        An array has no NULL: a column holding one is refused (use csv or json).
  csv   a header row, then one line per row; a vector column x of dimension d
        becomes d columns x_0 ... x_(d-1); NULL is an empty field.
  json  an array of records, one object per row, keys in the table's column
        order; a vector is an array of numbers; NULL is null.

Numbers are written in the shortest form that reads back to the same float32
(vectors) or float64 (REAL) value. The output goes to standard output, or to
--out FILE, which must not exist yet (it is written beside, then moved into
place); --format defaults to the extension of --out (.npz or .npy, .csv, .json).

Export adds no noise: it writes the table as it is. A table is private only if
a release made it, so export writes a release (a table that a charge of the
ledger wrote: dp_avgmix, dp_select_topm, dpsql-beam) and refuses any other
table, whose rows are raw data, unless --raw is given; then it warns. dpsql's
own tables (dp_*) are refused: the ledger is public and "dpsql audit DB -f
json" (or csv) exports it, "dpsql budget DB -f json" the budgets. The file is
opened read-only, so a file you cannot write exports too.`,
		Example: `  dpsql export clinic.db released --out released.npz
  python3 -c 'import numpy as np; a = np.load("released.npz"); print(a["x"].shape, a["y"].dtype)'
  dpsql export clinic.db selected --format csv --out selected.csv`,
		Args: nargs("DB", "TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db, o.table = args[0], args[1]
			if err := o.resolveFormat(); err != nil {
				return err
			}
			return m.export(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "npy (an .npz of every column, or an .npy with --column), csv or json (default: from --out's extension)")
	cmd.Flags().StringVarP(&o.out, "out", "o", "", "the file to write, which must not exist (default: standard output)")
	cmd.Flags().StringVar(&o.column, "column", "", "with --format npy: write this column alone as one .npy array")
	cmd.Flags().BoolVar(&o.raw, "raw", false, "export a table that is not a release: its raw rows, as they are (a warning is printed)")
	immutableFlag(cmd, &o.immutable)
	return cmd
}

// resolveFormat checks --format, or takes it from --out's extension.
func (o *exportOptions) resolveFormat() error {
	o.format = strings.ToLower(o.format)
	if o.format == "" {
		switch strings.ToLower(filepath.Ext(o.out)) {
		case ".npz", ".npy":
			o.format = ExportNPY
		case ".csv":
			o.format = ExportCSV
		case ".json":
			o.format = ExportJSON
		default:
			return usagef("export: give --format npy, csv or json (it is taken from --out's extension only for .npz, .npy, .csv and .json)")
		}
	}
	if !slices.Contains([]string{ExportNPY, ExportCSV, ExportJSON}, o.format) {
		return usagef("export: unknown --format %q (want npy, csv or json)", o.format)
	}
	if o.column != "" && o.format != ExportNPY {
		return usagef("export: --column is for --format npy (csv and json write every column)")
	}
	return nil
}

// Kinds of exported column, from the values it holds.
const (
	colNull   = iota // only NULL
	colInt           // INTEGER (and NULL)
	colReal          // REAL, or INTEGER and REAL (and NULL)
	colText          // TEXT (and NULL)
	colMixed         // TEXT with numbers: csv and json only
	colVector        // BLOBs of one length, a multiple of 4: float32 vectors
)

// exportColumn is what the first pass learns about one column.
type exportColumn struct {
	name                      string
	kind                      int
	dim                       int // vector columns: float32 elements per value
	maxRunes                  int // text columns: the longest value, in code points
	nulls, ints, reals, texts int
	blobs                     int
	firstNull, firstNonFinite int   // 1-based row numbers, 0 if none
	badBlob                   error // why a BLOB column is not a vector column
}

// exportTable is a table to export: its name as stored, its columns, and the
// ORDER BY that fixes the row order.
type exportTable struct {
	name    string
	cols    []*exportColumn
	orderBy string
	rows    int
}

func (m *Main) export(ctx context.Context, stdout io.Writer, o exportOptions) error {
	if strings.HasPrefix(strings.ToLower(o.table), "dp_") {
		return fmt.Errorf("export: %s is one of dpsql's own tables, not a release: the ledger is public and `dpsql audit %s -f json` (or -f csv) exports it, every row with its hash; `dpsql budget %s -f json` gives the budgets", o.table, o.db, o.db)
	}
	db, err := openReadOnly(ctx, o.db, o.immutable)
	if err != nil {
		return err
	}
	defer db.Close()
	// One read transaction: every pass sees the same rows.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	t, err := describeTable(ctx, tx, o.db, o.table)
	if err != nil {
		return err
	}
	if release, protected := provenance(ctx, tx, t.name); !release {
		why := "its rows are raw data, not differentially private"
		if protected {
			why = "its rows are raw data, and the table is protected: analysts may read it only through DP statements"
		}
		if !o.raw {
			return fmt.Errorf("export: %s is not a release (no charge in %s's ledger wrote it): %s. Export the table a release wrote (dp_avgmix's or dp_select_topm's 'into'), or pass --raw to write these rows as they are", t.name, o.db, why)
		}
		fmt.Fprintf(m.Stderr, "dpsql: warning: exporting %s, which is not a release: %s; nothing adds noise to them\n", t.name, why)
	}
	if err := t.scan(ctx, tx); err != nil {
		return err
	}
	cols := t.cols
	if o.column != "" {
		i := slices.IndexFunc(cols, func(c *exportColumn) bool { return strings.EqualFold(c.name, o.column) })
		if i < 0 {
			return fmt.Errorf("export: %s has no column %q (its columns: %s)", t.name, o.column, strings.Join(t.names(), ", "))
		}
		cols = cols[i : i+1]
	}
	if err := t.check(o.format, cols); err != nil {
		return err
	}

	w, commit, err := exportOutput(stdout, o)
	if err != nil {
		return err
	}
	defer commit(false)
	bw := bufio.NewWriterSize(w, 1<<16)
	switch {
	case o.format == ExportCSV:
		err = t.writeCSV(ctx, tx, bw)
	case o.format == ExportJSON:
		err = t.writeJSON(ctx, tx, bw)
	case o.column != "":
		err = t.writeNPY(ctx, tx, bw, cols[0])
	default:
		err = t.writeNPZ(ctx, tx, bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("export: writing %s: %w", t.name, err)
	}
	return commit(true)
}

// exportOutput returns where to write and a function that finishes: with
// true it moves a written --out file into place (refusing to replace an
// existing file), with false it removes what was written.
func exportOutput(stdout io.Writer, o exportOptions) (io.Writer, func(ok bool) error, error) {
	if o.out == "" {
		if o.format == ExportNPY && isTerminal(stdout) {
			return nil, nil, usagef("export: --format npy writes binary data: give --out FILE or redirect standard output")
		}
		return stdout, func(bool) error { return nil }, nil
	}
	if _, err := os.Lstat(o.out); err == nil {
		return nil, nil, fmt.Errorf("export: %s already exists; export never replaces a file: remove it or choose another --out", o.out)
	}
	f, err := os.CreateTemp(filepath.Dir(o.out), "."+filepath.Base(o.out)+".partial-*")
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	done := false
	return f, func(ok bool) error {
		if done {
			return nil
		}
		done = true
		defer os.Remove(f.Name())
		cerr := f.Close()
		if !ok {
			return nil
		}
		if cerr != nil {
			return fmt.Errorf("export: writing %s: %w", o.out, cerr)
		}
		if err := os.Chmod(f.Name(), 0o644); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := os.Link(f.Name(), o.out); err != nil { // fails if o.out appeared meanwhile
			return fmt.Errorf("export: moving the output into place: %w", err)
		}
		return nil
	}, nil
}

// provenance says whether table is a release, i.e. a ledger row names it as
// the table its release wrote (a charge's "into" whose release was not
// refused, or a job outcome "released"), and whether the owner protected it
// (dp_policy, the policies' table for SQL readers). A file without a ledger or
// policies has neither. This guards against exporting raw rows by mistake; it
// is no security boundary: whoever runs export holds the file.
func provenance(ctx context.Context, tx *sql.Tx, table string) (release, protected bool) {
	_ = tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM dp_ledger WHERE json_valid(params)
		AND json_extract(params, '$.into') = ? COLLATE NOCASE
		AND json_extract(params, '$.release_refused') IS NULL
		AND coalesce(json_extract(params, '$.status'), 'released') = 'released')`, table).Scan(&release)
	_ = tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM dp_policy WHERE tbl = ? COLLATE NOCASE)`, table).Scan(&protected)
	return release, protected
}

// describeTable finds table (case-insensitively, as SQLite does) and its
// columns, and picks the row order: rowid, or the primary key of a WITHOUT
// ROWID table.
func describeTable(ctx context.Context, tx *sql.Tx, dbPath, table string) (*exportTable, error) {
	t := &exportTable{}
	err := tx.QueryRowContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE`, table).Scan(&t.name)
	if errors.Is(err, sql.ErrNoRows) {
		var names []string
		rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'dp\_%' ESCAPE '\' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
		if err == nil {
			for rows.Next() {
				var n string
				if rows.Scan(&n) == nil {
					names = append(names, n)
				}
			}
			rows.Close()
		}
		return nil, fmt.Errorf("export: %s has no table %q (its tables: %s)", dbPath, table, strings.Join(names, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if strings.HasPrefix(strings.ToLower(t.name), "sqlite_") {
		return nil, fmt.Errorf("export: %s is SQLite's own table, not a release", t.name)
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, pk FROM pragma_table_info(?) ORDER BY cid`, t.name)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer rows.Close()
	type pkCol struct {
		name string
		pk   int
	}
	var pks []pkCol
	for rows.Next() {
		var name string
		var pk int
		if err := rows.Scan(&name, &pk); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		t.cols = append(t.cols, &exportColumn{name: name})
		if pk > 0 {
			pks = append(pks, pkCol{name, pk})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	t.orderBy = "rowid"
	if _, err := tx.ExecContext(ctx, `SELECT rowid FROM `+quoteIdent(t.name)+` LIMIT 0`); err != nil {
		slices.SortFunc(pks, func(a, b pkCol) int { return a.pk - b.pk })
		var keys []string
		for _, p := range pks {
			keys = append(keys, quoteIdent(p.name))
		}
		t.orderBy = strings.Join(keys, ", ")
	}
	return t, nil
}

func (t *exportTable) names() []string {
	var out []string
	for _, c := range t.cols {
		out = append(out, c.name)
	}
	return out
}

// query selects cols in the export's order. likely(x) is x unchanged without
// the column's declared type, so that go-sqlite3 hands over the stored value
// (it would turn a DATETIME column's text into a time.Time, a BOOLEAN's
// integer into a bool).
func (t *exportTable) query(cols []*exportColumn) string {
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "likely(" + quoteIdent(c.name) + ")"
	}
	return "SELECT " + strings.Join(sel, ", ") + " FROM " + quoteIdent(t.name) + " ORDER BY " + t.orderBy
}

// each runs f on every row of cols, in order, with its 1-based number.
func (t *exportTable) each(ctx context.Context, tx *sql.Tx, cols []*exportColumn, f func(row int, vals []any) error) error {
	rows, err := tx.QueryContext(ctx, t.query(cols))
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for n := 1; rows.Next(); n++ {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := f(n, vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scan is the first pass: it counts the rows and learns each column's kind.
func (t *exportTable) scan(ctx context.Context, tx *sql.Tx) error {
	err := t.each(ctx, tx, t.cols, func(row int, vals []any) error {
		t.rows = row
		for i, v := range vals {
			c := t.cols[i]
			switch v := v.(type) {
			case nil:
				c.nulls++
				if c.firstNull == 0 {
					c.firstNull = row
				}
			case int64:
				c.ints++
			case float64:
				c.reals++
				if (math.IsNaN(v) || math.IsInf(v, 0)) && c.firstNonFinite == 0 {
					c.firstNonFinite = row
				}
			case string:
				c.texts++
				c.maxRunes = max(c.maxRunes, utf8.RuneCountInString(v))
			case []byte:
				c.blobs++
				if c.badBlob == nil {
					d, err := vector.Dim(v)
					switch {
					case err != nil:
						c.badBlob = fmt.Errorf("row %d holds a BLOB of %d bytes, not a float32 vector (a multiple of 4 bytes)", row, len(v))
					case c.dim == 0:
						c.dim = d
					case d != c.dim:
						c.badBlob = fmt.Errorf("row %d holds a vector of %d dimensions, earlier rows have %d", row, d, c.dim)
					}
				}
				if c.badBlob == nil && c.firstNonFinite == 0 && vector.FirstNonFinite(v) >= 0 {
					c.firstNonFinite = row
				}
			default:
				return fmt.Errorf("column %s, row %d: unexpected value of type %T", c.name, row, v)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("export: reading %s: %w", t.name, err)
	}
	for _, c := range t.cols {
		switch {
		case c.blobs > 0:
			c.kind = colVector
		case c.texts > 0 && c.ints+c.reals > 0:
			c.kind = colMixed
		case c.texts > 0:
			c.kind = colText
		case c.reals > 0:
			c.kind = colReal
		case c.ints > 0:
			c.kind = colInt
		default:
			c.kind = colNull
		}
	}
	return nil
}

// check refuses what format cannot write faithfully.
func (t *exportTable) check(format string, cols []*exportColumn) error {
	for _, c := range cols {
		switch {
		case c.blobs > 0 && c.badBlob != nil:
			return fmt.Errorf("export: column %s of %s: %w; export writes BLOBs only as float32 vectors of one dimension", c.name, t.name, c.badBlob)
		case c.blobs > 0 && c.ints+c.reals+c.texts > 0:
			return fmt.Errorf("export: column %s of %s mixes BLOB vectors with other values; export writes a BLOB column only when every value is a vector (or NULL)", c.name, t.name)
		case format == ExportJSON && c.firstNonFinite > 0:
			return fmt.Errorf("export: column %s of %s holds NaN or an infinity (row %d), which JSON cannot represent; use --format csv or npy", c.name, t.name, c.firstNonFinite)
		}
		if format != ExportNPY {
			continue
		}
		switch {
		case c.nulls > 0 && c.kind != colNull:
			return fmt.Errorf("export: column %s of %s holds NULL (row %d), which a NumPy array cannot; use --format csv or json, or --column for the other columns", c.name, t.name, c.firstNull)
		case c.kind == colNull && t.rows > 0:
			return fmt.Errorf("export: column %s of %s holds only NULL, which a NumPy array cannot; use --format csv or json, or --column for the other columns", c.name, t.name)
		case c.kind == colMixed:
			return fmt.Errorf("export: column %s of %s mixes TEXT and numbers, which a NumPy array cannot; use --format csv or json, or --column for the other columns", c.name, t.name)
		}
	}
	if format == ExportCSV {
		seen := map[string]bool{}
		for _, h := range t.csvHeader() {
			if seen[h] {
				return fmt.Errorf("export: the CSV header would hold %q twice (a vector column's coordinates are named COLUMN_0, COLUMN_1, ...); use --format json or npy", h)
			}
			seen[h] = true
		}
	}
	return nil
}

func (t *exportTable) csvHeader() []string {
	var h []string
	for _, c := range t.cols {
		if c.kind != colVector {
			h = append(h, c.name)
			continue
		}
		for j := range c.dim {
			h = append(h, c.name+"_"+strconv.Itoa(j))
		}
	}
	return h
}

func (t *exportTable) writeCSV(ctx context.Context, tx *sql.Tx, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.csvHeader()); err != nil {
		return err
	}
	var rec []string
	var vec []float32
	err := t.each(ctx, tx, t.cols, func(_ int, vals []any) error {
		rec = rec[:0]
		for i, v := range vals {
			c := t.cols[i]
			switch v := v.(type) {
			case nil:
				n := 1
				if c.kind == colVector {
					n = c.dim
				}
				for range n {
					rec = append(rec, "")
				}
			case int64:
				rec = append(rec, strconv.FormatInt(v, 10))
			case float64:
				rec = append(rec, strconv.FormatFloat(v, 'g', -1, 64))
			case string:
				rec = append(rec, v)
			case []byte:
				vec = vector.AppendElements(vec[:0], v)
				for _, x := range vec {
					rec = append(rec, strconv.FormatFloat(float64(x), 'g', -1, 32))
				}
			}
		}
		return cw.Write(rec)
	})
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(dst []byte, s string) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return append(dst, strings.TrimSuffix(b.String(), "\n")...)
}

func (t *exportTable) writeJSON(ctx context.Context, tx *sql.Tx, w io.Writer) error {
	keys := make([][]byte, len(t.cols))
	for i, c := range t.cols {
		keys[i] = append(jsonString(nil, c.name), ':')
	}
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	var b []byte
	var vec []float32
	err := t.each(ctx, tx, t.cols, func(row int, vals []any) error {
		b = b[:0]
		if row > 1 {
			b = append(b, ',')
		}
		b = append(b, "\n{"...)
		for i, v := range vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, keys[i]...)
			switch v := v.(type) {
			case nil:
				b = append(b, "null"...)
			case int64:
				b = strconv.AppendInt(b, v, 10)
			case float64:
				b = strconv.AppendFloat(b, v, 'g', -1, 64)
			case string:
				b = jsonString(b, v)
			case []byte:
				vec = vector.AppendElements(vec[:0], v)
				b = append(b, '[')
				for j, x := range vec {
					if j > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
				}
				b = append(b, ']')
			}
		}
		b = append(b, '}')
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n]\n")
	return err
}

// npyLayout returns a column's NumPy dtype and shape.
func (t *exportTable) npyLayout(c *exportColumn) (string, []int) {
	switch c.kind {
	case colVector:
		return "<f4", []int{t.rows, c.dim}
	case colInt:
		return "<i8", []int{t.rows}
	case colText:
		return "<U" + strconv.Itoa(max(c.maxRunes, 1)), []int{t.rows}
	default: // colReal, or an empty table's column
		return "<f8", []int{t.rows}
	}
}

// writeNPY writes column c as one .npy array.
func (t *exportTable) writeNPY(ctx context.Context, tx *sql.Tx, w io.Writer, c *exportColumn) error {
	descr, shape := t.npyLayout(c)
	if _, err := w.Write(npy.Header(descr, shape)); err != nil {
		return err
	}
	width := max(c.maxRunes, 1)
	var b []byte
	return t.each(ctx, tx, []*exportColumn{c}, func(_ int, vals []any) error {
		b = b[:0]
		switch v := vals[0].(type) {
		case []byte:
			b = append(b, v...) // already little-endian float32
		case int64:
			if c.kind == colInt {
				b = binary.LittleEndian.AppendUint64(b, uint64(v))
			} else {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
			}
		case float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		case string: // UTF-32LE, padded with zeros to the column's width
			n := 0
			for _, r := range v {
				b = binary.LittleEndian.AppendUint32(b, uint32(r))
				n++
			}
			for ; n < width; n++ {
				b = binary.LittleEndian.AppendUint32(b, 0)
			}
		}
		_, err := w.Write(b)
		return err
	})
}

// writeNPZ writes every column as COLUMN.npy in an uncompressed zip, the
// layout of numpy.savez.
func (t *exportTable) writeNPZ(ctx context.Context, tx *sql.Tx, w io.Writer) error {
	for _, c := range t.cols {
		// An entry named like a path out of the archive's directory
		// ("../x", "/x", "..\\x") would be written there by a careless
		// unzip; a column's name is whatever the file's owner chose.
		if !fs.ValidPath(c.name+".npy") || strings.ContainsAny(c.name, `\:`) {
			return fmt.Errorf("export: column %q of %s cannot name an entry of an .npz (it reads as a path leading out of the archive's directory, or holds \\ or :); export it with --format csv or json, or rename it", c.name, t.name)
		}
	}
	zw := zip.NewWriter(w)
	for _, c := range t.cols {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: c.name + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if err := t.writeNPY(ctx, tx, f, c); err != nil {
			return err
		}
	}
	return zw.Close()
}
