package pipeline

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/mattn/go-sqlite3" // the sqlite source reads with the plain driver

	"github.com/dpsql/dpsql/csvrows"
	"github.com/dpsql/dpsql/npy"
)

// Input formats.
const (
	NPY    = "npy"    // feature shards (.npy, one row per first-axis index) with label shards beside them
	CSV    = "csv"    // numeric CSV shards, one integer label column
	SQLite = "sqlite" // a table of a SQLite file: a float32 BLOB column and a label column (for tests)
)

// blockRows is the number of rows a reader emits per element.
const blockRows = 512

// Source says where the rows are. Only public facts go in it: paths,
// formats, column names, the number of classes.
type Source struct {
	Format string
	// Files are the feature shards (npy) or the CSV shards.
	Files []string
	// Labels are the label shards for npy, one per feature shard: integer
	// class ids of shape (n,) or (n, 1), or label vectors of shape (n, K).
	Labels []string
	// LabelColumn names the CSV label column ("" = a column named "label").
	LabelColumn string
	// DB, Table, FeatureColumn and LabelColumn locate a SQLite table:
	// features as float32 BLOBs, labels as INTEGER class ids or float32 BLOBs.
	DB, Table, FeatureColumn, TableLabelColumn string
	// Parts splits a SQLite table into that many shards by rowid.
	Parts int
	// Scale multiplies every feature value; 0 means 1, or 1/255 for uint8
	// npy features (as dpsql import does).
	Scale float64
	// Classes is the public number of classes K for integer labels; 0 when
	// the labels are vectors.
	Classes int
}

// Shard is one unit of input, read by one worker.
type Shard struct {
	Source Source
	Index  int // position in Files, or the rowid class for SQLite
}

// Shards lists the shards of s.
func (s Source) Shards() []Shard {
	n := len(s.Files)
	if s.Format == SQLite {
		n = max(s.Parts, 1)
	}
	out := make([]Shard, n)
	for i := range out {
		out[i] = Shard{Source: s, Index: i}
	}
	return out
}

// Rows is a block of rows: N feature rows of D values and N label rows of K
// values, row-major.
type Rows struct {
	X []float32
	Y []float32
	N int
}

// rowReader yields one row at a time: features into x, and the label, either
// a class id or (when vec) a vector written into y.
type rowReader interface {
	next(x, y []float32) error // io.EOF after the last row
	close() error
}

// Check validates the source before anything is charged, reading only
// headers (npy) or the first row (CSV, SQLite), and returns the feature and
// label dimensions d and K. It never counts rows.
func (s Source) Check(ctx context.Context) (d, k int, err error) {
	switch s.Format {
	case NPY:
		if len(s.Files) == 0 {
			return 0, 0, errors.New("no feature files: give at least one .npy shard")
		}
		if len(s.Labels) != len(s.Files) {
			return 0, 0, fmt.Errorf("%d feature shards but %d label shards: give one label file per feature file", len(s.Files), len(s.Labels))
		}
		var bytes0 bool
		for i := range s.Files {
			di, ki, bytes, err := s.checkNPYShard(ctx, i)
			if err != nil {
				return 0, 0, err
			}
			if i == 0 {
				d, k, bytes0 = di, ki, bytes
			} else if di != d || ki != k {
				return 0, 0, fmt.Errorf("shard %s has %d features and %d labels per row, shard %s has %d and %d", s.Files[i], di, ki, s.Files[0], d, k)
			} else if bytes != bytes0 && s.Scale == 0 {
				return 0, 0, fmt.Errorf("shards %s and %s differ in type (uint8 or not), so their default scales differ: give the shards one dtype, or a scale", s.Files[0], s.Files[i])
			}
		}
	case CSV, SQLite:
		if s.Format == CSV && len(s.Files) == 0 {
			return 0, 0, errors.New("no CSV files: give at least one shard")
		}
		if s.Format == SQLite && (s.DB == "" || s.Table == "") {
			return 0, 0, errors.New("the sqlite source needs a database file and a table")
		}
		if len(s.Labels) != 0 {
			return 0, 0, fmt.Errorf("label files are for npy shards; %s shards hold their labels in a column", s.Format)
		}
		for i := range len(s.Shards()) {
			r, dim, kk, err := s.open(ctx, i)
			if err != nil {
				return 0, 0, err
			}
			r.close()
			if i == 0 {
				d, k = dim, kk
			} else if dim != d || kk != k {
				return 0, 0, fmt.Errorf("shard %s has %d features and %d labels per row, shard %s has %d and %d", s.Files[i], dim, kk, s.Files[0], d, k)
			}
			if s.Format == SQLite {
				break // one table: its first row gives the dimensions
			}
		}
	default:
		return 0, 0, fmt.Errorf("unknown input format %q (want %s, %s or %s)", s.Format, NPY, CSV, SQLite)
	}
	if s.Classes < 0 {
		return 0, 0, fmt.Errorf("classes must be >= 1, got %d", s.Classes)
	}
	if !(s.Scale >= 0) || math.IsInf(s.Scale, 0) {
		return 0, 0, fmt.Errorf("scale must be positive and finite, got %v", s.Scale)
	}
	return d, k, nil
}

