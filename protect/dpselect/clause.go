package dpselect

import (
	"strings"

	"github.com/dpsql/dpsql/internal/sqllex"
)

// Clause names, as refusals name the part of a statement they are about.
const (
	ClauseOptions = "OPTIONS"
	ClauseSelect  = "SELECT list"
	ClauseFrom    = "FROM"
	ClauseWhere   = "WHERE"
	ClauseGroupBy = "GROUP BY"
	ClauseHaving  = "HAVING"
	ClauseOrderBy = "ORDER BY"
	ClauseLimit   = "LIMIT"
)

// Outline is what a refusal of src can say without parsing it: the clause
// that holds offset pos (a SyntaxError's Pos; "" before the SELECT list) and
// the table named after its outermost FROM ("" if none). It reads tokens
// only, so it works on statements the parser refuses.
func Outline(src string, pos int) (clause, table string) {
	depth := 0
	fromNext := false
	for _, t := range sqllex.Tokens(src) {
		if t.Kind == sqllex.Space || t.Kind == sqllex.Comment {
			continue
		}
		if fromNext {
			fromNext = false
			if t.Kind == sqllex.Word || t.Kind == sqllex.Quoted {
				table = t.Value()
			}
		}
		inside := t.Pos <= pos || pos < 0
		switch {
		case t.Is("("):
			depth++
		case t.Is(")"):
			depth--
			if depth == 0 && inside && clause == ClauseOptions {
				clause = ClauseSelect
			}
		case depth != 0 || t.Kind != sqllex.Word:
		case t.Is("OPTIONS"):
			if inside {
				clause = ClauseOptions
			}
		case t.Is("FROM"):
			fromNext = true
			if inside {
				clause = ClauseFrom
			}
		case t.Is("WHERE"), t.Is("HAVING"), t.Is("LIMIT"):
			if inside {
				clause = strings.ToUpper(t.Text)
			}
		case t.Is("GROUP"), t.Is("ORDER"):
			if inside {
				clause = strings.ToUpper(t.Text) + " BY"
			}
		}
	}
	return clause, table
}

// Tables returns the tables named after FROM anywhere in src (in CTEs and
// subqueries too), the outermost FROM's first, each once: a refusal's
// example is over the first of them that is protected.
func Tables(src string) []string {
	_, outer := Outline(src, -1)
	var out []string
	if outer != "" {
		out = append(out, outer)
	}
	fromNext := false
	for _, t := range sqllex.Tokens(src) {
		if t.Kind == sqllex.Space || t.Kind == sqllex.Comment {
			continue
		}
		if fromNext && (t.Kind == sqllex.Word || t.Kind == sqllex.Quoted) && !containsFold(out, t.Value()) {
			out = append(out, t.Value())
		}
		fromNext = t.Is("FROM") || t.Is("JOIN")
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// Ident writes an identifier as SQL: as is when it is a plain word that is
// not a keyword of this grammar, else double-quoted.
func Ident(s string) string {
	plain := s != "" && !reserved[strings.ToUpper(s)]
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
	}
	if plain {
		return s
	}
	return QuoteIdent(s)
}
