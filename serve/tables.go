package serve

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/protect"
)

// TablesResponse is the answer of GET /v1/tables: what the account may
// query. It is the owner's policy, which is not secret (an analyst
// connection reads dp_policy too), and the schema: table and column names,
// declared types, bounds and limits; nothing read from the rows. The policy
// is the database's, the same for every scope.
type TablesResponse struct {
	Scope string `json:"scope"`
	// Protected are the tables reached only through SELECT WITH
	// DIFFERENTIAL_PRIVACY, charged to the scope.
	Protected []ProtectedTable `json:"protected"`
	// Public are the other tables, read with a plain SELECT at no charge
	// (the public key tables among them).
	Public []PublicTable `json:"public"`
	// Example is a statement the account may run as written, on a table
	// this database protects (a public one when none is protected; "" when
	// there is no table): the web page's default. Its mu is at most half
	// of what the scope may still spend.
	Example string `json:"example"`
}

// ProtectedTable is one protected table and its policy.
type ProtectedTable struct {
	Table string `json:"table"`
	// PrivacyUnit is the column that identifies a person; "" when each row
	// is a person.
	PrivacyUnit string `json:"privacy_unit"`
	// MaxGroups is how many groups of one GROUP BY a person's rows may
	// reach; MaxRows how many rows per group a person contributes. Rows
	// beyond them are dropped before anything is counted.
	MaxGroups int `json:"max_groups"`
	MaxRows   int `json:"max_rows"`
	// Persons names the persons the privacy unit identifies: protected
	// tables with the same Persons join on their units ("" when none).
	Persons string   `json:"persons,omitempty"`
	Columns []Column `json:"columns"`
}

// Column is a column of a listed table.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"` // the declared type; "" when none
	// Bounds are the policy's clamping bounds, used by SUM and AVG when the
	// statement gives none (contribution_bounds_per_group).
	Bounds *[2]float64 `json:"bounds,omitempty"`
	// PublicKeys is the public table.column that lists the column's
	// possible values: a GROUP BY on it releases every listed key, with no
	// partition selection.
	PublicKeys string `json:"public_keys,omitempty"`
	// MaxLength is the most bytes of the column's values that a WHERE's
	// functions and operators see (a longer value's row is dropped by such a
	// statement). Protected tables only.
	MaxLength int `json:"max_length,omitempty"`
}

// PublicTable is a table the account reads with a plain SELECT.
type PublicTable struct {
	Table   string   `json:"table"`
	Columns []Column `json:"columns"`
}

// policyCache holds the policies replayed from the chain at one head:
// protect.LoadPolicies checks the whole chain, which a page load need not
// repeat while the chain has not moved.
type policyCache struct {
	mu       sync.Mutex
	head     ledger.Head
	policies map[string]protect.Policy
}

