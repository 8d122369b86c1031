package sqlfuncs

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// vectorRows buffers the rows an aggregate sees: features in chunks of
// chunkRows rows (handed to dp_avgmix as they are, or joined by features()
// into one contiguous []float32, n x d, row-major), and labels as class ids or
// label vectors. Chunks avoid re-copying the table as it grows.
type vectorRows struct {
	fn      string
	X       []float32 // the chunk being filled
	chunks  [][]float32
	D       int
	N       int
	Classes []int     // class id per row, when labels are integers
	Y       []float32 // n x K label vectors, when labels are BLOBs
	K       int       // label vector length (BLOB labels) or max class id + 1
	opts    []byte
	failed  error       // the first row error: the statement is failing
	arena   *floatArena // holds X and chunks; free releases it
}

// alloc returns an empty feature buffer of capacity n from the rows' arena.
func (r *vectorRows) alloc(n int) []float32 {
	if r.arena == nil {
		r.arena = newFloatArena()
	}
	return r.arena.alloc(n)
}

// free releases the buffered features; they may not be used afterwards.
func (r *vectorRows) free() {
	r.arena.free()
	r.X, r.chunks = nil, nil
}

// checkClasses checks INTEGER labels against the public number of classes k.
func (r *vectorRows) checkClasses(fn string, k int) error {
	if r.K <= k {
		return nil
	}
	for i, y := range r.Classes {
		if y >= k {
			return fmt.Errorf("%s: label of row %d is %d, outside the %d classes 0..%d", fn, i+1, y, k, k-1)
		}
	}
	return nil
}

// fail remembers the first error of a Step, a recovered panic included, so
// that finish refuses to release.
func (r *vectorRows) fail(err error) {
	if err != nil && r.failed == nil {
		r.failed = err
	}
}

// finish reports whether the buffered rows may be released. SQLite calls an
// aggregate's final function also while it cleans up a failing or
// interrupted statement; a release must not happen then.
func (r *vectorRows) finish(c *Conn) error {
	if r.failed != nil {
		return r.failed
	}
	if interrupted(c.handle) {
		return fmt.Errorf("%s: the statement was interrupted; nothing was released or charged", r.fn)
	}
	return nil
}

// add appends one row; row numbers in errors count from 1 in the order SQLite
// fed the rows.
func (r *vectorRows) add(features, label, opts any) error {
	if r.failed != nil {
		return r.failed
	}
	err := r.addRow(features, label, opts)
	r.fail(err)
	return err
}

// chunkRows is the number of rows per chunk; a power of two, as
// avgmix.Data.ChunkRows requires.
const chunkRows = 4096

// featureChunks returns the features as chunks of exactly chunkRows rows (the
// last may hold fewer), without copying.
func (r *vectorRows) featureChunks() [][]float32 {
	cs := r.chunks
	if len(r.X) > 0 {
		cs = append(cs[:len(cs):len(cs)], r.X)
	}
	return cs
}

// features returns the n x d features as one contiguous slice and drops the
// chunks.
func (r *vectorRows) features() []float32 {
	if len(r.chunks) == 0 {
		return r.X
	}
	old := r.arena
	r.arena = nil
	x := r.alloc(r.N * r.D)
	for _, c := range r.chunks {
		x = append(x, c...)
	}
	x = append(x, r.X...)
	old.free()
	r.chunks, r.X = nil, x
	return x
}

