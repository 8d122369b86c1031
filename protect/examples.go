package protect

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// Refusals name the part of the statement they are about and end with a
// statement over the same table that would be accepted, built from the
// table's own columns and policy (never from its rows): for SELECT * FROM
// patients, "try SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex,
// COUNT(*) AS n FROM patients GROUP BY sex".

// stepClauses names the clause each checker step checks, by the step's
// method name (a step added to checkerSteps adds its clause here;
// TestEveryStepNamesItsClause checks that every step has one).
var stepClauses = map[string]string{
	"from": dpselect.ClauseFrom, "privacyUnit": dpselect.ClauseFrom, "options": dpselect.ClauseOptions,
	"groupBy": dpselect.ClauseGroupBy, "items": dpselect.ClauseSelect, "intervals": dpselect.ClauseSelect,
	"orderBy": dpselect.ClauseOrderBy, "where": dpselect.ClauseWhere, "budget": dpselect.ClauseOptions,
	"rowWork": dpselect.ClauseWhere, "having": dpselect.ClauseHaving,
}

// stepName returns a checker step's method name.
func stepName(step func(*checker) error) string {
	n := runtime.FuncForPC(reflect.ValueOf(step).Pointer()).Name()
	n = strings.TrimSuffix(n, "-fm")
	return n[strings.LastIndexByte(n, '.')+1:]
}

// withClause names, in a refusal from a checker step, the step's clause.
func withClause(err error, step func(*checker) error) error {
	var r *Refusal
	if errors.As(err, &r) && r.Clause == "" {
		r.Clause = stepClauses[stepName(step)]
	}
	return err
}

// shapeColumn is a column of a protected table as its schema declares it.
type shapeColumn struct{ name, typ string }

// tableShape is what an example statement is built from: the table's
// name, its columns in order with their declared types, and its policy.
type tableShape struct {
	table  string
	cols   []shapeColumn
	policy Policy
}

// readShape reads the declared columns of a main-schema table.
func readShape(ctx context.Context, q ledger.Queryer, table string, p Policy) (tableShape, error) {
	s := tableShape{table: table, policy: p}
	rows, err := q.QueryContext(ctx, `SELECT name, upper(type) FROM pragma_table_info(?, 'main')`, table)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var c shapeColumn
		if err := rows.Scan(&c.name, &c.typ); err != nil {
			return s, err
		}
		s.cols = append(s.cols, c)
	}
	return s, rows.Err()
}

func textType(typ string) bool {
	return strings.Contains(typ, "CHAR") || strings.Contains(typ, "CLOB") || strings.Contains(typ, "TEXT")
}

func numberType(typ string) bool {
	return !textType(typ) && (strings.Contains(typ, "INT") || strings.Contains(typ, "REAL") ||
		strings.Contains(typ, "FLOA") || strings.Contains(typ, "DOUB") || strings.Contains(typ, "NUM") ||
		strings.Contains(typ, "DEC"))
}

// key chooses the example's GROUP BY column: one with public keys, else
// the first text column, else the first column of no declared number type
// and no bounds; never the privacy unit. "" if none.
func (s tableShape) key() string {
	usable := func(c shapeColumn) bool { return !strings.EqualFold(c.name, s.policy.PrivacyUnit) }
	for _, c := range s.cols {
		if _, ok := s.policy.PublicKeys[c.name]; ok && usable(c) {
			return c.name
		}
	}
	for _, c := range s.cols {
		if textType(c.typ) && usable(c) {
			return c.name
		}
	}
	for _, c := range s.cols {
		if _, bounded := s.policy.Bounds[c.name]; usable(c) && !bounded && !numberType(c.typ) {
			return c.name
		}
	}
	return ""
}

// number chooses the example's aggregated column, not the key nor the
// unit: one with bounds in the policy (bounded), else the first of a
// declared number type. "" if none.
func (s tableShape) number(key string) (col string, bounded bool) {
	usable := func(c shapeColumn) bool {
		return !strings.EqualFold(c.name, s.policy.PrivacyUnit) && !strings.EqualFold(c.name, key)
	}
	for _, c := range s.cols {
		if _, ok := s.policy.Bounds[c.name]; ok && usable(c) {
			return c.name, true
		}
	}
	for _, c := range s.cols {
		if numberType(c.typ) && usable(c) {
			return c.name, false
		}
	}
	return "", false
}

