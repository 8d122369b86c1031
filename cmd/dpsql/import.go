package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/csvrows"
	"github.com/dpsql/dpsql/internal/idx"
	"github.com/dpsql/dpsql/npy"
	"github.com/dpsql/dpsql/sqlfuncs"
	"github.com/spf13/cobra"
)

func (m *Main) newImportCmd() *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import DB TABLE FILE",
		Short: "Import vectors from CSV, NumPy .npy or IDX (MNIST) files",
		Long: `Create TABLE(id INTEGER PRIMARY KEY, features BLOB, label INTEGER) in DB and fill
it from FILE, one row per record: features as a little-endian float32 vector
BLOB (the layout DP functions and sqlite-vec read), label an integer or NULL.

  csv  numeric columns are the features; the label column (--label-column, or a
       column named "label") holds integers; a non-numeric first row is a header.
       Fields are separated by commas, or by --delimiter (e.g. ';' or tab).
  npy  float32, float64 or integer arrays; the first axis is the rows, the
       others are flattened in C order. --labels reads labels from a 1-D .npy.
  idx  MNIST-style unsigned-byte files (magic 0x00000803); --labels reads the
       labels file (magic 0x00000801).

Unsigned-byte data (idx, npy uint8) are scaled to [0, 1] unless --scale is
given. Files may be gzip-compressed. The format is detected from the content
unless --format is given. TABLE must be a new plain name (letters, digits and
_, not starting with a digit, dp_ or sqlite_), the rule release tables follow;
the import is one transaction.`,
		Example: `  dpsql import mnist.db train train-images-idx3-ubyte.gz --labels train-labels-idx1-ubyte.gz
  dpsql import data.db points points.csv --label-column class
  dpsql import data.db emb embeddings.npy --labels classes.npy`,
		Args: nargs("DB", "TABLE", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db, o.table, o.file = args[0], args[1], args[2]
			o.scaleSet = cmd.Flags().Changed("scale")
			if !o.scaleSet {
				o.scale = 1
			}
			start := time.Now()
			stopWatch := watchLock(cmd.Context(), m.Stderr, o.db, true)
			res, err := importFile(cmd.Context(), o)
			stopWatch()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "imported %d rows of dimension %d into %s (%s, %s)\n", res.rows, res.dim, o.table, res.format, time.Since(start).Round(time.Millisecond))
			if res.labelFrom != "" {
				fmt.Fprintf(w, "labels from %s: %d distinct values\n", res.labelFrom, res.distinct)
			} else {
				fmt.Fprintln(w, "no labels (label is NULL)")
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.format, "format", "", "input format: csv, npy or idx (default: detected)")
	fs.StringVar(&o.labelColumn, "label-column", "", `csv: the label column (name, or 0-based number without a header; "none" for no labels)`)
	fs.StringVar(&o.labels, "labels", "", "npy, idx: file of labels, one per row")
	fs.Float64Var(&o.scale, "scale", 0, "multiply every value by this (default: 1/255 for unsigned bytes, else 1)")
	fs.StringVar(&o.delimiter, "delimiter", ",", `csv: the field delimiter, one character or "tab"`)
	return cmd
}

type importOptions struct {
	db, table, file string
	format          string
	labelColumn     string
	labels          string
	scale           float64
	scaleSet        bool
	delimiter       string
}

type importResult struct {
	rows, dim int
	format    string
	labelFrom string
	distinct  int
}

// input is an opened, possibly gunzipped, file.
type input struct {
	r     *bufio.Reader
	size  int64 // bytes of (uncompressed) content, -1 if unknown
	close func() error
}

func openInput(path string) (*input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory", path)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	in := &input{r: br, size: st.Size(), close: f.Close}
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		in.r, in.size = bufio.NewReaderSize(zr, 1<<20), -1
	}
	return in, nil
}

// sniffFormat guesses the format from the first bytes.
func sniffFormat(r *bufio.Reader) string {
	b, _ := r.Peek(8)
	switch {
	case bytes.HasPrefix(b, []byte(npy.Magic)):
		return "npy"
	case len(b) >= 4 && b[0] == 0 && b[1] == 0 && b[2] >= 0x08 && b[2] <= 0x0e:
		return "idx"
	}
	return "csv"
}

