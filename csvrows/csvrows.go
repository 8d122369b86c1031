// Package csvrows reads numeric CSV row by row (features and an optional
// integer label column), for dpsql import and dpsql-beam. It is a public
// package because dpsql-beam, a module of its own (beam/), reads its shards
// with it: its API is kept as any other exported API of the module.
package csvrows

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reader reads numeric CSV row by row: every column but the label column
// is a feature; the label column holds integers. A first record with any
// non-numeric field is a header.
type Reader struct {
	r        *csv.Reader
	header   []string // nil without a header row
	labelCol int      // -1: no labels
	dim      int
	pending  []string // the first data record, read while detecting the header
	rows     int
}

// NewReader starts reading CSV. labelColumn names the label column (or, without
// a header, gives its 0-based index); "" picks a column named "label" if the
// header has one, "none" means no labels. comma is the field delimiter.
func NewReader(r io.Reader, labelColumn string, comma rune) (*Reader, error) {
	cr := csv.NewReader(r)
	cr.Comma = comma
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	first, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("csv: the file is empty")
	}
	if err != nil {
		return nil, fmt.Errorf("csv: %w", err)
	}
	c := &Reader{r: cr, labelCol: -1}
	for _, f := range first {
		if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
			c.header = append([]string(nil), first...)
			break
		}
	}
	if c.header == nil {
		c.pending = append([]string(nil), first...)
	}
	switch {
	case labelColumn == "none":
	case labelColumn == "" && c.header != nil:
		for i, h := range c.header {
			if strings.EqualFold(strings.TrimSpace(h), "label") {
				c.labelCol = i
				break
			}
		}
	case labelColumn == "":
	case c.header != nil:
		c.labelCol = findColumn(c.header, labelColumn)
		if c.labelCol < 0 {
			return nil, fmt.Errorf("csv: no column %q for the labels; the columns are %s", labelColumn, strings.Join(c.header, ", "))
		}
	default:
		i, err := strconv.Atoi(labelColumn)
		if err != nil || i < 0 || i >= len(first) {
			return nil, fmt.Errorf("csv: the file has no header row, so --label-column must be a 0-based column number below %d, got %q", len(first), labelColumn)
		}
		c.labelCol = i
	}
	c.dim = len(first)
	if c.labelCol >= 0 {
		c.dim--
	}
	if c.dim == 0 {
		return nil, errors.New("csv: no feature columns")
	}
	return c, nil
}

func findColumn(header []string, name string) int {
	for i, h := range header {
		if strings.TrimSpace(h) == name {
			return i
		}
	}
	for i, h := range header {
		if strings.EqualFold(strings.TrimSpace(h), name) {
			return i
		}
	}
	return -1
}

// Dim is the number of feature columns.
func (c *Reader) Dim() int { return c.dim }

// Labelled reports whether the file has a label column.
func (c *Reader) Labelled() bool { return c.labelCol >= 0 }

// LabelName names the label column ("" without labels).
func (c *Reader) LabelName() string {
	switch {
	case c.labelCol < 0:
		return ""
	case c.header != nil:
		return c.header[c.labelCol]
	}
	return fmt.Sprintf("column %d", c.labelCol)
}

// ReadRow reads the next record's features into dst (len Dim) and its label
// (when there is a label column). It returns io.EOF after the last record.
func (c *Reader) ReadRow(dst []float32) (label int64, err error) {
	rec := c.pending
	c.pending = nil
	if rec == nil {
		if rec, err = c.r.Read(); err != nil {
			if err == io.EOF {
				return 0, io.EOF
			}
			return 0, fmt.Errorf("csv: %w", err)
		}
	}
	c.rows++
	line, _ := c.r.FieldPos(0)
	j := 0
	for i, f := range rec {
		if i == c.labelCol {
			if label, err = parseLabel(f); err != nil {
				return 0, fmt.Errorf("csv: line %d, column %s: %w", line, c.colName(i), err)
			}
			continue
		}
		x, err := strconv.ParseFloat(f, 32)
		if err != nil {
			x, err = strconv.ParseFloat(strings.TrimSpace(f), 32)
		}
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("csv: line %d, column %s: %q is not a finite number", line, c.colName(i), f)
		}
		dst[j] = float32(x)
		j++
	}
	return label, nil
}

func (c *Reader) colName(i int) string {
	if c.header != nil {
		return strconv.Quote(c.header[i])
	}
	return strconv.Itoa(i)
}

// ParseDelimiter reads a --delimiter flag: one character, or "tab".
func ParseDelimiter(s string) (rune, error) {
	switch strings.ToLower(s) {
	case "", ",":
		return ',', nil
	case "tab", `\t`:
		return '\t', nil
	}
	r := []rune(s)
	if len(r) != 1 || r[0] == '"' || r[0] == '\r' || r[0] == '\n' || r[0] == utf8.RuneError || unicode.IsDigit(r[0]) || r[0] == '.' || r[0] == '-' || r[0] == '+' {
		return 0, fmt.Errorf("--delimiter must be one character that cannot occur in a number (e.g. ';', '|' or tab), got %q", s)
	}
	return r[0], nil
}

// parseLabel reads an integer label; "3.0" is accepted as 3.
func parseLabel(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, fmt.Errorf("label %q is not an integer", s)
	}
	return int64(x), nil
}
