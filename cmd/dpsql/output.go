package main

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Output formats.
const (
	FormatTable = "table" // aligned text table; BLOBs as <blob N bytes>
	FormatCSV   = "csv"   // RFC 4180 with a header row; BLOBs as hex, NULL as an empty field
	FormatJSON  = "json"  // one JSON array of objects per result set; BLOBs as base64
)

func checkFormat(f string) error {
	switch f {
	case FormatTable, FormatCSV, FormatJSON:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use table, csv or json", f)
}

// printer writes result sets one after another in one format; successive
// table and CSV result sets are separated by a blank line.
type printer struct {
	w      io.Writer
	format string
	sets   int
}

func newPrinter(w io.Writer, format string) *printer { return &printer{w: w, format: format} }

// resultSink receives one result set.
type resultSink interface {
	Row(vals []any) error
	Close() error
}

// Begin starts a result set with the given column names.
func (p *printer) Begin(cols []string) (resultSink, error) {
	if p.sets > 0 && p.format != FormatJSON {
		if _, err := io.WriteString(p.w, "\n"); err != nil {
			return nil, err
		}
	}
	p.sets++
	switch p.format {
	case FormatCSV:
		cw := csv.NewWriter(p.w)
		if err := cw.Write(cols); err != nil {
			return nil, err
		}
		return &csvSink{cw: cw, rec: make([]string, len(cols))}, nil
	case FormatJSON:
		keys := make([][]byte, len(cols))
		for i, c := range cols {
			keys[i], _ = json.Marshal(c)
		}
		return &jsonSink{w: p.w, keys: keys}, nil
	default:
		return &tableSink{w: p.w, cols: cols}, nil
	}
}

// Print writes a whole result set.
func (p *printer) Print(cols []string, rows [][]any) error {
	s, err := p.Begin(cols)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := s.Row(r); err != nil {
			return err
		}
	}
	return s.Close()
}

// PrintRows writes every row of rows. started, if not nil, is called before
// the first row is written (or at the end when there are none).
func (p *printer) PrintRows(rows *sql.Rows, started func()) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var sink resultSink
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if sink == nil {
			if started != nil {
				started()
				started = nil
			}
			if sink, err = p.Begin(cols); err != nil {
				return err
			}
		}
		if err := sink.Row(vals); err != nil {
			return err
		}
	}
	if started != nil {
		started()
	}
	if err := rows.Err(); err != nil {
		// Rows already produced are shown: a DP function failing on a later
		// row (budget exhausted) has charged, and released, the earlier ones.
		if sink != nil {
			sink.Close()
		}
		return err
	}
	if sink == nil {
		if sink, err = p.Begin(cols); err != nil {
			return err
		}
	}
	return sink.Close()
}

type tableSink struct {
	w       io.Writer
	cols    []string
	rows    []table.Row
	textCol []bool // a column holding anything but numbers and NULL
	record  []any  // the first row's values when one holds a JSON object
}

func (s *tableSink) Row(vals []any) error {
	if s.textCol == nil {
		s.textCol = make([]bool, len(s.cols))
	}
	if len(s.rows) == 0 && slices.ContainsFunc(vals, func(v any) bool { return jsonObject(v) != nil }) {
		s.record = slices.Clone(vals)
	}
	r := make(table.Row, len(vals))
	for i, v := range vals {
		r[i] = tableCell(v)
		switch v.(type) {
		case nil, int64, float64:
		default:
			s.textCol[i] = true
		}
	}
	s.rows = append(s.rows, r)
	return nil
}

func (s *tableSink) Close() error {
	if len(s.rows) == 1 && s.record != nil {
		return s.printRecord()
	}
	t := table.NewWriter()
	style := table.StyleDefault
	style.Format.Header = text.FormatDefault
	t.SetStyle(style)
	h := make(table.Row, len(s.cols))
	var cfg []table.ColumnConfig
	for i, c := range s.cols {
		h[i] = c
		align := text.AlignLeft
		if s.textCol != nil && !s.textCol[i] {
			align = text.AlignRight
		}
		cfg = append(cfg, table.ColumnConfig{Number: i + 1, Align: align, AlignHeader: text.AlignLeft})
	}
	t.AppendHeader(h)
	t.AppendRows(s.rows)
	t.SetColumnConfigs(cfg)
	out := t.Render()
	if len(s.rows) == 0 {
		out += "\n(no rows)"
	}
	_, err := io.WriteString(s.w, out+"\n")
	return err
}