// checkNPYShard reads the headers of shard i's two files: the dimensions,
// and whether the features are uint8.
func (s Source) checkNPYShard(ctx context.Context, i int) (d, k int, bytes bool, err error) {
	fr, err := openNPY(ctx, s.Files[i])
	if err != nil {
		return 0, 0, false, err
	}
	defer fr.close()
	lr, err := openNPY(ctx, s.Labels[i])
	if err != nil {
		return 0, 0, false, err
	}
	defer lr.close()
	if fr.a.Rows() != lr.a.Rows() {
		return 0, 0, false, fmt.Errorf("%s and %s have different numbers of rows: give each feature shard its own labels", s.Files[i], s.Labels[i])
	}
	k, err = s.labelWidth(lr.a.Dim() > 1, lr.a.Dim(), s.Labels[i])
	return fr.a.Dim(), k, fr.a.Bytes(), err
}

// labelWidth returns K for labels that are vectors of width w (vec) or
// integer class ids, checking the classes option against them.
func (s Source) labelWidth(vec bool, w int, where string) (int, error) {
	switch {
	case vec && s.Classes != 0:
		return 0, fmt.Errorf("%s holds label vectors of length %d: the classes option applies to integer labels only", where, w)
	case vec:
		return w, nil
	case s.Classes == 0:
		return 0, fmt.Errorf("%s holds integer labels: give the public number of classes K (labels lie in 0..K-1); taking it from the largest label present would reveal that label's row", where)
	}
	return s.Classes, nil
}

// npyFile is an open .npy file.
type npyFile struct {
	a *npy.Reader
	c io.Closer
}

func (f npyFile) close() error { return f.c.Close() }

func openNPY(ctx context.Context, path string) (npyFile, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return npyFile{}, fmt.Errorf("%s: %w", path, err)
	}
	defer fs.Close()
	size, err := fs.Size(ctx, path)
	if err != nil {
		return npyFile{}, fmt.Errorf("%s: %w", path, err)
	}
	rc, err := fs.OpenRead(ctx, path)
	if err != nil {
		return npyFile{}, fmt.Errorf("%s: %w", path, err)
	}
	a, err := npy.NewReader(bufio.NewReaderSize(rc, 1<<20), size)
	if err != nil {
		rc.Close()
		return npyFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return npyFile{a: a, c: rc}, nil
}

// npyRows reads a feature shard and its labels together.
type npyRows struct {
	f, l   npyFile
	scale  float64
	vec    bool
	k      int
	lab    []float32
	labels string
}

func (r *npyRows) next(x, y []float32) error {
	if err := r.f.a.ReadRow(x, r.scale); err != nil {
		return err
	}
	if err := r.l.a.ReadRow(r.lab, 1); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%s: fewer labels than rows", r.labels)
		}
		return fmt.Errorf("%s: %w", r.labels, err)
	}
	if r.vec {
		copy(y, r.lab)
		return nil
	}
	return oneHot(y, float64(r.lab[0]), r.k, r.labels)
}

func (r *npyRows) close() error { return errors.Join(r.f.close(), r.l.close()) }