func (c *policyCache) load(ctx context.Context, q ledger.Queryer) (map[string]protect.Policy, error) {
	head, err := ledger.ReadHead(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policies != nil && c.head == head {
		return c.policies, nil
	}
	p, err := protect.LoadPolicies(ctx, q)
	if err != nil {
		return nil, err
	}
	c.head, c.policies = head, p
	return p, nil
}

func (s *Server) tables(w http.ResponseWriter, r *http.Request) {
	a := accountOf(r.Context())
	resp, err := s.listTables(r.Context(), a.Scope)
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, "cannot list the tables: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// listTables builds the listing of GET /v1/tables for scope.
func (s *Server) listTables(ctx context.Context, scope string) (*TablesResponse, error) {
	policies, err := s.policies.load(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("reading the policies: %w", err)
	}
	protected := map[string]bool{}
	for t := range policies {
		protected[strings.ToLower(t)] = true
	}
	resp := &TablesResponse{Scope: scope, Protected: []ProtectedTable{}, Public: []PublicTable{}}
	names, err := s.mainTables(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		cols, err := s.columns(ctx, name)
		if err != nil {
			return nil, err
		}
		if !protected[strings.ToLower(name)] {
			resp.Public = append(resp.Public, PublicTable{Table: name, Columns: cols})
			continue
		}
		var p protect.Policy
		for t, tp := range policies {
			if strings.EqualFold(t, name) {
				p = tp
			}
		}
		for i := range cols {
			c := &cols[i]
			c.MaxLength = protect.DefaultMaxLength
			for k, v := range p.MaxLength {
				if strings.EqualFold(k, c.Name) {
					c.MaxLength = v
				}
			}
			for k, v := range p.Bounds {
				if strings.EqualFold(k, c.Name) {
					c.Bounds = &v
				}
			}
			for k, v := range p.PublicKeys {
				if strings.EqualFold(k, c.Name) {
					c.PublicKeys = v
				}
			}
		}
		resp.Protected = append(resp.Protected, ProtectedTable{Table: name, PrivacyUnit: p.PrivacyUnit,
			MaxGroups: p.MaxGroups, MaxRows: p.MaxRows, Persons: p.Persons, Columns: cols})
	}
	mu := 0.5
	if st, err := s.ledger.Remaining(ctx, scope); err == nil {
		mu = exampleMu(st.MuRemaining)
	}
	resp.Example = example(resp, mu)
	return resp, nil
}

// mainTables returns the ordinary tables of the main schema but dpsql's and
// SQLite's own, by name.
func (s *Server) mainTables(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM main.sqlite_schema WHERE type = 'table'
		AND lower(name) NOT LIKE 'dp\_%' ESCAPE '\' AND lower(name) NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// columns returns a table's columns and declared types, in order.
func (s *Server) columns(ctx context.Context, table string) ([]Column, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, type FROM pragma_table_info(?, 'main') ORDER BY cid`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := []Column{}
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// exampleMu is the example's mu: 0.5, or less when the scope has less than
// 1 left (half of what remains, rounded down to two digits), so the example
// runs; 0.5 when the scope has no finite figure.
func exampleMu(remaining float64) float64 {
	if !(remaining < 1) || math.IsNaN(remaining) {
		return 0.5
	}
	if remaining <= 0 {
		return 0.1 // nothing remains: the example is refused, and says so
	}
	half := remaining / 2
	scale := math.Pow(10, math.Floor(math.Log10(half))-1)
	return math.Floor(half/scale+1e-9) * scale
}

// example writes a statement on the first protected table: a count, the
// average of a column with policy bounds, grouped by a column with public
// keys (every listed key is released, none selected from the data).
func example(resp *TablesResponse, mu float64) string {
	if len(resp.Protected) == 0 {
		if len(resp.Public) == 0 {
			return ""
		}
		return "SELECT * FROM " + quoteIdent(resp.Public[0].Table) + " LIMIT 10;"
	}
	t := resp.Protected[0]
	public := map[string]bool{}
	for _, p := range resp.Public {
		public[strings.ToLower(p.Table)] = true
	}
	var key, avg string
	for _, c := range t.Columns {
		if strings.EqualFold(c.Name, t.PrivacyUnit) {
			continue
		}
		keyTable, _, _ := strings.Cut(c.PublicKeys, ".")
		if key == "" && c.PublicKeys != "" && public[strings.ToLower(keyTable)] {
			key = quoteIdent(c.Name)
		}
		if avg == "" && c.Bounds != nil {
			avg = quoteIdent(c.Name)
		}
	}
	items := []string{"COUNT(*) AS n"}
	if key != "" {
		items = append([]string{key}, items...)
	}
	if avg != "" {
		alias := "mean"
		if plainIdent.MatchString(avg) {
			alias += "_" + avg
		}
		items = append(items, "AVG("+avg+") AS "+alias)
	}
	q := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = " + strconv.FormatFloat(mu, 'g', 2, 64) + ")\n  " +
		strings.Join(items, ", ") + "\nFROM " + quoteIdent(t.Table)
	if key != "" {
		q += " GROUP BY " + key
	}
	return q + ";"
}

var plainIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// identKeywords are SQL keywords a table or column might be named after;
// such a name is quoted.
var identKeywords = []string{"all", "and", "as", "asc", "between", "by", "case", "cast", "check", "collate", "column",
	"create", "cross", "default", "delete", "desc", "distinct", "drop", "else", "end", "escape", "except", "exists",
	"filter", "from", "full", "glob", "group", "having", "in", "index", "inner", "insert", "intersect", "into", "is",
	"isnull", "join", "key", "left", "like", "limit", "match", "natural", "not", "notnull", "null", "offset", "on",
	"options", "or", "order", "outer", "over", "primary", "references", "regexp", "right", "select", "set", "table",
	"then", "to", "union", "unique", "update", "using", "values", "when", "where", "window", "with"}

// quoteIdent quotes an identifier when it is not a plain word.
func quoteIdent(s string) string {
	if plainIdent.MatchString(s) && !slices.Contains(identKeywords, strings.ToLower(s)) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
