package protect

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect/dpselect"
	"github.com/dpsql/dpsql/release"
)

// Statements run outside SQLite. An engine that reads the protected rows
// itself (dpsql-beam's aggregate pipeline) plans, charges and releases a DP
// statement with exactly the code [Engine.Query] uses: the checker's plan
// (bounds, quanta, sigmas, threshold, ledger mechanism and details), the
// per-row values of the rewritten SQL (clamped and in fixed point, by the
// same SQL expressions), and the noise, partition selection and ordering of
// releaseRows. What it does itself is the per-person bounding (at most
// max_rows rows per (person, group) and max_groups groups per person, chosen
// uniformly at random from that person's rows alone; one row chosen
// uniformly among all the person's rows when both are 1, as the rewrite's
// onePerPerson does) and the sums per group, with [Figures.Add].

// StatementInputs are everything a statement's plan depends on, all of it
// public: the statement, the protected table's policy and columns, the
// scope's delta, and the public key lists. [NewStatement] turns them into
// the same plan wherever it runs, so a driver can ship them to its workers.
type StatementInputs struct {
	Query      string            `json:"query"`
	Table      string            `json:"table"` // as the schema spells it
	Policy     Policy            `json:"policy"`
	Columns    map[string]string `json:"columns"` // by lower-case name
	ScopeDelta float64           `json:"scope_delta"`
	// Numeric names the aggregated columns whose declared type compares
	// numerically (no TEXT affinity); UnitUnique says the schema declares
	// the privacy-unit column unique. Both come from the table's schema.
	Numeric    map[string]bool `json:"numeric,omitempty"`
	UnitUnique bool            `json:"unit_unique,omitempty"`
	// KeyForms are the GROUP BY columns' declared affinities and
	// collations, by column name: they fix the keys' canonical form.
	KeyForms map[string]KeyForm `json:"key_forms,omitempty"`
	// Facts are the table's NOT NULL and numbers-only columns (from its
	// schema); SelectionRoom is the delta the scope's partition selections
	// may still spend (from the ledger, when the statement was planned).
	Facts         SchemaFacts `json:"facts"`
	SelectionRoom float64     `json:"selection_room,omitempty"`
	// KeyValues are the public keys' values (GROUP BY over public keys),
	// in the order the plan reads them; nil otherwise. Their Go types
	// (int64, float64, string, []byte) matter: ship them with a coder that
	// keeps them.
	KeyValues [][]any `json:"-"`
}

// Statement is a checked DP statement for an engine outside SQLite.
type Statement struct {
	pl *plan
	in StatementInputs
}

// PlanStatement parses and checks query against the policies of the
// database file at path and the delta of scope, as [Engine.Query] does, and
// reads the public key lists. A *Refusal says what is not allowed. Nothing
// is read from the protected table and nothing is charged.
func PlanStatement(ctx context.Context, path, scope, query string) (*Statement, error) {
	e, err := EngineFor(path)
	if err != nil {
		return nil, err
	}
	defer e.Release()
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	pl, err := e.plan(ctx, conn, scope, query)
	if err != nil {
		return nil, err
	}
	b, err := ledger.LoadBudget(ctx, conn, scope)
	if err != nil {
		return nil, err
	}
	numeric := map[string]bool{}
	for _, a := range pl.aggs {
		if a.numericCompare {
			numeric[a.column] = true
		}
	}
	forms := map[string]KeyForm{}
	for i, k := range pl.keys {
		forms[k] = pl.keyForms[i]
	}
	in := StatementInputs{Query: query, Table: pl.table, Policy: pl.policy, Columns: pl.cols, ScopeDelta: b.Delta,
		Numeric: numeric, UnitUnique: pl.unitUnique, KeyForms: forms, KeyValues: pl.keyValues, Facts: pl.facts}
	if !math.IsInf(pl.room, 1) {
		in.SelectionRoom = pl.room
	}
	// The inputs must give the same plan wherever NewStatement runs.
	s, err := NewStatement(in)
	if err != nil {
		return nil, err
	}
	if !samePlan(s.pl, pl) {
		return nil, fmt.Errorf("protect: internal error, the statement's inputs do not reproduce its plan")
	}
	return s, nil
}