// oneHot writes class c as a one-hot row of K values.
func oneHot(y []float32, c float64, k int, where string) error {
	if c != math.Trunc(c) || c < 0 || c >= float64(k) {
		return fmt.Errorf("%s: label %v is not a class id in 0..%d (classes = %d)", where, c, k-1, k)
	}
	clear(y)
	y[int(c)] = 1
	return nil
}

// csvRows reads one CSV shard.
type csvRows struct {
	r     *csvrows.Reader
	c     io.Closer
	scale float64
	k     int
	path  string
}

func (r *csvRows) next(x, y []float32) error {
	l, err := r.r.ReadRow(x)
	if err != nil {
		if err == io.EOF {
			return err
		}
		return fmt.Errorf("%s: %w", r.path, err)
	}
	if r.scale != 1 {
		for i := range x {
			x[i] *= float32(r.scale)
		}
	}
	return oneHot(y, float64(l), r.k, r.path)
}

func (r *csvRows) close() error { return r.c.Close() }

// sqliteRows reads the rows of a table whose rowid is Index modulo Parts.
type sqliteRows struct {
	db    *sql.DB
	rows  *sql.Rows
	d, k  int
	vec   bool
	scale float64
	where string
}

func (r *sqliteRows) next(x, y []float32) error {
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return fmt.Errorf("%s: %w", r.where, err)
		}
		return io.EOF
	}
	var fb []byte
	var lab any
	if err := r.rows.Scan(&fb, &lab); err != nil {
		return fmt.Errorf("%s: %w", r.where, err)
	}
	if err := decodeVector(x, fb, r.where, "features"); err != nil {
		return err
	}
	if r.scale != 1 {
		for i := range x {
			x[i] *= float32(r.scale)
		}
	}
	switch v := lab.(type) {
	case int64:
		if r.vec {
			return fmt.Errorf("%s: an INTEGER label among vector labels", r.where)
		}
		return oneHot(y, float64(v), r.k, r.where)
	case []byte:
		if !r.vec {
			return fmt.Errorf("%s: a BLOB label among INTEGER labels", r.where)
		}
		return decodeVector(y, v, r.where, "label")
	}
	return fmt.Errorf("%s: labels must be INTEGER class ids or float32 BLOBs, got %T", r.where, lab)
}

func (r *sqliteRows) close() error { return errors.Join(r.rows.Close(), r.db.Close()) }

// decodeVector decodes a little-endian float32 BLOB of exactly len(dst)
// finite values.
func decodeVector(dst []float32, b []byte, where, what string) error {
	if len(b) != 4*len(dst) {
		return fmt.Errorf("%s: a %s BLOB of %d bytes; every row must hold %d float32 values (%d bytes)", where, what, len(b), len(dst), 4*len(dst))
	}
	for i := range dst {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%s: a %s value is %v; vectors must be finite", where, what, v)
		}
		dst[i] = v
	}
	return nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// open opens shard i and returns its reader with the row's dimensions.
