package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// Shard formats of an aggregate's rows (see [Shards]).
const (
	ShardCSV     = "csv"     // CSV with a header row naming the table's columns
	ShardParquet = "parquet" // Parquet files with flat columns named as the table's
)

// Shards are files holding the rows of a statement's FROM table, which the
// database file declares (and protects) but need not hold: each worker loads
// one shard at a time into an in-memory SQLite database that has the table
// exactly as the owner declared it (its CREATE TABLE statement) and the
// public key tables the policy names, and reads it with the statement's own
// per-row SQL (protect's RowSQL). A value is therefore typed by the column's
// affinity, checked by its constraints, filtered by WHERE, clamped and put
// in fixed point by the same SQL as in protected mode. No worker opens the
// database file.
//
// A CSV field is inserted as TEXT (an empty field as NULL); a Parquet value
// as its type (booleans as 0 or 1, integers as INTEGER, floats as REAL,
// strings as TEXT, other byte arrays as BLOB, nulls as NULL). A file column
// that is not a column of the table is refused; a table column that no file
// column names is NULL. A row that cannot be read, or that the table's
// constraints reject, fails the job.
type Shards struct {
	Format string
	Files  []string
	// Tables are made in each worker's in-memory database before any row
	// is read: the FROM table and the public key tables with their rows.
	Tables []MemTable
}

// MemTable is a table of a worker's in-memory database.
type MemTable struct {
	Name   string
	Create string // the CREATE TABLE statement
	// Columns and Rows: rows to insert (for public key tables), as
	// appendValues lists one after another.
	Columns []string
	Rows    []byte
}

// shardBatch is the number of rows loaded into the in-memory table before
// they are read back with the statement's SQL.
const shardBatch = 8192

// memDB is a worker's in-memory database with the shard's table.
type memDB struct {
	db    *sql.DB
	table string
	cols  map[string]string // lower-case name -> the schema's spelling
}

// openMemDB creates the tables of sh in a new in-memory database.
func openMemDB(ctx context.Context, sh Shards, table string) (*memDB, error) {
	// One connection: each connection to ":memory:" is a database of its own.
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	m := &memDB{db: db, table: table}
	for _, t := range sh.Tables {
		if _, err := db.ExecContext(ctx, t.Create); err != nil {
			db.Close()
			return nil, fmt.Errorf("creating table %s in a worker's memory: %w", t.Name, err)
		}
		if len(t.Rows) == 0 {
			continue
		}
		q := make([]string, len(t.Columns))
		marks := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			q[i], marks[i] = dpselect.QuoteIdent(c), "?"
		}
		ins := "INSERT INTO main." + dpselect.QuoteIdent(t.Name) + " (" + strings.Join(q, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
		for b := t.Rows; len(b) > 0; {
			vs, rest, err := readValues(b)
			if err != nil || len(vs) != len(t.Columns) {
				db.Close()
				return nil, fmt.Errorf("the rows of table %s: %w", t.Name, errValues)
			}
			if _, err := db.ExecContext(ctx, ins, vs...); err != nil {
				db.Close()
				return nil, fmt.Errorf("filling table %s in a worker's memory: %w", t.Name, err)
			}
			b = rest
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		db.Close()
		return nil, err
	}
	defer rows.Close()
	m.cols = map[string]string{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			db.Close()
			return nil, err
		}
		m.cols[strings.ToLower(c)] = c
	}
	if len(m.cols) == 0 {
		db.Close()
		return nil, fmt.Errorf("the shards' table %s has no columns", table)
	}
	return m, rows.Err()
}

// columns maps a file's column names onto the table's columns.
func (m *memDB) columns(names []string, where string) ([]string, error) {
	seen := map[string]bool{}
	out := make([]string, len(names))
	for i, n := range names {
		c, ok := m.cols[strings.ToLower(strings.TrimSpace(n))]
		if !ok {
			return nil, fmt.Errorf("%s: column %q is not a column of table %s (its columns: %s)", where, n, m.table, m.list())
		}
		if seen[c] {
			return nil, fmt.Errorf("%s: column %q appears twice", where, n)
		}
		seen[c], out[i] = true, c
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no columns", where)
	}
	return out, nil
}

func (m *memDB) list() string {
	var s []string
	for _, c := range m.cols {
		s = append(s, c)
	}
	return strings.Join(s, ", ")
}

// rowSource yields a shard's rows as SQL values in the order of its columns.
type rowSource interface {
	columns() []string
	next(dst []any) error // io.EOF after the last row
	close() error
}

// openShard opens a shard file and reads its header or schema.
func openShard(ctx context.Context, format, path string) (rowSource, error) {
	switch format {
	case ShardCSV:
		return openCSVShard(ctx, path)
	case ShardParquet:
		return openParquetShard(ctx, path)
	}
	return nil, fmt.Errorf("unknown shard format %q (want %s or %s)", format, ShardCSV, ShardParquet)
}