// NewStatement rebuilds a statement's plan from its inputs (a worker's copy
// of what [PlanStatement] planned). It reads nothing.
func NewStatement(in StatementInputs) (*Statement, error) {
	st, err := dpselect.Parse(in.Query)
	if err != nil {
		return nil, &Refusal{Msg: err.Error()}
	}
	if st.Join != nil {
		return nil, &Refusal{Clause: dpselect.ClauseFrom, Msg: "joins run only inside SQLite (dpsql query --analyst, " +
			"the analyst service): an engine outside SQLite reads one table; write the statement without JOIN"}
	}
	pl, err := checkStatement(st, map[string]Policy{in.Table: in.Policy}, in.Columns, in.ScopeDelta)
	if err != nil {
		return nil, err
	}
	if err := pl.externalAggregates(); err != nil {
		return nil, err
	}
	if err := pl.setKeyForms(in.KeyForms); err != nil {
		return nil, err
	}
	if in.SelectionRoom > 0 {
		pl.room = in.SelectionRoom
	}
	if err := completePlan(pl, in.Numeric, in.UnitUnique, in.Facts, in.KeyValues); err != nil {
		return nil, err
	}
	return &Statement{pl: pl, in: in}, nil
}

// samePlan compares what two plans charge and release.
func samePlan(a, b *plan) bool {
	return fmt.Sprint(a.mech, a.details, a.aggs, a.keys, a.keyForms, a.where, a.tau, a.values, a.unitUnique, a.conf) ==
		fmt.Sprint(b.mech, b.details, b.aggs, b.keys, b.keyForms, b.where, b.tau, b.values, b.unitUnique, b.conf)
}

// Inputs returns what the plan was made from.
func (s *Statement) Inputs() StatementInputs { return s.in }

// Mechanism is what the statement charges, exactly as [Engine.Query] charges it.
func (s *Statement) Mechanism() mechanism.Mechanism { return s.pl.mech }

// Details are the params record [Engine.Query] records with the charge (a
// copy).
func (s *Statement) Details() StatementDetails {
	d := s.pl.details
	if d.PublicKeys != nil {
		d.PublicKeys = maps.Clone(d.PublicKeys)
	}
	d.Parts = slices.Clone(d.Parts)
	for i := range d.Parts {
		d.Parts[i].Bounds = slices.Clone(d.Parts[i].Bounds)
	}
	return d
}

// Columns are the names of the released columns (with OPTIONS confidence,
// each aggregate's followed by its interval's, alias_lo and alias_hi).
func (s *Statement) Columns() []string { return s.pl.columns() }

// PrivacyUnit is the policy's privacy-unit column; "" when each row is a person.
func (s *Statement) PrivacyUnit() string { return s.pl.policy.PrivacyUnit }

// MaxGroups and MaxRows are the statement's contribution bounds per person.
func (s *Statement) MaxGroups() int { return s.pl.maxGroups }

// MaxRows is the number of rows one person may contribute to one group.
func (s *Statement) MaxRows() int { return s.pl.maxRows }

// HasGroupBy reports whether the statement has a GROUP BY (without one it
// releases exactly one row).
func (s *Statement) HasGroupBy() bool { return len(s.pl.keys) > 0 }

// Aggregates is the number of aggregates (the length of a Figures' slices).
func (s *Statement) Aggregates() int { return len(s.pl.aggs) }

// PublicKeyGroups returns every combination of the public keys (the groups
// a GROUP BY over public keys releases, whether or not the data has them),
// or nil when the statement selects its groups privately or has no GROUP BY.
func (s *Statement) PublicKeyGroups() [][]any {
	if s.pl.keySources == nil {
		return nil
	}
	out := [][]any{}
	for _, g := range publicGroups(s.pl, nil) {
		out = append(out, g.keys)
	}
	return out
}

// RowSQL returns the SELECT that reads the statement's rows of one shard
// (rowid modulo parts equal to part, so parts shards cover the table once),
// one result row per table row that passes WHERE (and, for public keys, whose
// keys are listed) and has a privacy unit: the unit (NULL when each row is a
// person), the group keys, then per aggregate two columns, its value and its
// square as the rewritten SQL computes them (clamped, centred, in fixed
// point; NULL when the value is dropped). [DecodeRow] reads a result row.
func (s *Statement) RowSQL(parts, part int) string {
	pl := s.pl
	var b strings.Builder
	b.WriteString("SELECT ")
	if pl.policy.PrivacyUnit == "" {
		b.WriteString("NULL")
	} else {
		b.WriteString(dpselect.QuoteIdent(pl.policy.PrivacyUnit))
	}
	keys := make([]string, len(pl.keys))
	for i := range pl.keys {
		keys[i] = pl.keyExpr(i) // the canonical form (keys.go)
		b.WriteString(", " + keys[i])
	}
	for _, a := range pl.aggs {
		switch {
		case a.kind == dpselect.Count && a.column == "":
			b.WriteString(", 1, NULL")
		case a.kind == dpselect.Count:
			fmt.Fprintf(&b, ", (%s IS NOT NULL), NULL", dpselect.QuoteIdent(a.column))
		case a.needsSq():
			fmt.Fprintf(&b, ", %s, %s", valueExpr(a), squareExpr(a))
		default:
			fmt.Fprintf(&b, ", %s, NULL", valueExpr(a))
		}
	}
	where := rowFilter(pl)
	if pl.policy.PrivacyUnit != "" {
		where = fmt.Sprintf("(%s) AND %s", where, unitKnown(pl))
	}
	fmt.Fprintf(&b, " FROM main.%s WHERE (%s) AND ((rowid %% %d) + %d) %% %d = %d", dpselect.QuoteIdent(pl.table), where, parts, parts, parts, part)
	return b.String()
}