func (s Source) open(ctx context.Context, i int) (rowReader, int, int, error) {
	scale := s.Scale
	if scale == 0 {
		scale = 1
	}
	switch s.Format {
	case NPY:
		f, err := openNPY(ctx, s.Files[i])
		if err != nil {
			return nil, 0, 0, err
		}
		l, err := openNPY(ctx, s.Labels[i])
		if err != nil {
			f.close()
			return nil, 0, 0, err
		}
		vec := l.a.Dim() > 1
		k, err := s.labelWidth(vec, l.a.Dim(), s.Labels[i])
		if err != nil {
			f.close()
			l.close()
			return nil, 0, 0, err
		}
		if s.Scale == 0 && f.a.Bytes() {
			scale = 1.0 / 255
		}
		return &npyRows{f: f, l: l, scale: scale, vec: vec, k: k, lab: make([]float32, l.a.Dim()), labels: s.Labels[i]}, f.a.Dim(), k, nil
	case CSV:
		path := s.Files[i]
		fs, err := filesystem.New(ctx, path)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		defer fs.Close()
		rc, err := fs.OpenRead(ctx, path)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		c, err := csvrows.NewReader(bufio.NewReaderSize(rc, 1<<20), s.LabelColumn, ',')
		if err != nil {
			rc.Close()
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		if !c.Labelled() {
			rc.Close()
			return nil, 0, 0, fmt.Errorf("%s: no label column (name it with the label column option, or call it \"label\")", path)
		}
		k, err := s.labelWidth(false, 1, path)
		if err != nil {
			rc.Close()
			return nil, 0, 0, err
		}
		return &csvRows{r: c, c: rc, scale: scale, k: k, path: path}, c.Dim(), k, nil
	case SQLite:
		return s.openSQLite(ctx, i, scale)
	}
	return nil, 0, 0, fmt.Errorf("unknown input format %q", s.Format)
}

// openSQLite opens part i of the table read-only. The dimensions come from
// the first row of the table (its schema, in effect).
func (s Source) openSQLite(ctx context.Context, i int, scale float64) (rowReader, int, int, error) {
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: s.DB}).EscapedPath()+"?mode=ro&_busy_timeout=30000")
	if err != nil {
		return nil, 0, 0, err
	}
	fc, lc := s.FeatureColumn, s.TableLabelColumn
	if fc == "" {
		fc = "features"
	}
	if lc == "" {
		lc = "label"
	}
	from := fmt.Sprintf("SELECT %s, %s FROM %s", quoteIdent(fc), quoteIdent(lc), quoteIdent(s.Table))
	where := fmt.Sprintf("%s, table %s", s.DB, s.Table)
	var fb []byte
	var lab any
	if err := db.QueryRowContext(ctx, from+" LIMIT 1").Scan(&fb, &lab); err != nil {
		db.Close()
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, 0, fmt.Errorf("%s: the table is empty", where)
		}
		return nil, 0, 0, fmt.Errorf("%s: %w", where, err)
	}
	if len(fb) == 0 || len(fb)%4 != 0 {
		db.Close()
		return nil, 0, 0, fmt.Errorf("%s: features must be non-empty float32 BLOBs, a row holds %d bytes", where, len(fb))
	}
	r := &sqliteRows{db: db, d: len(fb) / 4, scale: scale, where: where}
	switch v := lab.(type) {
	case int64:
	case []byte:
		r.vec = true
		if len(v) == 0 || len(v)%4 != 0 {
			db.Close()
			return nil, 0, 0, fmt.Errorf("%s: label vectors must be non-empty float32 BLOBs, a row holds %d bytes", where, len(v))
		}
		r.k = len(v) / 4
	default:
		db.Close()
		return nil, 0, 0, fmt.Errorf("%s: labels must be INTEGER class ids or float32 BLOBs, got %T", where, lab)
	}
	if r.k, err = s.labelWidth(r.vec, r.k, where); err != nil {
		db.Close()
		return nil, 0, 0, err
	}
	parts := max(s.Parts, 1)
	r.rows, err = db.QueryContext(ctx, from+" WHERE (rowid % ?) = ?", parts, i)
	if err != nil {
		db.Close()
		return nil, 0, 0, fmt.Errorf("%s: %w", where, err)
	}
	return r, r.d, r.k, nil
}

// readFn reads a shard and emits its rows in blocks. It checks every row's
// dimensions against the plan's D and K.
type readFn struct {
	D, K int
}

func (f *readFn) ProcessElement(ctx context.Context, sh Shard, emit func(Rows)) error {
	r, d, k, err := sh.Source.open(ctx, sh.Index)
	if err != nil {
		return err
	}
	defer r.close()
	if d != f.D || k != f.K {
		return fmt.Errorf("shard %d has %d features and %d labels per row, the plan %d and %d", sh.Index, d, k, f.D, f.K)
	}
	for {
		b := Rows{X: make([]float32, blockRows*d), Y: make([]float32, blockRows*k)}
		for b.N < blockRows {
			err := r.next(b.X[b.N*d:(b.N+1)*d], b.Y[b.N*k:(b.N+1)*k])
			if err == io.EOF {
				if b.N > 0 {
					b.X, b.Y = b.X[:b.N*d], b.Y[:b.N*k]
					emit(b)
				}
				return nil
			}
			if err != nil {
				return err
			}
			b.N++
		}
		emit(b)
	}
}

func init() {
	register.DoFn3x1[context.Context, Shard, func(Rows), error](&readFn{})
	register.Emitter1[Rows]()
}