type csvShard struct {
	r    *csv.Reader
	c    io.Closer
	cols []string
	path string
}

func openCSVShard(ctx context.Context, path string) (*csvShard, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer fs.Close()
	rc, err := fs.OpenRead(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r := csv.NewReader(bufio.NewReaderSize(rc, 1<<20))
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		rc.Close()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: empty file: the first line must name the columns", path)
		}
		return nil, fmt.Errorf("%s: the header row: %w", path, err)
	}
	cols := append([]string(nil), head...)
	if len(cols) > 0 {
		cols[0] = strings.TrimPrefix(cols[0], "\ufeff")
	}
	return &csvShard{r: r, c: rc, cols: cols, path: path}, nil
}

func (s *csvShard) columns() []string { return s.cols }

func (s *csvShard) next(dst []any) error {
	rec, err := s.r.Read()
	if err == io.EOF {
		return err
	}
	if err != nil {
		line, _ := s.r.FieldPos(0)
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			line = pe.Line
			err = pe.Err
		}
		return fmt.Errorf("%s line %d: %w (the header names %d columns)", s.path, line, err, len(s.cols))
	}
	for i, f := range rec {
		if f == "" {
			dst[i] = nil
		} else {
			dst[i] = strings.Clone(f)
		}
	}
	return nil
}

func (s *csvShard) close() error { return s.c.Close() }

type parquetShard struct {
	r    *parquet.Reader
	c    io.Closer
	cols []string
	text []bool // the leaf is a string (TEXT), not bytes (BLOB)
	buf  []parquet.Row
	n, i int
	path string
}

