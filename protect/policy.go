package protect

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dpsql/dpsql/internal/jsonkeys"
	"github.com/dpsql/dpsql/ledger"
)

// PolicySchema is dp_policy, one row per protected table: the state the
// policy records of the ledger (dp_ledger rows of kind 'policy') lead to,
// with the id of the record that set it. It is derived: Protect and Unprotect
// change it in the transaction that chains their record, VerifyPolicies
// replays the records and fails if it differs, and analyst connections never
// read it (they replay the records, see LoadPolicies). Analyst connections
// may read it and write nothing.
const PolicySchema = `
CREATE TABLE IF NOT EXISTS dp_policy (
  tbl       TEXT PRIMARY KEY COLLATE NOCASE,
  policy    TEXT NOT NULL,
  ledger_id INTEGER NOT NULL
);
`

// Policy is the owner's rule for one protected table.
type Policy struct {
	// PrivacyUnit is the column that identifies a person; "" means each row
	// is a person (then MaxGroups and MaxRows are 1).
	PrivacyUnit string `json:"privacy_unit,omitempty"`
	// MaxGroups is how many groups of one GROUP BY one person may contribute to.
	MaxGroups int `json:"max_groups"`
	// MaxRows is how many rows per group one person may contribute.
	MaxRows int `json:"max_rows"`
	// Bounds are public clamping bounds per column, used by SUM and AVG when
	// the statement gives none.
	Bounds map[string][2]float64 `json:"bounds,omitempty"`
	// PublicKeys declares, per column, a public table.column that lists the
	// column's possible values: a GROUP BY on columns that all have one
	// releases every listed key (rows with other keys are dropped) with no
	// partition selection.
	PublicKeys map[string]string `json:"public_keys,omitempty"`
	// MaxLength bounds, per column, the bytes of the values a DP statement's
	// WHERE passes to functions and operators (DefaultMaxLength for a column
	// not listed): a row whose value is longer is dropped by such a
	// statement. It bounds the statement's per-row work (cost.go).
	MaxLength map[string]int `json:"max_length,omitempty"`
	// Persons names the set of persons the privacy unit identifies: two
	// protected tables whose policies name the same Persons declare that a
	// value of one's privacy unit and an equal value of the other's identify
	// the same person, so a DP statement may join them on their units
	// (join.go). "" (the default): the table shares its persons with no
	// other, and is never joined with another protected table. Column names
	// alone never imply it: only the owner knows that two tables' ids count
	// the same people.
	Persons string `json:"persons,omitempty"`
}

// MaxPersonsName bounds the length of a policy's Persons.
const MaxPersonsName = 100

// Normalize fills defaults (1 group, 1 row) and checks the policy.
func (p *Policy) Normalize() error {
	if p.MaxGroups == 0 {
		p.MaxGroups = 1
	}
	if p.MaxRows == 0 {
		p.MaxRows = 1
	}
	if p.MaxGroups < 1 || p.MaxGroups > 1<<20 || p.MaxRows < 1 || p.MaxRows > 1<<20 {
		return fmt.Errorf("max_groups and max_rows must lie in [1, 2^20], got %d and %d", p.MaxGroups, p.MaxRows)
	}
	if p.PrivacyUnit == "" && (p.MaxGroups != 1 || p.MaxRows != 1) {
		return errors.New("without a privacy unit each row is a person, who contributes one row to one group: leave max_groups and max_rows at 1, or name the privacy-unit column")
	}
	if p.Persons != "" && p.PrivacyUnit == "" {
		return fmt.Errorf("persons %q needs a privacy unit: without one each row is a person, whom no other table can name", p.Persons)
	}
	if len(p.Persons) > MaxPersonsName || strings.TrimSpace(p.Persons) != p.Persons {
		return fmt.Errorf("persons must be a name of at most %d bytes without leading or trailing spaces, got %q", MaxPersonsName, p.Persons)
	}
	for c, b := range p.Bounds {
		if !(b[0] < b[1]) || math.IsInf(b[0], 0) || math.IsInf(b[1], 0) {
			return fmt.Errorf("bounds of %s must be finite with lo < hi, got [%v, %v]", c, b[0], b[1])
		}
	}
	for c, n := range p.MaxLength {
		if n < 1 || n > MaxMaxLength {
			return fmt.Errorf("max_length of %s must lie in [1, %d] bytes, got %d", c, MaxMaxLength, n)
		}
	}
	return nil
}

// ParsePolicy decodes a policy from JSON (as dp_protect takes it) and
// normalises it. Unknown keys are refused.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	if err := jsonkeys.Check(data); err != nil { // a key twice: which one counts would be the parser's choice
		return p, fmt.Errorf("policy: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("policy is not valid JSON with keys privacy_unit, max_groups, max_rows, bounds, public_keys, max_length, persons: %w", err)
	}
	return p, p.Normalize()
}

