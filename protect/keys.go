package protect

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// Canonical group keys. SQLite's GROUP BY outputs a group's key from one of
// the group's rows, so under a collation that makes different values equal
// (NOCASE: 'smith' and 'SMITH'; RTRIM: 'smith' and 'smith  ') or a column
// without a declared type (30 and 30.0) the released key's spelling and type
// would depend on which rows are present: one person could change it. So the
// rewritten SQL groups by the key's canonical form, a function of its value
// fixed by the column's declared type and collation, and releases that:
//
//   - text under NOCASE is lower(x) (SQLite's NOCASE and lower() both fold
//     the ASCII letters only), under RTRIM rtrim(x, ' ');
//   - in a column without a declared type (or of BLOB affinity) an integral
//     REAL is its INTEGER (SQLite's INTEGER, NUMERIC and REAL affinities
//     already store one type per number);
//   - the key is released as SQLite stores it, TEXT, INTEGER, REAL or BLOB,
//     whatever the declared type says: a DATE, DATETIME or TIMESTAMP key is
//     its text ('2024-01-02') or number as stored, a BOOLEAN key its integer
//     (1, 0), never the time.Time or bool the Go driver would make of a
//     column of those declared types (its parse is lossy: '2024-01-02' and
//     '2024-01-02 00:00:00' would both read as one time, 1 and 2 as true,
//     text it cannot parse as the zero time). So a key of NUMERIC affinity,
//     which those types have, is never a bare column: it is the same CASE
//     as under BLOB (a no-op on NUMERIC's values), and an expression has no
//     declared type for a driver to act on;
//   - any other collation (an application's own) is refused.
//
// Public keys (the owner's key table) are canonicalised the same way, after
// the protected column's affinity is applied to them, and matched to the
// data's canonical keys exactly: the data's groups, the public key list,
// MEDIAN's histograms (a query of their own) and an engine outside SQLite
// (Statement.RowSQL) all use the same form, and each released key is a
// canonical form.

// KeyForm is how a GROUP BY column's values compare, read from the schema.
type KeyForm struct {
	// Affinity is the column's type affinity by SQLite's rules for its
	// declared type: INTEGER, TEXT, BLOB (none declared), REAL or NUMERIC.
	Affinity string `json:"affinity"`
	// Collation is the column's collating sequence: BINARY, NOCASE or RTRIM.
	Collation string `json:"collation"`
}