func openParquetShard(ctx context.Context, path string) (*parquetShard, error) {
	var ra io.ReaderAt
	var c io.Closer
	var size int64
	if !strings.Contains(path, "://") {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		ra, c, size = f, f, st.Size()
	} else {
		fs, err := filesystem.New(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer fs.Close()
		rc, err := fs.OpenRead(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ra, c, size = bytes.NewReader(b), io.NopCloser(nil), int64(len(b))
	}
	f, err := parquet.OpenFile(ra, size)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: not a Parquet file: %w", path, err)
	}
	s := &parquetShard{c: c, path: path}
	for _, fd := range f.Schema().Fields() {
		if !fd.Leaf() || fd.Repeated() {
			c.Close()
			return nil, fmt.Errorf("%s: column %q is nested or repeated; give flat columns, one per table column", path, fd.Name())
		}
		s.cols = append(s.cols, fd.Name())
		s.text = append(s.text, isString(fd.Type()))
	}
	s.r = parquet.NewReader(f)
	s.buf = make([]parquet.Row, 256)
	return s, nil
}

// isString reports a column of strings: the STRING logical type, or the
// older UTF8 converted type.
func isString(t parquet.Type) bool {
	if lt := t.LogicalType(); lt != nil {
		if _, ok := lt.Value.(*format.StringType); ok {
			return true
		}
	}
	ct := t.ConvertedType()
	return ct != nil && *ct == deprecated.UTF8
}

func (s *parquetShard) columns() []string { return s.cols }

func (s *parquetShard) next(dst []any) error {
	if s.i == s.n {
		n, err := s.r.ReadRows(s.buf)
		if n == 0 {
			if err == nil || err == io.EOF {
				return io.EOF
			}
			return fmt.Errorf("%s: %w", s.path, err)
		}
		s.n, s.i = n, 0
	}
	row := s.buf[s.i]
	s.i++
	for i := range dst {
		dst[i] = nil
	}
	for _, v := range row {
		col := v.Column()
		if col < 0 || col >= len(dst) {
			return fmt.Errorf("%s: a value of column %d of %d", s.path, col, len(dst))
		}
		dst[col] = sqlValue(v, s.text[col])
	}
	return nil
}

// sqlValue converts a Parquet value to the SQL value it is inserted as.
func sqlValue(v parquet.Value, text bool) any {
	if v.IsNull() {
		return nil
	}
	switch v.Kind() {
	case parquet.Boolean:
		if v.Boolean() {
			return int64(1)
		}
		return int64(0)
	case parquet.Int32:
		return int64(v.Int32())
	case parquet.Int64:
		return v.Int64()
	case parquet.Float:
		return float64(v.Float())
	case parquet.Double:
		return v.Double()
	case parquet.ByteArray, parquet.FixedLenByteArray:
		if text {
			return string(v.ByteArray())
		}
		return bytes.Clone(v.ByteArray())
	}
	return bytes.Clone(v.Bytes()) // INT96: its 12 bytes
}

func (s *parquetShard) close() error { return s.c.Close() }

// CheckShards makes the in-memory tables, prepares the statement's per-row
// SQL over them, and opens every shard (its header or schema only) to check
// that its columns are columns of the table, before anything is charged. It
// never counts rows.
func CheckShards(ctx context.Context, sh Shards, s *protect.Statement) error {
	if len(sh.Files) == 0 {
		return errors.New("no shard files")
	}
	m, err := openMemDB(ctx, sh, s.Inputs().Table)
	if err != nil {
		return err
	}
	defer m.db.Close()
	if ps, err := m.db.PrepareContext(ctx, s.RowSQL(1, 0)); err != nil {
		return fmt.Errorf("the statement cannot read the shards' table: %w", err)
	} else {
		ps.Close()
	}
	for _, f := range sh.Files {
		src, err := openShard(ctx, sh.Format, f)
		if err != nil {
			return err
		}
		_, err = m.columns(src.columns(), f)
		src.close()
		if err != nil {
			return err
		}
	}
	return nil
}

// readShardFn reads one shard file into its in-memory table a batch at a
// time and emits each row as readRowsFn does.
type readShardFn struct {
	Job    Job
	Shards Shards

	s *protect.Statement
	m *memDB
}

// Setup rebuilds the statement, checks it against the charge, and makes
// the in-memory tables.
func (f *readShardFn) Setup(ctx context.Context) (err error) {
	if f.s, err = f.Job.Statement(); err != nil {
		return err
	}
	f.m, err = openMemDB(ctx, f.Shards, f.s.Inputs().Table)
	return err
}

// Teardown closes the in-memory database.
func (f *readShardFn) Teardown() error {
	if f.m != nil {
		return f.m.db.Close()
	}
	return nil
}

func (f *readShardFn) ProcessElement(ctx context.Context, path string, emit func(string, []byte)) error {
	src, err := openShard(ctx, f.Shards.Format, path)
	if err != nil {
		return err
	}
	defer src.close()
	cols, err := f.m.columns(src.columns(), path)
	if err != nil {
		return err
	}
	q := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		q[i], marks[i] = dpselect.QuoteIdent(c), "?"
	}
	table := "main." + dpselect.QuoteIdent(f.m.table)
	conn, err := f.m.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+table); err != nil {
		return err
	}
	ins, err := conn.PrepareContext(ctx, "INSERT INTO "+table+" ("+strings.Join(q, ", ")+") VALUES ("+strings.Join(marks, ", ")+")")
	if err != nil {
		return err
	}
	defer ins.Close()
	sel := f.s.RowSQL(1, 0)
	vals := make([]any, len(cols))
	line := 1
	for done := false; !done; {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		n := 0
		for ; n < shardBatch; n++ {
			err := src.next(vals)
			if err == io.EOF {
				done = true
				break
			}
			if err != nil {
				tx.Rollback()
				return fmt.Errorf("aggregate pipeline: %w", err)
			}
			line++
			if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, vals...); err != nil {
				tx.Rollback()
				return fmt.Errorf("aggregate pipeline: %s, row %d: the table %s refuses it: %w", path, line-1, f.m.table, err)
			}
		}
		if n > 0 {
			if err := f.emitRows(ctx, tx, sel, emit); err != nil {
				tx.Rollback()
				return err
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// emitRows reads the batch with the statement's SQL.
func (f *readShardFn) emitRows(ctx context.Context, tx *sql.Tx, sel string, emit func(string, []byte)) error {
	rows, err := tx.QueryContext(ctx, sel)
	if err != nil {
		return fmt.Errorf("aggregate pipeline: %w", err)
	}
	defer rows.Close()
	return emitStatementRows(f.s, rows, emit)
}

// emitStatementRows decodes RowSQL's rows and emits each keyed by its
// person or, when each row is a person, by its group.
func emitStatementRows(s *protect.Statement, rows *sql.Rows, emit func(string, []byte)) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	unitMode := s.PrivacyUnit() != ""
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		unit, fig, err := s.DecodeRow(vals)
		if err != nil {
			return err
		}
		g := groupAcc{Keys: fig.Keys, HasKeys: true, F: fig}
		if !unitMode {
			g.F.Persons = 1
		}
		b, err := encodeGroup(g)
		if err != nil {
			return err
		}
		key := protect.CanonKey(fig.Keys)
		if unitMode {
			key = protect.CanonKey([]any{unit})
		}
		emit(key, b)
	}
	return rows.Err()
}

// EncodeRows packs rows of SQL values for a [MemTable].
func EncodeRows(rows [][]any) ([]byte, error) {
	var b []byte
	var err error
	for _, r := range rows {
		if b, err = appendValues(b, r); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func init() {
	register.DoFn3x1[context.Context, string, func(string, []byte), error](&readShardFn{})
}
