package serve

import (
	"fmt"
	"strings"

	"github.com/dpsql/dpsql/internal/sqllex"
	"github.com/dpsql/dpsql/protect"
	"github.com/dpsql/dpsql/protect/dpselect"
)

// What /v1/query accepts, beyond protected mode's own rules (which still
// apply to everything that runs):
//
//   - SELECT WITH DIFFERENTIAL_PRIVACY statements go to protected mode's
//     engine, charged to the account's scope;
//   - any other statement must be one SELECT (or WITH ... SELECT, or VALUES)
//     and must not name a dpsql object (a word, quoted name or string that
//     starts with "dp_") nor gdp_spend, which charges the scope: an analyst connection may read the ledger, every
//     scope's budget, the accounts and the policies, but over the service
//     an analyst sees only their own scope, through GET /v1/budget and GET
//     /v1/ledger, and spends only through DP statements whose charge the
//     response reports. Service connections are shared by the analysts of a
//     scope, so nothing may create TEMP objects either.

// statementKind says where an accepted statement runs.
type statementKind int

const (
	dpStatement    statementKind = iota // protected mode's engine
	plainStatement                      // an analyst connection of the scope
)

// checkStatement decides whether the service runs q, and where.
func checkStatement(q string) (statementKind, error) {
	if strings.TrimSpace(q) == "" {
		return 0, &badRequest{"the request's \"sql\" is empty: send one SELECT statement"}
	}
	if dpselect.IsDP(q) {
		return dpStatement, nil
	}
	toks, err := sqlTokens(q)
	if err != nil {
		return 0, &badRequest{err.Error()}
	}
	if len(toks) == 0 {
		return 0, &badRequest{"the request's \"sql\" holds only comments: send one SELECT statement"}
	}
	first := strings.ToUpper(toks[0].text)
	if toks[0].kind != tokWord || (first != "SELECT" && first != "WITH" && first != "VALUES") {
		return 0, refusal("the service runs SELECT statements only (SELECT WITH DIFFERENTIAL_PRIVACY on protected tables, a plain SELECT on public ones); %s statements are the owner's", abbreviateWord(toks[0].text))
	}
	for i, t := range toks {
		if t.kind == tokSemicolon {
			if i != len(toks)-1 {
				return 0, refusal("one statement per request: send the statements after the first \";\" in requests of their own")
			}
			continue
		}
		if t.kind == tokWord {
			switch strings.ToUpper(t.text) {
			case "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "PRAGMA", "VACUUM", "REINDEX", "ANALYZE":
				return 0, refusal("the service runs SELECT statements only: %s is the owner's", strings.ToUpper(t.text))
			}
		}
		if t.kind != tokPunct && strings.EqualFold(t.text, "gdp_spend") {
			return 0, refusal("gdp_spend charges the scope by hand: over the service, budget is spent only by SELECT WITH DIFFERENTIAL_PRIVACY, whose response reports the charge")
		}
		if t.kind != tokPunct && strings.HasPrefix(strings.ToLower(t.text), "dp_") {
			return 0, refusal("%s is a dpsql object: over the service, budgets and the ledger are shown for your scope only (GET /v1/budget, GET /v1/ledger), and budget is spent only by SELECT WITH DIFFERENTIAL_PRIVACY", abbreviateWord(t.text))
		}
	}
	return plainStatement, nil
}

func refusal(format string, args ...any) error {
	return &protect.Refusal{Msg: fmt.Sprintf(format, args...)}
}

// badRequest is a request the service cannot read.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func abbreviateWord(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

type tokKind int

const (
	tokWord      tokKind = iota // keyword, name or number
	tokQuoted                   // "name", `name` or [name], unquoted
	tokString                   // 'string', unquoted (SQLite also reads one as a name in FROM)
	tokPunct                    // anything else
	tokSemicolon                // ;
)

type token struct {
	kind tokKind
	text string
}

// sqlTokens reads q with SQLite's tokenizer (package sqllex) and returns the
// tokens this package looks at: comments dropped (an unterminated /* comment
// ends the statement, as in SQLite), strings and quoted names unquoted. A
// blob x'..' reads as the word x and the string of its digits, and a
// parameter as its sigil and the word of its name, so that a name after "x"
// or a sigil is filtered as a word.
func sqlTokens(q string) ([]token, error) {
	var out []token
	for _, t := range sqllex.Tokens(q) {
		if t.Unterminated {
			switch t.Kind {
			case sqllex.Comment:
				return out, nil // SQLite ends an unterminated comment at the end of the input
			case sqllex.Blob:
				return nil, fmt.Errorf("unterminated ' at byte %d of the statement", t.Pos+2)
			}
			return nil, fmt.Errorf("unterminated %c at byte %d of the statement", t.Text[0], t.Pos+1)
		}
		switch t.Kind {
		case sqllex.Word, sqllex.Number:
			out = append(out, token{tokWord, t.Text})
		case sqllex.Quoted:
			out = append(out, token{tokQuoted, t.Value()})
		case sqllex.String:
			out = append(out, token{tokString, t.Value()})
		case sqllex.Blob:
			out = append(out, token{tokWord, t.Text[:1]}, token{tokString, t.Value()})
		case sqllex.Param:
			out = append(out, token{tokPunct, t.Text[:1]})
			if len(t.Text) > 1 {
				out = append(out, token{tokWord, t.Text[1:]})
			}
		case sqllex.Op:
			if t.Text == ";" {
				out = append(out, token{tokSemicolon, ";"})
			} else {
				out = append(out, token{tokPunct, t.Text})
			}
		default: // Illegal
			out = append(out, token{tokPunct, t.Text})
		}
	}
	return out, nil
}