func (r *vectorRows) addRow(features, label, opts any) error {
	row := r.N + 1
	if r.N > 0 && len(r.X) == chunkRows*r.D {
		r.chunks = append(r.chunks, r.X[:len(r.X):len(r.X)])
		r.X = r.alloc(chunkRows * r.D)
	}
	if r.N == 0 {
		b, err := optionBytes(r.fn, opts)
		if err != nil {
			return err
		}
		r.opts = bytes.Clone(b) // opts may point into SQLite's memory
	} else if !sameOptions(r.opts, opts) {
		return fmt.Errorf("%s: options differ at row %d: pass the same options on every row (a constant json_object)", r.fn, row)
	}
	before := len(r.X)
	x, err := AppendVector(r.X, features)
	if err != nil {
		return fmt.Errorf("%s: features of row %d: %w", r.fn, row, err)
	}
	d := len(x) - before
	if r.N == 0 {
		r.D = d
		// The first chunk, from the arena; AppendVector grew a small one.
		x = append(r.alloc(chunkRows*d), x...)
	} else if d != r.D {
		return fmt.Errorf("%s: features of row %d have %d dimensions, earlier rows have %d", r.fn, row, d, r.D)
	}
	switch l := label.(type) {
	case int64:
		if r.Y != nil {
			return fmt.Errorf("%s: label of row %d is an INTEGER but earlier labels are vectors", r.fn, row)
		}
		if l < 0 || l > math.MaxInt32 {
			return fmt.Errorf("%s: label of row %d is %d; class ids must be integers from 0", r.fn, row, l)
		}
		r.Classes = append(r.Classes, int(l))
		if int(l)+1 > r.K {
			r.K = int(l) + 1
		}
	case float64:
		if l != math.Trunc(l) || l < 0 || l > math.MaxInt32 {
			return fmt.Errorf("%s: label of row %d is %v; class ids must be integers from 0", r.fn, row, l)
		}
		return r.addRow(features, int64(l), opts)
	case []byte:
		if l == nil {
			return fmt.Errorf("%s: label of row %d is NULL", r.fn, row)
		}
		if r.Classes != nil {
			return fmt.Errorf("%s: label of row %d is a vector but earlier labels are class ids", r.fn, row)
		}
		lb := len(r.Y)
		y, err := AppendVector(r.Y, l)
		if err != nil {
			return fmt.Errorf("%s: label vector of row %d: %w", r.fn, row, err)
		}
		k := len(y) - lb
		if r.N == 0 {
			r.K = k
		} else if k != r.K {
			return fmt.Errorf("%s: label vector of row %d has %d entries, earlier rows have %d", r.fn, row, k, r.K)
		}
		r.Y = y
	case nil:
		return fmt.Errorf("%s: label of row %d is NULL", r.fn, row)
	default:
		return fmt.Errorf("%s: label of row %d must be an INTEGER class id or a float32 vector BLOB, got %s", r.fn, row, typeName(label))
	}
	r.X = x
	r.N++
	return nil
}

func sameOptions(first []byte, v any) bool {
	switch o := v.(type) {
	case string:
		return string(first) == o
	case []byte:
		return o != nil && bytes.Equal(first, o)
	}
	return false
}

// optionBytes returns the options argument as JSON bytes.
func optionBytes(fn string, v any) ([]byte, error) {
	switch o := v.(type) {
	case string:
		return []byte(o), nil
	case []byte:
		if o == nil {
			return nil, fmt.Errorf("%s: options are NULL; pass json_object(...)", fn)
		}
		return o, nil
	default:
		return nil, fmt.Errorf("%s: options must be a JSON object (json_object(...)), got %s", fn, typeName(v))
	}
}

// decodeOptions decodes JSON options into dst (a pointer to a struct with json
// tags), rejecting unknown keys with the list of known ones. A whole number
// written as a float (20.0, which json_object makes of a REAL) is accepted
// where an integer is expected.
func decodeOptions(fn string, data []byte, dst any) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return fmt.Errorf("%s: options are not a JSON object (pass json_object(...)); got %s", fn, abbreviateJSON(data))
	}
	fields := optionFields(dst)
	for k, v := range raw {
		f, ok := fields[strings.ToLower(k)]
		if !ok {
			return fmt.Errorf("%s: unknown option %q (known options: %s)", fn, k, strings.Join(knownOptions(dst), ", "))
		}
		if isInteger(f.Type) {
			if n, ok := wholeNumber(v); ok {
				raw[k] = n
			}
		}
	}
	norm, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("%s: options: %w", fn, err)
	}
	if err := json.Unmarshal(norm, dst); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			want := "a number"
			switch {
			case isInteger(ute.Type):
				want = "an integer"
			case ute.Type.Kind() == reflect.String:
				want = "TEXT"
			case ute.Type.Kind() == reflect.Bool:
				want = "true or false"
			}
			got := ute.Value
			for k, v := range raw {
				if strings.EqualFold(k, ute.Field) {
					got = abbreviateJSON(v)
				}
			}
			return fmt.Errorf("%s: option %q must be %s, got %s", fn, ute.Field, want, got)
		}
		return fmt.Errorf("%s: options: %w", fn, err)
	}
	return nil
}

// optionFields maps the lower-cased JSON names of dst's fields to the fields
// (encoding/json matches option names case-insensitively).
func optionFields(dst any) map[string]reflect.StructField {
	t := reflect.TypeOf(dst).Elem()
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[strings.ToLower(name)] = f
	}
	return out
}

func isInteger(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// wholeNumber rewrites a JSON number with a fraction or exponent that is a
// whole number of magnitude at most 2^53 (20.0, 2e1) as an integer literal.
func wholeNumber(v json.RawMessage) (json.RawMessage, bool) {
	s := strings.TrimSpace(string(v))
	if !strings.ContainsAny(s, ".eE") || s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return nil, false
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return nil, false
	}
	return json.RawMessage(strconv.FormatInt(int64(x), 10)), true
}