// rowSource is a decoded input: Next fills vec and returns the row's label.
type rowSource struct {
	dim      int
	next     func(vec []float32) (label int64, hasLabel bool, err error)
	labelled string // where labels come from, "" for none
}

func importFile(ctx context.Context, o importOptions) (importResult, error) {
	var res importResult
	if err := sqlfuncs.CheckTableName(o.table); err != nil {
		return res, usagef("import: %v", err)
	}
	if o.scaleSet && (math.IsNaN(o.scale) || math.IsInf(o.scale, 0) || o.scale == 0) {
		return res, usagef("import: --scale must be a finite number other than 0, got %v", o.scale)
	}
	comma, err := csvrows.ParseDelimiter(o.delimiter)
	if err != nil {
		return res, usagef("import: %v", err)
	}
	in, err := openInput(o.file)
	if err != nil {
		return res, fmt.Errorf("import: %w", err)
	}
	defer in.close()
	res.format = strings.ToLower(o.format)
	if res.format == "" {
		res.format = sniffFormat(in.r)
	}
	if res.format == "csv" && o.labels != "" {
		return res, usagef("import: --labels is for npy and idx files; a CSV file holds its labels in a column (--label-column)")
	}
	if res.format != "csv" && comma != ',' {
		return res, usagef("import: --delimiter is for CSV files; this one is %s", res.format)
	}
	if res.format != "csv" && o.labelColumn != "" {
		return res, usagef("import: --label-column is for CSV files; use --labels FILE for %s", res.format)
	}
	src, err := openSource(res.format, in, o, comma)
	if err != nil {
		return res, fmt.Errorf("import %s: %w", o.file, err)
	}
	res.dim, res.labelFrom = src.dim, src.labelled

	db, err := openDB(ctx, o.db, "", true)
	if err != nil {
		return res, err
	}
	defer db.Close()
	var exists int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE lower(name) = lower(?)`, o.table).Scan(&exists); err != nil {
		return res, err
	}
	if exists > 0 {
		return res, fmt.Errorf("import: %s already has a table (or index, view) named %s; import into a new table", o.db, o.table)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return res, err
	}
	defer tx.Rollback()
	q := quoteIdent(o.table)
	if _, err := tx.ExecContext(ctx, `CREATE TABLE `+q+` (id INTEGER PRIMARY KEY, features BLOB NOT NULL, label INTEGER)`); err != nil {
		return res, fmt.Errorf("import: creating %s: %w", o.table, err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO `+q+` (id, features, label) VALUES (?, ?, ?)`)
	if err != nil {
		return res, err
	}
	defer ins.Close()
	// Decoding runs in its own goroutine, ahead of the inserts, in batches
	// whose buffers are recycled.
	pctx, cancel := context.WithCancel(ctx)
	batches, free := make(chan *rowBatch, 4), make(chan *rowBatch, 4)
	defer func() { // stop the decoder and wait for it before the input closes
		cancel()
		for range batches {
		}
	}()
	for range cap(free) {
		free <- &rowBatch{blob: make([]byte, 0, importBatch*4*src.dim)}
	}
	go decodeBatches(pctx, src, batches, free)
	seen := map[int64]bool{}
	id := int64(0)
	for b := range batches {
		for i, lab := range b.labels {
			id++
			var lv any
			if b.hasLabel {
				lv = lab
				if len(seen) <= 1<<16 {
					seen[lab] = true
				}
			}
			blob := b.blob[i*4*src.dim : (i+1)*4*src.dim]
			if _, err := ins.ExecContext(ctx, id, blob, lv); err != nil {
				return res, fmt.Errorf("import: inserting row %d: %w", id, err)
			}
			res.rows++
		}
		if b.err != nil {
			return res, fmt.Errorf("import %s: %w", o.file, b.err)
		}
		free <- b
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.rows == 0 {
		return res, fmt.Errorf("import %s: no rows", o.file)
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("import: committing: %w", err)
	}
	res.distinct = len(seen)
	return res, nil
}

// importBatch is the number of rows decoded per batch.
const importBatch = 256

type rowBatch struct {
	blob     []byte  // the rows' float32 vectors, one after another
	labels   []int64 // one per row (0 when the source has no labels)
	hasLabel bool
	err      error // the error that ended decoding, after the rows before it
}