func (p Policy) canonical() string {
	b, _ := json.Marshal(p) // map keys are sorted by encoding/json
	return string(b)
}

// tableColumns returns the columns of a main-schema table, by lower-case name.
func tableColumns(ctx context.Context, q ledger.Queryer, table string) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT name FROM pragma_table_info(?, 'main')`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		cols[strings.ToLower(n)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("no table %q in the database", table)
	}
	return cols, nil
}

// canonicalTable returns the table's name as the schema spells it, or an
// error if it is not an ordinary table of the main schema.
func canonicalTable(ctx context.Context, q ledger.Queryer, table string) (string, error) {
	var name, typ string
	err := q.QueryRowContext(ctx, `SELECT name, type FROM main.sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')`, table).Scan(&name, &typ)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("no table %q in the database", table)
	}
	if err != nil {
		return "", err
	}
	if typ != "table" {
		return "", fmt.Errorf("%q is a view; protect the tables it reads", name)
	}
	if strings.HasPrefix(strings.ToLower(name), "dp_") || strings.HasPrefix(strings.ToLower(name), "sqlite_") {
		return "", fmt.Errorf("%q is dpsql's or SQLite's own table and cannot be protected", name)
	}
	return name, nil
}

// Protect records (or replaces) the policy of a table, through db, the
// owner's connection: a policy record is chained in the ledger and dp_policy
// updated in the same transaction. The file needs a ledger (a budget).
func Protect(ctx context.Context, db *sql.DB, table string, p Policy) error {
	if err := p.Normalize(); err != nil {
		return fmt.Errorf("protect %s: %w", table, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	name, err := canonicalTable(ctx, conn, table)
	if err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	cols, err := tableColumns(ctx, conn, name)
	if err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	if p.PrivacyUnit != "" {
		c, ok := cols[strings.ToLower(p.PrivacyUnit)]
		if !ok {
			return fmt.Errorf("protect %s: privacy unit column %q does not exist", name, p.PrivacyUnit)
		}
		p.PrivacyUnit = c
	}
	bounds := map[string][2]float64{}
	for c, b := range p.Bounds {
		cc, ok := cols[strings.ToLower(c)]
		if !ok {
			return fmt.Errorf("protect %s: bounds for column %q, which does not exist", name, c)
		}
		bounds[cc] = b
	}
	if len(bounds) > 0 {
		p.Bounds = bounds
	} else {
		p.Bounds = nil
	}
	keys := map[string]string{}
	for c, src := range p.PublicKeys {
		cc, ok := cols[strings.ToLower(c)]
		if !ok {
			return fmt.Errorf("protect %s: public keys for column %q, which does not exist", name, c)
		}
		kt, kc, _ := strings.Cut(src, ".")
		kt, err := canonicalTable(ctx, conn, kt)
		if err != nil {
			return fmt.Errorf("protect %s: public keys of %s: %w", name, cc, err)
		}
		if strings.EqualFold(kt, name) {
			return fmt.Errorf("protect %s: the public keys of %s cannot come from the protected table itself", name, cc)
		}
		if kc == "" {
			kc = cc
		}
		kcols, err := tableColumns(ctx, conn, kt)
		if err != nil {
			return err
		}
		canon, ok := kcols[strings.ToLower(kc)]
		if !ok {
			return fmt.Errorf("protect %s: public keys of %s: no column %q in %s (write TABLE.COLUMN)", name, cc, kc, kt)
		}
		keys[cc] = kt + "." + canon
	}
	if len(keys) > 0 {
		p.PublicKeys = keys
	} else {
		p.PublicKeys = nil
	}
	lengths := map[string]int{}
	for c, n := range p.MaxLength {
		cc, ok := cols[strings.ToLower(c)]
		if !ok {
			return fmt.Errorf("protect %s: max_length for column %q, which does not exist", name, c)
		}
		lengths[cc] = n
	}
	if len(lengths) > 0 {
		p.MaxLength = lengths
	} else {
		p.MaxLength = nil
	}
	return appendPolicy(ctx, conn, name, &p)
}

// Unprotect removes a table's policy (a policy record, and its row of
// dp_policy, in one transaction); its rows become public. Owner only.
func Unprotect(ctx context.Context, db *sql.DB, table string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ps, err := LoadPolicies(ctx, conn)
	if err != nil {
		return fmt.Errorf("unprotect: %w", err)
	}
	name := ""
	for n := range ps {
		if strings.EqualFold(n, table) {
			name = n
		}
	}
	if name == "" {
		return fmt.Errorf("unprotect: table %q is not protected", table)
	}
	return appendPolicy(ctx, conn, name, nil)
}