// printRecord prints a one-row result holding a JSON object (a release's
// summary) as a record, one field a line:
//
//	dp_avgmix(...)
//	  into     released
//	  rows     60000
func (s *tableSink) printRecord() error {
	var b strings.Builder
	for i, v := range s.record {
		fields := jsonObject(v)
		if fields == nil {
			fmt.Fprintf(&b, "%s: %s\n", s.cols[i], tableCell(v))
			continue
		}
		fmt.Fprintf(&b, "%s\n", s.cols[i])
		width := 0
		for _, f := range fields {
			width = max(width, utf8.RuneCountInString(f.key))
		}
		for _, f := range fields {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, f.key, f.value)
		}
	}
	_, err := io.WriteString(s.w, b.String())
	return err
}

type jsonField struct{ key, value string }

// jsonObject returns the fields of v, in their order, when v is TEXT holding
// a JSON object; nil otherwise. Numbers are shown as humanFloat shows them,
// strings without quotes, arrays and objects as compact JSON.
func jsonObject(v any) []jsonField {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(strings.TrimSpace(s), "{") || !json.Valid([]byte(s)) {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.Token() // {
	fields := []jsonField{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		var val json.RawMessage
		if dec.Decode(&val) != nil {
			return nil
		}
		var out string
		var x any
		_ = json.Unmarshal(val, &x)
		switch x := x.(type) {
		case float64:
			out = humanFloat(x)
		case string:
			out = x
		case nil:
			out = "NULL"
		default:
			var c bytes.Buffer
			if json.Compact(&c, val) != nil {
				return nil
			}
			out = c.String()
		}
		fields = append(fields, jsonField{k, out})
	}
	return fields
}

type csvSink struct {
	cw  *csv.Writer
	rec []string
}

func (s *csvSink) Row(vals []any) error {
	for i, v := range vals {
		s.rec[i] = csvCell(v)
	}
	return s.cw.Write(s.rec)
}

func (s *csvSink) Close() error {
	s.cw.Flush()
	return s.cw.Error()
}

type jsonSink struct {
	w    io.Writer
	keys [][]byte
	n    int
	buf  []byte
}

func (s *jsonSink) Row(vals []any) error {
	b := s.buf[:0]
	if s.n == 0 {
		b = append(b, "[\n  {"...)
	} else {
		b = append(b, ",\n  {"...)
	}
	for i, v := range vals {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, s.keys[i]...)
		b = append(b, ": "...)
		if jsonObject(v) != nil { // a JSON object (a release's summary) nests
			b = append(b, strings.TrimSpace(v.(string))...)
			continue
		}
		b = appendJSON(b, v)
	}
	b = append(b, '}')
	s.buf = b
	s.n++
	_, err := s.w.Write(b)
	return err
}

func (s *jsonSink) Close() error {
	end := "\n]\n"
	if s.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(s.w, end)
	return err
}

// tableCell formats a value for a human reader.
func tableCell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return fmt.Sprintf("<blob %d bytes>", len(x))
	case float64:
		return humanFloat(x)
	}
	return plainCell(v)
}

// csvCell formats a value for CSV: full precision, BLOBs in hex, NULL empty.
func csvCell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return hex.EncodeToString(x)
	case float64:
		return exactFloat(x)
	}
	return plainCell(v)
}

// plainCell formats the values every output format prints alike; its callers
// (tableCell, csvCell, appendJSON) handle NULL, BLOBs and floats themselves.
func plainCell(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case []byte:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, x)
		return append(b, '"')
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.AppendQuote(b, exactFloat(x))
		}
		return append(b, exactFloat(x)...)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case bool:
		return strconv.AppendBool(b, x)
	case time.Time:
		return strconv.AppendQuote(b, x.Format(time.RFC3339Nano))
	case json.RawMessage:
		return append(b, x...)
	}
	j, err := json.Marshal(plainCell(v))
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, j...)
}

// humanFloat prints x with 10 significant digits, in positional notation
// unless it is very large or very small: 10001.23457, 0.1, 1e-05.
func humanFloat(x float64) string {
	ax := math.Abs(x)
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) || ax < 1e-4 || ax >= 1e15 {
		return strconv.FormatFloat(x, 'g', 10, 64)
	}
	dec := max(0, 9-int(math.Floor(math.Log10(ax))))
	s := strconv.FormatFloat(x, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// exactFloat prints the shortest representation that reads back as x, in
// positional notation for ordinary magnitudes (JSON-compatible).
func exactFloat(x float64) string {
	ax := math.Abs(x)
	if x != 0 && (ax < 1e-6 || ax >= 1e21) || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}