// example returns a statement over the table that the checker accepts,
// showing the clause a refusal was about: the SELECT list with an average,
// WHERE with a comparison, ORDER BY and LIMIT; otherwise a count per key.
func (s tableShape) example(clause string) string {
	key := s.key()
	num, bounded := s.number(key)
	var items []string
	if key != "" {
		items = append(items, dpselect.Ident(key))
	}
	items = append(items, "COUNT(*) AS n")
	if clause == dpselect.ClauseSelect && num != "" {
		alias := "mean_" + num
		if dpselect.Ident(alias) != alias {
			alias = "mean"
		}
		if bounded {
			items = append(items, "AVG("+dpselect.Ident(num)+") AS "+alias)
		} else {
			items = append(items, "AVG("+dpselect.Ident(num)+", contribution_bounds_per_group => (0, 100)) AS "+alias)
		}
	}
	q := "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) " + strings.Join(items, ", ") + " FROM " +
		dpselect.Ident(s.table)
	if clause == dpselect.ClauseWhere {
		switch {
		case num != "" && bounded:
			q += " WHERE " + dpselect.Ident(num) + " >= " + num2(s.policy.Bounds[num][0])
		case num != "":
			q += " WHERE " + dpselect.Ident(num) + " >= 0"
		case key != "":
			q += " WHERE " + dpselect.Ident(key) + " IS NOT NULL"
		}
	}
	if key != "" {
		q += " GROUP BY " + dpselect.Ident(key)
	}
	if clause == dpselect.ClauseHaving && key != "" {
		q += " HAVING n >= 10"
	}
	if clause == dpselect.ClauseOrderBy || clause == dpselect.ClauseLimit {
		q += " ORDER BY n DESC LIMIT 10"
	}
	return q
}

func num2(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// withExample adds to a refusal of query (unless it has one) the clause a
// syntax error is in and an example over its table when that table is
// protected: the example depends on the table's schema and policy only.
func (e *Engine) withExample(ctx context.Context, conn ledger.Queryer, query string, err error) error {
	var r *Refusal
	if !errors.As(err, &r) || r.Try != "" {
		return err
	}
	for _, table := range dpselect.Tables(query) {
		if r.Try = e.example(ctx, conn, table, r.Clause); r.Try != "" {
			break
		}
	}
	return err
}

// syntaxRefusal is the refusal of a statement the parser refused, naming
// the clause the error is in.
func syntaxRefusal(query string, err error) *Refusal {
	r := &Refusal{Msg: err.Error()}
	var se *dpselect.SyntaxError
	if errors.As(err, &se) && se.Pos > 0 {
		// Before the SELECT list there is only OPTIONS to get wrong, or
		// the CTEs of a statement that starts WITH.
		if r.Clause, _ = dpselect.Outline(query, se.Pos); r.Clause == "" {
			r.Clause = dpselect.ClauseOptions
			head := strings.Fields(strings.ToUpper(query))
			if len(head) > 1 && head[0] == "EXPLAIN" {
				head = head[1:]
			}
			if len(head) > 0 && strings.HasPrefix(head[0], "WITH") && !strings.Contains(strings.ToUpper(query[:se.Pos]), "DIFFERENTIAL_PRIVACY") {
				r.Clause = "WITH"
			}
		}
	}
	return r
}

// example returns an example statement over table if it is protected
// ("" otherwise, or when its shape cannot be read).
func (e *Engine) example(ctx context.Context, conn ledger.Queryer, table, clause string) string {
	if table == "" {
		return ""
	}
	policies, err := e.policies.load(ctx, conn)
	if err != nil {
		return ""
	}
	for t, p := range policies {
		if strings.EqualFold(t, table) {
			s, err := readShape(ctx, conn, t, p)
			if err != nil || len(s.cols) == 0 {
				return ""
			}
			return s.example(clause)
		}
	}
	return ""
}