// Figures are a group's exact, bounded figures (or one row's, or one
// person's contribution to a group): per aggregate, the count or fixed-point
// sum, the count of values and the fixed-point sum of squares.
type Figures struct {
	Keys    []any
	Persons int64 // distinct persons in the group, after bounding
	Vals    []int64
	Counts  []int64
	Sqs     []int64
}

// Add adds g's figures to f (the keys stay f's; empty slices count as zeros).
func (f *Figures) Add(g Figures) {
	f.Persons += g.Persons
	add := func(dst *[]int64, src []int64) {
		if len(src) == 0 {
			return
		}
		if len(*dst) == 0 {
			*dst = make([]int64, len(src))
		}
		for i, v := range src {
			(*dst)[i] += v
		}
	}
	add(&f.Vals, g.Vals)
	add(&f.Counts, g.Counts)
	add(&f.Sqs, g.Sqs)
}

// DecodeRow reads one result row of RowSQL: the privacy unit, and the row's
// figures with its group keys (Persons 0: the caller counts persons after
// bounding).
func (s *Statement) DecodeRow(row []any) (unit any, f Figures, err error) {
	nk, na := len(s.pl.keys), len(s.pl.aggs)
	if len(row) != 1+nk+2*na {
		return nil, f, fmt.Errorf("protect: a statement row of %d values, want %d", len(row), 1+nk+2*na)
	}
	f = Figures{Keys: append([]any(nil), row[1:1+nk]...), Vals: make([]int64, na), Counts: make([]int64, na), Sqs: make([]int64, na)}
	for j := range na {
		v, w := row[1+nk+2*j], row[2+nk+2*j]
		if v != nil {
			f.Vals[j], f.Counts[j] = asInt(v), 1
		}
		f.Sqs[j] = asInt(w)
	}
	return row[0], f, nil
}

// CanonKey identifies a combination of group keys as SQLite's GROUP BY
// compares them (an integral REAL equals the INTEGER): rows whose keys have
// the same CanonKey are one group.
func CanonKey(keys []any) string { return canonKey(keys) }

// ReleaseGroup draws one group's noise exactly as [Engine.Query] does: the
// partition selection (a GROUP BY without public keys; the group is released
// only if its noisy person count reaches the threshold, ok false otherwise),
// then each aggregate's noise and post-processing. The row has the
// statement's columns. ORDER BY and LIMIT apply to all released rows: see
// [Statement.Order].
func (s *Statement) ReleaseGroup(noise *release.Noise, g Figures) (row []any, ok bool) {
	pl := *s.pl
	st := *pl.stmt
	st.OrderBy, st.Limit = nil, -1
	pl.stmt = &st
	if pl.keySources != nil {
		// One group of public keys: the combination is the group's own.
		pl.keyValues = make([][]any, len(g.Keys))
		for i, k := range g.Keys {
			pl.keyValues[i] = []any{k}
		}
	}
	na := len(pl.aggs)
	in := group{keys: g.Keys, persons: g.Persons, vals: pad(g.Vals, na), counts: pad(g.Counts, na), sqs: pad(g.Sqs, na)}
	res := releaseRows(&pl, []group{in}, noise)
	if len(res.Rows) != 1 {
		return nil, false
	}
	return res.Rows[0], true
}

// pad returns v as n values (empty slices are zeros).
func pad(v []int64, n int) []int64 {
	if len(v) == n {
		return v
	}
	out := make([]int64, n)
	copy(out, v)
	return out
}

// Order applies the statement's ORDER BY and LIMIT to its released rows
// (post-processing), as [Engine.Query] does.
func (s *Statement) Order(rows [][]any) [][]any {
	orderRows(s.pl, s.Columns(), rows)
	if l := s.pl.stmt.Limit; l >= 0 && int64(len(rows)) > l {
		rows = rows[:l]
	}
	return rows
}