// abbreviateJSON shows a JSON value in an error message, shortened.
func abbreviateJSON(b []byte) string {
	s := strings.TrimSpace(string(b))
	if r := []rune(s); len(r) > 40 {
		s = string(r[:39]) + "…"
	}
	if s == "" {
		return "nothing"
	}
	return s
}

// knownOptions lists dst's option names for error messages; "seed" only in
// builds where it works (-tags dpsql_testseed).
func knownOptions(dst any) []string {
	var keys []string
	t := reflect.TypeOf(dst).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || (name == "seed" && !seedOption) {
			continue
		}
		keys = append(keys, name)
	}
	sort.Strings(keys)
	return keys
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// CheckTableName checks the name of a table dpsql creates (a release's
// "into", dpsql import's TABLE): a plain identifier of letters, digits and _,
// not starting with a digit, at most 128 characters, and not starting with
// dp_ or sqlite_ (reserved for the ledger and for SQLite).
func CheckTableName(name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("%q is not a plain table name: use letters, digits and _, not starting with a digit (at most 128 characters)", name)
	}
	if low := strings.ToLower(name); strings.HasPrefix(low, "dp_") || strings.HasPrefix(low, "sqlite_") {
		return fmt.Errorf("%q: table names starting with dp_ or sqlite_ are reserved", name)
	}
	return nil
}

// outputTable checks the name of a release table: a plain identifier, not a
// dpsql or SQLite internal name, and not an existing table or view.
func outputTable(fn string, tx *sql.Tx, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%s: option \"into\" (the name of the new release table) is required", fn)
	}
	if err := CheckTableName(name); err != nil {
		return "", fmt.Errorf("%s: into: %w", fn, err)
	}
	low := strings.ToLower(name)
	if tx != nil {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE lower(name) = ?`, low).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			return "", fmt.Errorf("%s: table %q already exists; releases never overwrite, choose another \"into\"", fn, name)
		}
	}
	return `"` + name + `"`, nil
}

// Progress, when set, is told how far a long release has got (done of total
// rows). The dpsql command line uses it for its progress bar.
var (
	progressMu sync.Mutex
	progress   func(fn string, done, total int)
)

// SetProgress installs a progress callback for long releases (nil removes it).
func SetProgress(f func(fn string, done, total int)) {
	progressMu.Lock()
	progress = f
	progressMu.Unlock()
}

func report(fn string, done, total int) {
	progressMu.Lock()
	f := progress
	progressMu.Unlock()
	if f != nil {
		f(fn, done, total)
	}
}

// batchInsert writes rows into a release table many at a time: one INSERT of
// batchRows rows costs one round trip instead of batchRows. Blob arguments may
// be reused by the caller once add returns (SQLite copies bound blobs only at
// Exec, so add copies them into its own arena first).
type batchInsert struct {
	tx    *sql.Tx
	head  string // INSERT INTO t (a, b) VALUES
	row   string // (?, ?)
	stmt  *sql.Stmt
	args  []any
	arena []byte
	n     int
}

const batchRows = 64

func newBatchInsert(tx *sql.Tx, quotedTable string, cols ...string) *batchInsert {
	return &batchInsert{tx: tx, head: `INSERT INTO ` + quotedTable + ` (` + strings.Join(cols, ", ") + `) VALUES `,
		row: `(` + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + `)`}
}

func (b *batchInsert) sql(rows int) string {
	return b.head + strings.TrimSuffix(strings.Repeat(b.row+", ", rows), ", ")
}

// add queues one row; []byte values are copied.
func (b *batchInsert) add(vals ...any) error {
	for _, v := range vals {
		if p, ok := v.([]byte); ok && p != nil {
			start := len(b.arena)
			b.arena = append(b.arena, p...)
			v = b.arena[start:len(b.arena):len(b.arena)]
		}
		b.args = append(b.args, v)
	}
	b.n++
	if b.n < batchRows {
		return nil
	}
	if b.stmt == nil {
		var err error
		if b.stmt, err = b.tx.Prepare(b.sql(batchRows)); err != nil {
			return err
		}
	}
	_, err := b.stmt.Exec(b.args...)
	b.args, b.arena, b.n = b.args[:0], b.arena[:0], 0
	return err
}

// flush writes the queued rows and releases the statement.
func (b *batchInsert) flush() error {
	if b.stmt != nil {
		defer b.stmt.Close()
	}
	if b.n == 0 {
		return nil
	}
	_, err := b.tx.Exec(b.sql(b.n), b.args...)
	b.args, b.arena, b.n = b.args[:0], b.arena[:0], 0
	return err
}