// decodeBatches decodes src into batches taken from free until the end of
// the input, an error (sent in the last batch) or cancellation.
func decodeBatches(ctx context.Context, src rowSource, out chan<- *rowBatch, free <-chan *rowBatch) {
	defer close(out)
	vec := make([]float32, src.dim)
	for {
		var b *rowBatch
		select {
		case b = <-free:
		case <-ctx.Done():
			return
		}
		b.blob, b.labels, b.err = b.blob[:0], b.labels[:0], nil
		end := false
		for len(b.labels) < importBatch {
			label, has, err := src.next(vec)
			if err != nil {
				if err != io.EOF {
					b.err = err
				}
				end = true
				break
			}
			b.blob = vector.AppendEncoded(b.blob, vec)
			b.labels = append(b.labels, label)
			b.hasLabel = has
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if end {
			return
		}
	}
}

func openSource(format string, in *input, o importOptions, comma rune) (rowSource, error) {
	var src rowSource
	scale := func(bytes bool) float64 {
		if o.scaleSet || !bytes {
			return o.scale
		}
		return 1.0 / 255
	}
	switch format {
	case "csv":
		c, err := csvrows.NewReader(in.r, o.labelColumn, comma)
		if err != nil {
			return src, err
		}
		s := o.scale
		src.dim, src.labelled = c.Dim(), c.LabelName()
		if src.labelled != "" {
			src.labelled = "column " + src.labelled
		}
		src.next = func(vec []float32) (int64, bool, error) {
			l, err := c.ReadRow(vec)
			if err == nil && s != 1 {
				for i := range vec {
					vec[i] *= float32(s)
				}
			}
			return l, c.Labelled(), err
		}
	case "npy":
		a, err := npy.NewReader(in.r, in.size)
		if err != nil {
			return src, err
		}
		return arraySource(a, scale(a.Bytes()), o.labels)
	case "idx":
		a, err := idx.NewReader(in.r, in.size)
		if err != nil {
			return src, err
		}
		if len(a.Dims()) < 2 {
			return src, errors.New("idx: this is a labels file (one dimension): give the images file, and this one with --labels")
		}
		return arraySource(a, scale(true), o.labels)
	default:
		return src, usagef("unknown input format %q: use csv, npy or idx", format)
	}
	if src.dim == 0 { // the npy and idx readers reject empty rows themselves
		return src, errors.New("rows have dimension 0")
	}
	return src, nil
}

// arrayReader is what the npy and idx readers share: the shape, read from
// the header, then the rows one at a time or the whole file as labels.
type arrayReader interface {
	Rows() int
	Dim() int
	// ReadRow reads the next row into dst (len Dim), each value times
	// scale; io.EOF after the last row.
	ReadRow(dst []float32, scale float64) error
	ReadLabels() ([]int64, error)
}

// arraySource reads the rows of a, each value times scale, with the labels of
// the file labelsPath ("" for none), which must hold one per row.
func arraySource(a arrayReader, scale float64, labelsPath string) (rowSource, error) {
	labels, err := readLabels(labelsPath, a.Rows())
	if err != nil {
		return rowSource{}, err
	}
	src := rowSource{dim: a.Dim()}
	if labels != nil {
		src.labelled = filepath.Base(labelsPath)
	}
	row := 0
	src.next = func(vec []float32) (int64, bool, error) {
		if err := a.ReadRow(vec, scale); err != nil {
			return 0, false, err
		}
		row++
		if labels == nil {
			return 0, false, nil
		}
		return labels[row-1], true, nil
	}
	return src, nil
}

// readLabels reads a labels file (npy or idx, detected) holding n labels; ""
// means no labels.
func readLabels(path string, n int) ([]int64, error) {
	if path == "" {
		return nil, nil
	}
	in, err := openInput(path)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	defer in.close()
	var a arrayReader
	switch sniffFormat(in.r) {
	case "npy":
		a, err = npy.NewReader(in.r, in.size)
	case "idx":
		a, err = idx.NewReader(in.r, in.size)
	default:
		return nil, fmt.Errorf("labels %s: not an .npy or IDX file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("labels %s: %w", path, err)
	}
	labels, err := a.ReadLabels()
	if err != nil {
		return nil, fmt.Errorf("labels %s: %w", path, err)
	}
	if len(labels) != n {
		return nil, fmt.Errorf("labels %s: %d labels for %d rows", path, len(labels), n)
	}
	return labels, nil
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