// affinityOf returns the affinity of a declared type (SQLite's rules,
// https://sqlite.org/datatype3.html#determination_of_column_affinity).
func affinityOf(declared string) string {
	t := strings.ToUpper(declared)
	switch {
	case strings.Contains(t, "INT"):
		return "INTEGER"
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return "TEXT"
	case t == "", strings.Contains(t, "BLOB"):
		return "BLOB"
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

// readKeyForms reads the forms of table's columns cols from the schema: the
// declared type, and the collation SQLite compares the column with (read off
// the compiled program of a comparison, which names it).
func readKeyForms(ctx context.Context, conn *sql.Conn, table string, cols []string) (map[string]KeyForm, error) {
	forms := map[string]KeyForm{}
	for _, c := range cols {
		var declared string
		if err := conn.QueryRowContext(ctx, `SELECT type FROM pragma_table_info(?, 'main') WHERE name = ?`, table, c).Scan(&declared); err != nil {
			return nil, fmt.Errorf("reading the declared type of %s.%s: %w", table, c, err)
		}
		coll, err := columnCollation(ctx, conn, table, c)
		if err != nil {
			return nil, err
		}
		forms[c] = KeyForm{Affinity: affinityOf(declared), Collation: coll}
	}
	return forms, nil
}

// columnCollation returns the collation SQLite compares table.col with. A
// collation the connection does not know (an application's own) fails to
// compile: it is reported as such.
func columnCollation(ctx context.Context, conn *sql.Conn, table, col string) (string, error) {
	rows, err := conn.QueryContext(ctx, fmt.Sprintf(`EXPLAIN SELECT 1 FROM main.%s WHERE +%s = ''`, dpselect.QuoteIdent(table), dpselect.QuoteIdent(col)))
	if err != nil {
		if strings.Contains(err.Error(), "no such collation") {
			return "", refusef("GROUP BY %s: the column's collation is the application's own (%v): protected mode releases keys under BINARY, NOCASE and RTRIM only", col, err)
		}
		return "", fmt.Errorf("reading the collation of %s.%s: %w", table, col, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	coll := ""
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		op, _ := vals[1].(string)
		p4, _ := vals[5].(string)
		switch op {
		case "Eq", "Ne", "Lt", "Le", "Gt", "Ge":
			if i := strings.LastIndexByte(p4, '-'); i > 0 && coll == "" {
				coll = p4[:i]
			}
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if coll == "" {
		return "", fmt.Errorf("protect: internal error, cannot read the collation of %s.%s", table, col)
	}
	return coll, nil
}

// setKeyForms records the forms of the plan's GROUP BY columns; a collation
// other than BINARY, NOCASE and RTRIM is refused.
func (pl *plan) setKeyForms(forms map[string]KeyForm) error {
	pl.keyForms = make([]KeyForm, len(pl.keys))
	for i, k := range pl.keys {
		f, ok := forms[k]
		if !ok {
			return fmt.Errorf("protect: no key form for GROUP BY column %s", k)
		}
		switch f.Collation {
		case "BINARY", "NOCASE", "RTRIM":
		default:
			return refusef("GROUP BY %s: the column's collation %s is not one protected mode releases keys under (BINARY, NOCASE, RTRIM): ask the owner to declare the column with one of them", k, f.Collation)
		}
		switch f.Affinity {
		case "INTEGER", "TEXT", "BLOB", "REAL", "NUMERIC":
		default:
			return fmt.Errorf("protect: GROUP BY column %s has an unknown affinity %q", k, f.Affinity)
		}
		pl.keyForms[i] = f
	}
	return nil
}

// text returns the canonical form of the text x under the form's collation.
func (f KeyForm) text(x string) string {
	switch f.Collation {
	case "NOCASE":
		return "lower(" + x + ")"
	case "RTRIM":
		return "rtrim(" + x + ", ' ')"
	}
	return x
}

// canonical returns the SQL of x's canonical form; x is a value of the
// column (data), or a public key value that still needs the column's
// affinity (public).
func (f KeyForm) canonical(x string, public bool) string {
	integral := fmt.Sprintf("CASE WHEN %[1]s = CAST(%[1]s AS INTEGER) THEN CAST(%[1]s AS INTEGER) ELSE %[1]s END", x)
	var real, integer string // the canonical forms of a REAL and of an INTEGER x ("": x)
	switch {
	case !public && (f.Affinity == "BLOB" || f.Affinity == "NUMERIC"):
		// Under NUMERIC affinity this changes no value (SQLite stores an
		// integral REAL as its INTEGER already), but it makes the key an
		// expression, which has no declared type: DATE, DATETIME, TIMESTAMP
		// and BOOLEAN columns (NUMERIC affinity) would otherwise be
		// reinterpreted by the Go driver as time.Time and bool.
		real = integral
	case !public:
	case f.Affinity == "TEXT":
		real, integer = f.text("CAST("+x+" AS TEXT)"), f.text("CAST("+x+" AS TEXT)")
	case f.Affinity == "REAL":
		integer = "CAST(" + x + " AS REAL)"
	default: // INTEGER, NUMERIC, BLOB
		real = integral
	}
	if f.Collation == "BINARY" && real == "" && integer == "" {
		return x
	}
	var b strings.Builder
	fmt.Fprintf(&b, "(CASE typeof(%s)", x)
	if t := f.text(x); t != x {
		fmt.Fprintf(&b, " WHEN 'text' THEN %s", t)
	}
	if real != "" {
		fmt.Fprintf(&b, " WHEN 'real' THEN %s", real)
	}
	if integer != "" {
		fmt.Fprintf(&b, " WHEN 'integer' THEN %s", integer)
	}
	fmt.Fprintf(&b, " ELSE %s END) COLLATE BINARY", x)
	return b.String()
}

// keyExpr returns the SQL of GROUP BY key i's canonical form.
func (pl *plan) keyExpr(i int) string {
	c := pl.keySQL(i)
	if pl.keyForms == nil { // a plan made before its forms were read
		return c
	}
	return pl.keyForms[i].canonical(c, false)
}

// publicKeyExpr returns the SQL of the canonical form of public key i's
// column of its key table.
func (pl *plan) publicKeyExpr(i int) string {
	c := dpselect.QuoteIdent(pl.keySources[i][1])
	if pl.keyForms == nil {
		return c
	}
	return pl.keyForms[i].canonical(c, true)
}

// keyFilter returns the SQL that keeps the rows whose key i is in its public
// list: canonical forms compared exactly (+ drops the column's affinity, so
// that SQLite compares the values as they are).
func (pl *plan) keyFilter(i int) string {
	k := pl.keyExpr(i)
	if k == dpselect.QuoteIdent(pl.keys[i]) {
		k = "+" + k
	}
	return fmt.Sprintf("%s IN (SELECT %s FROM main.%s)", k, pl.publicKeyExpr(i), dpselect.QuoteIdent(pl.keySources[i][0]))
}
